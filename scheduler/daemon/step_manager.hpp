// step_manager: the steps part of aqsd: processes a running job starts on
// its other nodes through aqs-rsh (OpenMPI's launch agent: the orted of each
// further host), one per job and node, as launches on that node's agent; who
// asked for each (its end is reported there), the nodes where a job ran
// steps (what it left there is killed when the job ends), and a job's
// --signal warning carried to its steps. It owns the step table.
//
// Rule: on the scheduling strand only. The routing table sends it
// `remote_exec` (from the job's launcher connection) and `job_signal` (from
// the job's batch host); the launch part hands it the agents' answers and
// exits that are about steps. It reads the core, the nodes part and the job
// table (never writes them) and reaches agents through the nodes part; it
// stores nothing (steps are not in the store: they end with their job or
// with aqsd's restart, when their agents kill them).
#pragma once

#include <cstdint>
#include <memory>
#include <set>

#include "core/scheduler.hpp"
#include "daemon/job_table.hpp"
#include "daemon/node_manager.hpp"
#include "daemon/step_table.hpp"
#include "protocol/messages.hpp"
#include "protocol/replies.hpp"

namespace aqs::daemon {

class step_manager {
public:
  step_manager(const core::scheduler& core, node_manager& nodes, const job_table& jobs)
      : core_(core), nodes_(nodes), jobs_(jobs) {}

  // aqs-rsh asks to start a process of its job on another host.
  void handle_remote_exec(const std::shared_ptr<connection>& c, const protocol::remote_exec& m);
  // The job's batch host sent its --signal warning: its steps on other nodes get it.
  void handle_job_signal(const std::shared_ptr<connection>& c, const protocol::job_signal& m);
  // An agent's answer to a step's launch; false if `rid` was not one.
  bool launch_answered(const node_entry& n, std::int64_t rid, const protocol::message& m);
  // A job_exited from a node running a step of that job; false if none.
  bool exited(const node_entry& n, const protocol::job_exited& m);
  // The launcher went: its steps end.
  void end_of(const connection& launcher);
  // The job ended: every step ends, and what it left on its steps' nodes.
  void end_of_job(std::int64_t job_id);
  // Whether the job runs a step on node `node`.
  bool runs(std::int64_t job, std::size_t node) const { return steps_.runs(job, node); }
  // Nodes where the job started steps, or null.
  const std::set<std::size_t>* nodes_of(std::int64_t job) const { return steps_.nodes_of(job); }

private:
  const core::scheduler& core_;
  node_manager& nodes_;
  const job_table& jobs_;
  step_table steps_;
};

}  // namespace aqs::daemon
