// aqsd_options: aqsd's configuration, read once: its flags and aqs.conf
// (partitions, the ports' limits, the per-user caps; a flag wins over its
// aqs.conf line), checked before anything starts. aqsd_main.cpp only
// assembles the parts from it.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <variant>

#include "core/partition.hpp"
#include "daemon/controller.hpp"
#include "daemon/faucets_uplink.hpp"
#include "daemon_base/server.hpp"
#include "http/http_server.hpp"

namespace aqs::daemon {

struct aqsd_options {
  std::string state_dir;
  std::string db;      // PostgreSQL connection string; empty: a private server
  std::string socket;  // empty: STATE_DIR/aqsd.sock
  std::string listen;  // HOST:PORT for agents and remote clients; empty: none
  bool foreground = false;
  unsigned threads = 2;
  std::string log_level;  // empty: info, or $AQS_LOG_LEVEL
  // A stall of the event loop (the scheduling strand, the io threads)
  // longer than this is logged with its cause; 0: not watched.
  std::chrono::milliseconds stall_warning{2000};
  // --nice: aqsd's nice and its own session's autogroup's (cpu_priority.hpp);
  // unset: left as started.
  std::optional<int> nice;
  // aqs.conf: the file read (again on SIGHUP), and whether --config named it
  // (then it must exist).
  std::string config_path;
  bool config_named = false;
  // The controller's options (the cluster key and the revoked tokens' file
  // come from the state directory at start).
  controller_options controller;
  server_options server;
  http::http_options http;
  std::optional<uplink_options> uplink;
};

// Parses aqsd's command line and aqs.conf: the options, or the exit code
// (0 after --help, 2 after a one-line error on stderr).
std::variant<aqsd_options, int> parse_aqsd_options(int argc, char** argv);

// aqs.conf read again (SIGHUP): the partitions, or the one-line error. The
// limits are read at start only (the ledger counts against them).
std::variant<core::site_config, std::string> reread_partitions(const aqsd_options& o);

}  // namespace aqs::daemon
