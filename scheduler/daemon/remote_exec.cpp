// remote_exec: processes a job starts on its other nodes through aqs-rsh
// (OpenMPI's launch agent: the orted of each further host). Each runs there
// as a launch of the job on that node (one per job and node), as the job's
// user and pinned to the job's cpus there; its end is reported to the
// connection that asked, and it ends with the job or when that connection
// goes.
#include "daemon/controller.hpp"
#include "daemon/log.hpp"

namespace aqs::daemon {

using core::job_state;

void controller::handle_remote_exec(const conn_ptr& c, const protocol::remote_exec& m) {
  const peer_info& p = c->peer();
  if (!p.launcher || p.job_id != m.job_id) {
    return reply_error(c, m.id, protocol::error_code::unauthorized,
                       "remote_exec needs a launcher connection of job " + std::to_string(m.job_id));
  }
  const core::job* j = sched_.find(static_cast<core::job_id>(m.job_id));
  auto it = jobs_.find(m.job_id);
  if (j == nullptr || !core::holds_processors(j->state) || it == jobs_.end() || !it->second.host) {
    return reply_error(c, m.id, protocol::error_code::invalid_state, "job " + std::to_string(m.job_id) + " is not running");
  }
  auto on_host = [&](std::size_t n) {  // OpenMPI names hosts up to their first '.'
    const std::string& h = nodes_[n].host;
    return n != *it->second.host && (h == m.host || h.substr(0, h.find('.')) == m.host);
  };
  // The job's node on that host, else (an adaptive job: mpirun starts a
  // daemon on every host it may grow onto) the first UP node there.
  const core::processor_set& procs = j->procs;
  std::optional<std::size_t> node;
  procs.for_each([&](std::size_t proc) {
    if (!node && on_host(sched_.machine().node_of(proc))) node = sched_.machine().node_of(proc);
  });
  const bool spare = !node && j->adaptive();
  for (std::size_t n = 0; spare && !node && n < nodes_.size(); ++n) {
    if (on_host(n) && sched_.machine().at(n).state == core::node_state::up) node = n;
  }
  if (!node) {
    return reply_error(c, m.id, protocol::error_code::not_found,
                       "job " + std::to_string(m.job_id) + " has no processors on another node of host " + m.host);
  }
  if (steps_.count({m.job_id, *node}) != 0) {
    return reply_error(c, m.id, protocol::error_code::invalid_state,
                       "job " + std::to_string(m.job_id) + " already runs a process on " + nodes_[*node].name);
  }
  if (!nodes_[*node].conn) {
    return reply_error(c, m.id, protocol::error_code::invalid_state, "node " + nodes_[*node].name + " is not connected");
  }
  const job_entry& e = it->second;
  protocol::launch l;
  l.id = next_request_id_++;
  l.job_id = m.job_id;
  l.job.name = "step";
  l.job.argv = {"/bin/sh", "-c", m.command};
  l.job.workdir = "/";
  l.job.environment = m.environment;
  l.job.stdout_pattern = "/dev/null";
  l.job.min_pe = l.job.max_pe = 1;
  l.user = e.user;
  l.uid = e.uid;
  l.gid = e.gid;
  l.procs = procs.to_string();
  l.nprocs = static_cast<std::int64_t>(procs.count());
  l.local_cpus = local_cpus(nodes_[*node], procs);
  // A daemon on a spare host idles until the job grows there (and its ranks
  // pin themselves then): it may run on any of the node's cpus.
  if (l.local_cpus.empty()) l.local_cpus = nodes_[*node].cpus;
  l.nodelist = core::format_processor_map(spans(), procs);
  l.job_token = e.token;
  fill_placement(procs, l.proc_hosts, l.proc_cpus);
  steps_[{m.job_id, *node}] = step_entry{c, m.id, l.id, false};
  send_to_node(*node, std::move(l));
}

bool controller::step_launch_answered(const node_entry& n, std::int64_t rid, const protocol::message& m) {
  for (auto it = steps_.begin(); it != steps_.end(); ++it) {
    if (it->first.second != n.index || it->second.launch != rid) continue;
    auto conn = it->second.conn.lock();
    if (const auto* err = std::get_if<protocol::error>(&m)) {
      if (conn) conn->send(protocol::error{it->second.request, protocol::error_code::internal,
                                           "could not start on " + n.name + ": " + err->message});
      steps_.erase(it);
    } else {
      it->second.started = true;
      step_nodes_[it->first.first].insert(n.index);
      if (conn) conn->send(protocol::ok{it->second.request, {{"node", n.name}}});
    }
    return true;
  }
  return false;
}

bool controller::step_exited(const node_entry& n, const protocol::job_exited& m) {
  auto it = steps_.find({m.job_id, n.index});
  if (it == steps_.end()) return false;
  if (auto conn = it->second.conn.lock()) {
    conn->send(protocol::step_ended{m.job_id, n.name, m.exit_code, m.signal});
  }
  steps_.erase(it);
  return true;
}

void controller::end_steps_of(const conn_ptr& conn) {
  for (auto it = steps_.begin(); it != steps_.end();) {
    if (it->second.conn.lock() == conn || it->second.conn.expired()) {
      send_to_node(it->first.second, protocol::kill{next_request_id_++, it->first.first, 9, 0, true});
      it = steps_.erase(it);
    } else {
      ++it;
    }
  }
}

void controller::end_steps_of_job(std::int64_t job_id) {
  std::set<std::size_t> nodes;
  if (auto sn = step_nodes_.find(job_id); sn != step_nodes_.end()) {
    nodes = std::move(sn->second);
    step_nodes_.erase(sn);
  }
  for (auto it = steps_.lower_bound({job_id, 0}); it != steps_.end() && it->first.first == job_id;) {
    nodes.insert(it->first.second);
    if (auto conn = it->second.conn.lock()) conn->send(protocol::step_ended{job_id, nodes_[it->first.second].name, std::nullopt, 15});
    it = steps_.erase(it);
  }
  // The agent kills the step if it still runs, and whatever of the job it
  // left behind there.
  for (std::size_t n : nodes) {
    if (sched_.machine().at(n).state != core::node_state::down) {
      send_to_node(n, protocol::kill{next_request_id_++, job_id, 15, 2, true});
    }
  }
}

bool controller::runs_step(std::int64_t job_id, std::size_t node) const { return steps_.count({job_id, node}) != 0; }

}  // namespace aqs::daemon
