// stat_socket: where a node agent answers `aqs-sstat` about the jobs it runs
// on its machine: an abstract Unix socket whose name both sides compute from
// the aqsd they serve and the node's name (several agents of several
// clusters can share one machine). Only the job's owner and root are
// answered (the agent checks SO_PEERCRED).
#pragma once

#include <string>

namespace aqs::protocol {

// The abstract socket name (it begins with a NUL byte) of node `node`'s
// agent serving the aqsd at `aqsd` (its socket path or host:port).
std::string stat_socket_name(const std::string& aqsd, const std::string& node);

}  // namespace aqs::protocol
