// step_manager (step_manager.hpp): processes a job starts on its other nodes through aqs-rsh
// (OpenMPI's launch agent: the orted of each further host). Each runs there
// as a launch of the job on that node (one per job and node), as the job's
// user and pinned to the job's cpus there; its end is reported to the
// connection that asked, and it ends with the job or when that connection
// goes.
#include "daemon/step_manager.hpp"

#include "core/map_display.hpp"
#include "daemon/pipeline.hpp"
#include "logging/log.hpp"

namespace aqs::daemon {

using core::job_state;

void step_manager::handle_remote_exec(const std::shared_ptr<connection>& c, const protocol::remote_exec& m) {
  const peer_info& p = c->peer();
  if (!p.launcher || p.job_id != m.job_id) {
    return reply_error(c, m.id, protocol::error_code::unauthorized,
                       "remote_exec needs a launcher connection of job " + std::to_string(m.job_id));
  }
  const core::job* j = core_.find(static_cast<core::job_id>(m.job_id));
  const job_entry* e = jobs_.find(m.job_id);
  if (j == nullptr || !core::holds_processors(j->state) || e == nullptr || !e->host) {
    return reply_error(c, m.id, protocol::error_code::invalid_state, "job " + std::to_string(m.job_id) + " is not running");
  }
  auto on_host = [&](std::size_t n) {  // OpenMPI names hosts up to their first '.'
    const std::string& h = nodes_.at(n).host;
    return n != *e->host && (h == m.host || h.substr(0, h.find('.')) == m.host);
  };
  // The job's node on that host, else (an adaptive job: mpirun starts a
  // daemon on every host it may grow onto) the first UP node there.
  const core::processor_set& procs = j->procs;
  std::optional<std::size_t> node;
  procs.for_each([&](std::size_t proc) {
    if (!node && on_host(core_.machine().node_of(proc))) node = core_.machine().node_of(proc);
  });
  const bool spare = !node && j->adaptive();
  for (std::size_t n = 0; spare && !node && n < nodes_.size(); ++n) {
    if (on_host(n) && core_.machine().at(n).state == core::node_state::up) node = n;
  }
  if (!node) {
    return reply_error(c, m.id, protocol::error_code::not_found,
                       "job " + std::to_string(m.job_id) + " has no processors on another node of host " + m.host);
  }
  const node_entry& target = nodes_.at(*node);
  if (steps_.runs(m.job_id, *node)) {
    return reply_error(c, m.id, protocol::error_code::invalid_state,
                       "job " + std::to_string(m.job_id) + " already runs a process on " + target.name);
  }
  if (!target.conn) {
    return reply_error(c, m.id, protocol::error_code::invalid_state, "node " + target.name + " is not connected");
  }
  protocol::launch l;
  l.id = nodes_.new_request_id();
  l.job_id = m.job_id;
  l.job.name = e->name.empty() ? "step" : e->name;
  l.job.argv = {"/bin/sh", "-c", m.command};
  l.job.workdir = "/";
  l.job.environment = m.environment;
  l.job.stdout_pattern = "/dev/null";
  l.job.min_pe = l.job.max_pe = 1;
  // The job's layout, so that its ranks here see the job's Slurm variables
  // (and its memory limit applies on this node too).
  if (e->geometry) {
    l.job.geometry = e->geometry;
    l.job.geometry->array.reset();
    if (e->req.adaptive) {
      // Its layout now: the ranks of the map it holds (its node bounds are
      // aqsd's to keep), and its --mem on this node as on every other.
      l.job.geometry->ntasks = static_cast<std::int64_t>(procs.count()) / l.job.geometry->cpus_per_task;
      l.job.geometry->nodes_min.reset();
      l.job.geometry->nodes_max.reset();
    }
    l.job.min_pe = l.job.max_pe = l.job.geometry->ntasks * l.job.geometry->cpus_per_task;
  }
  l.user = e->user;
  l.uid = e->uid;
  l.gid = e->gid;
  l.procs = procs.to_string();
  l.nprocs = static_cast<std::int64_t>(procs.count());
  l.local_cpus = node_registry::local_cpus(target, procs);
  // A daemon on a spare host idles until the job grows there (and its ranks
  // pin themselves then): it may run on any of the node's cpus.
  if (l.local_cpus.empty()) l.local_cpus = target.cpus;
  l.nodelist = core::format_processor_map(nodes_.spans(), procs);
  l.job_token = e->token;
  nodes_.fill_placement(procs, l.proc_hosts, l.proc_cpus);
  steps_.add(m.job_id, *node, step_entry{c, m.id, l.id, false});
  nodes_.send(*node, std::move(l));
}

bool step_manager::launch_answered(const node_entry& n, std::int64_t rid, const protocol::message& m) {
  const auto k = steps_.by_launch(n.index, rid);
  if (!k) return false;
  if (const auto* err = std::get_if<protocol::error>(&m)) {
    const auto s = steps_.take(*k);
    if (auto conn = s->conn.lock()) {
      conn->send(protocol::error{s->request, protocol::error_code::internal,
                                 "could not start on " + n.name + ": " + err->message});
    }
  } else {
    steps_.started(*k);
    const step_entry* s = steps_.find(*k);
    if (auto conn = s->conn.lock()) conn->send(protocol::make_ok(s->request, protocol::remote_exec_reply{n.name}));
  }
  return true;
}

bool step_manager::exited(const node_entry& n, const protocol::job_exited& m) {
  const auto s = steps_.take({m.job_id, n.index});
  if (!s) return false;
  if (auto conn = s->conn.lock()) conn->send(protocol::step_ended{m.job_id, n.name, m.exit_code, m.signal});
  return true;
}

void step_manager::end_of(const connection& launcher) {
  for (const auto& [job, node] : steps_.take_of(launcher)) {
    nodes_.send(node, protocol::kill{nodes_.new_request_id(), job, 9, 0, true});
  }
}

void step_manager::end_of_job(std::int64_t job_id) {
  const step_table::job_end ended = steps_.take_job(job_id);
  for (const auto& [node, launcher] : ended.open) {
    if (auto conn = launcher.lock()) conn->send(protocol::step_ended{job_id, nodes_.at(node).name, std::nullopt, 15});
  }
  // The agent kills the step if it still runs, and whatever of the job it
  // left behind there.
  for (std::size_t n : ended.nodes) {
    if (core_.machine().at(n).state != core::node_state::down) {
      nodes_.send(n, protocol::kill{nodes_.new_request_id(), job_id, 15, 2, true});
    }
  }
}

// Slurm sends a --signal warning without B: to all the job's steps on all
// its nodes. The batch host's agent times it (it alone knows the time the
// job has left, suspensions and its own restarts included: the warning is
// in its spool) and signals what the job runs there; it then asks here, and
// the job's steps on its other nodes (MPI daemons through aqs-rsh, and
// their ranks) get it from their agents, the daemon itself excepted as the
// batch shell is on the batch host.
void step_manager::handle_job_signal(const std::shared_ptr<connection>& c, const protocol::job_signal& m) {
  const node_entry* n = nodes_.heard(*c);
  if (n == nullptr) return reply_error(c, m.id, protocol::error_code::invalid_state, "register first");
  const job_entry* e = jobs_.find(m.job_id);
  const core::job* j = core_.find(static_cast<core::job_id>(m.job_id));
  // Only the job's batch host speaks for it; a late report (the job ended,
  // or was requeued elsewhere) is acknowledged and dropped, so the agent
  // does not send it again.
  if (e != nullptr && e->host == n->index && j != nullptr && core::holds_processors(j->state)) {
    if (const auto* sn = steps_.nodes_of(m.job_id)) {
      for (std::size_t other : *sn) {
        if (other == n->index || other >= nodes_.size() ||
            core_.machine().at(other).state == core::node_state::down) {
          continue;
        }
        protocol::kill k{nodes_.new_request_id(), m.job_id, m.signal, 0, false};
        k.steps = true;
        nodes_.send(other, std::move(k));
      }
    }
    logging::info("job {}: --signal {} sent on {} and its steps' nodes", m.job_id, m.signal, n->name);
  }
  c->send(protocol::ok{m.id, {}});
}

}  // namespace aqs::daemon
