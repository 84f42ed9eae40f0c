// nodes: agents registering (new nodes numbered after the last), heartbeats,
// lost jobs, and nodes going DOWN when they fall silent.
#include <algorithm>

#include "daemon/controller.hpp"
#include "logging/log.hpp"

namespace aqs::daemon {

using core::job_state;

namespace {

std::string cpu_ranges(const std::vector<std::int64_t>& cpus) {
  std::int64_t top = 0;
  for (auto c : cpus) top = std::max(top, c);
  core::processor_set s(static_cast<std::size_t>(top) + 1);
  for (auto c : cpus) s.set(static_cast<std::size_t>(c));
  return s.to_ranges();
}

}  // namespace

void controller::refresh_spans() {
  view_.set_spans(nodes_.spans());
  view_.set_machine(sched_.machine(), sched_.resources());
}

void controller::send_to_node(std::size_t index, protocol::message m) {
  node_entry& n = nodes_.at(index);
  if (n.conn) {
    n.conn->send(std::move(m));
  } else {
    n.queued.push_back(std::move(m));
  }
}

void controller::handle_register(const conn_ptr& c, const protocol::register_node& m) {
  store::node_request req;
  req.name = m.name;
  req.address = c->peer().remote;
  req.nprocs = static_cast<std::int32_t>(m.procs);
  req.cpus = cpu_ranges(m.cpus);
  req.memory_mb = m.memory_mb;
  req.gpus = static_cast<std::int32_t>(m.gpus);
  const node_entry* known = nodes_.find(m.name);
  if (known != nullptr && known->nprocs != static_cast<std::size_t>(m.procs)) {
    return reply_error(c, m.id, protocol::error_code::bad_request,
                       "node " + m.name + " registered again with " + std::to_string(m.procs) + " processors, it had " +
                           std::to_string(known->nprocs) + ": renumbering would move running jobs");
  }
  if (known != nullptr && known->conn && known->conn->serial() != c->serial()) {
    // The name belongs to the agent that holds it: nobody takes it over
    // while that agent is connected (it frees the name by disconnecting,
    // or the node goes DOWN when it falls silent).
    return reply_error(c, m.id, protocol::error_code::invalid_state,
                       "node " + m.name + " is in use by a connected agent (" + known->conn->peer().remote +
                           "); retry once it is gone");
  }
  auto result = std::make_shared<std::optional<store::node_record>>();
  auto refusal = std::make_shared<std::string>();
  store_task(
      [req, result, refusal](store::job_store& st) {
        try {
          *result = st.register_node(req);
        } catch (const store::invalid_job& e) {
          *refusal = e.what();
        }
      },
      [this, c, m, result, refusal] {
        if (!*result) return reply_error(c, m.id, protocol::error_code::bad_request, *refusal);
        const node_entry* existing = nodes_.find(m.name);
        std::size_t index;
        if (existing == nullptr) {
          index = sched_.add_node(m.name, static_cast<std::size_t>(m.procs));
          if (sched_.machine().at(index).first_proc != static_cast<std::size_t>((*result)->first_proc)) {
            return fatal("node " + m.name + " numbered differently by the store and the scheduler");
          }
          node_entry n;
          n.name = m.name;
          n.index = index;
          n.first_proc = static_cast<std::size_t>((*result)->first_proc);
          n.nprocs = static_cast<std::size_t>(m.procs);
          nodes_.add(std::move(n));
          refresh_spans();
          logging::info("node {} registered: processors {}-{}", m.name, (*result)->first_proc,
              (*result)->first_proc + m.procs - 1);
        } else {
          index = existing->index;
        }
        finish_register(c, m, index);
      });
}

void controller::finish_register(const conn_ptr& c, const protocol::register_node& m, std::size_t index) {
  node_entry& n = nodes_.at(index);
  if (n.conn && n.conn->serial() != c->serial()) {
    // Another agent took the name while this one's store write ran.
    return reply_error(c, m.id, protocol::error_code::invalid_state,
                       "node " + m.name + " is in use by a connected agent (" + n.conn->peer().remote +
                           "); retry once it is gone");
  }
  n.conn = c;
  refresh_agent_addresses();
  n.probe_port = m.probe_port;
  n.containment = m.containment;
  n.peers_sent = 0;  // its next heartbeat's ok lists its peers
  peers_changed();
  n.cpus = m.cpus;
  n.host = m.host.empty() ? m.name : m.host;
  n.memory_mb = m.memory_mb;
  n.gpus = m.gpus;
  sched_.set_node_resources(index, static_cast<std::uint64_t>(std::max<std::int64_t>(m.memory_mb, 0)),
                            static_cast<std::size_t>(std::max<std::int64_t>(m.gpus, 0)));
  refresh_spans();
  n.last_seen = clock_.now();
  n.last_stored_heartbeat = n.last_seen;
  if (sched_.machine().at(index).state == core::node_state::down) {
    sched_.apply(core::event::on_node(core::event::kind::node_up, index));
    logging::info("node {} is UP again", n.name);
  }
  // Its `running` list names jobs of the cluster `m.cluster_id` (the one its
  // spool's jobs were started for): another cluster's, or an agent that does
  // not know whose they are, is set aside: never adopted, never killed (the
  // agent does not adopt them either, once it has learnt our id below).
  std::vector<std::int64_t> running = m.running;
  if (!running.empty() && m.cluster_id != cluster_id_) {
    logging::warn("node {}: set aside {} running job(s) of {} (this is cluster {}): not adopted, not killed: {}",
                  n.name, running.size(),
                  m.cluster_id.empty() ? std::string("an unknown cluster") : "cluster " + m.cluster_id, cluster_id_,
                  fmt::join(running, ","));
    running.clear();
  }
  // Jobs it runs that we no longer want there die before it takes new work.
  std::vector<std::int64_t> kill;
  for (std::int64_t r : running) {
    job_entry* e = jobs_.find(r);
    const core::job* j = sched_.find(static_cast<core::job_id>(r));
    if (e != nullptr && j != nullptr && core::holds_processors(j->state) && e->host == index) {
      e->launch_confirmed = true;
      e->recovered = false;
      e->misses = 0;
    } else if (steps_.runs(r, index)) {
      // A step of the job (remote_exec) that outlived a reconnect.
    } else {
      kill.push_back(r);
    }
  }
  if (!kill.empty()) {
    logging::info("node {}: killing {} job(s) it still ran that ended here: {}", n.name, kill.size(),
                  fmt::join(kill, ","));
  }
  c->send(protocol::make_ok(m.id, protocol::register_reply{static_cast<std::int64_t>(n.first_proc), kill, cluster_id_}));
  std::vector<protocol::message> queued = std::move(n.queued);
  n.queued.clear();
  for (auto& q : queued) {
    if (auto* l = std::get_if<protocol::launch>(&q)) {
      const core::job* j = sched_.find(static_cast<core::job_id>(l->job_id));
      const job_entry* e = jobs_.find(l->job_id);
      if (j == nullptr || !core::holds_processors(j->state) || e == nullptr || e->host != index) continue;
    }
    c->send(std::move(q));
  }
  decide_needed_ = true;
  kick();
}

void controller::handle_heartbeat(const conn_ptr& c, const protocol::heartbeat& m) {
  node_entry* n = nodes_.of_conn(*c);
  if (n == nullptr) return reply_error(c, m.id, protocol::error_code::invalid_state, "register first");
  n->last_seen = clock_.now();
  // A job its agent confirmed and no longer lists, twice, with no report of
  // its end: lost (its agent died with it and came back without it).
  std::vector<std::int64_t> lost, relaunch;
  // Only jobs holding processors can run here: walking every live job (a
  // queue of 100,000) on each heartbeat of each node starved submissions.
  for (const auto& [end, held] : sched_.holding_by_end()) {
    const auto id = static_cast<std::int64_t>(held);
    job_entry* found = jobs_.find(id);
    if (found == nullptr) continue;
    job_entry& e = *found;
    if (e.host != n->index) continue;
    if (e.recovered) {
      // Registration and the resent reports came before this heartbeat.
      e.recovered = false;
      if (std::find(m.running.begin(), m.running.end(), id) == m.running.end()) relaunch.push_back(id);
      continue;
    }
    if (!e.launch_confirmed) continue;
    if (std::find(m.running.begin(), m.running.end(), id) != m.running.end()) {
      e.misses = 0;
    } else if (++e.misses >= 2) {
      lost.push_back(id);
    }
  }
  for (std::int64_t id : relaunch) {
    const core::job* j = sched_.find(static_cast<core::job_id>(id));
    if (j == nullptr || !core::holds_processors(j->state)) continue;
    logging::info("job {}: node {} never got its launch (aqsd stopped first): launching it now", id, n->name);
    launch(id, j->procs);
  }
  for (std::int64_t id : lost) {
    const core::job* j = sched_.find(static_cast<core::job_id>(id));
    if (j == nullptr || !core::holds_processors(j->state)) continue;
    logging::warn("job {} is lost: node {} no longer runs it and never reported its end", id, n->name);
    end_job(id, job_state::failed, std::nullopt, std::nullopt, "lost: node " + n->name + " no longer runs it");
  }
  if (n->last_seen - n->last_stored_heartbeat > std::chrono::seconds(10)) {
    n->last_stored_heartbeat = n->last_seen;
    store_task([name = n->name](store::job_store& st) { st.heartbeat(name); }, [] {});
  }
  if (m.latency) take_latency_report(*n, *m.latency);
  c->send(heartbeat_ok(*n, m));
}

void controller::check_heartbeats() {
  if (stopped_) return;
  const auto t = clock_.now();
  for (auto& n : nodes_) {
    if (sched_.machine().at(n.index).state == core::node_state::down) continue;
    if (t - n.last_seen > options_.heartbeat_timeout) {
      node_down(n.index, "no word from its agent for " + std::to_string(options_.heartbeat_timeout.count()) + " ms");
    }
  }
  heartbeat_timer_ = clock_.after(strand_, std::chrono::milliseconds(200), [this] { check_heartbeats(); });
}

void controller::node_down(std::size_t index, const std::string& why) {
  node_entry& n = nodes_.at(index);
  logging::info("node {} is DOWN: {}", n.name, why);
  if (n.conn) {
    n.conn->close();
    n.conn.reset();
    refresh_agent_addresses();
  }
  n.queued.clear();  // launches for it are void; its jobs are requeued or failed
  latency_.forget(n.name);
  peers_changed();
  sched_.apply(core::event::on_node(core::event::kind::node_down, index));
  batch_.store_ops.push_back([name = n.name](store::job_store& st) { st.set_node_state(name, store::node_state::down); });
  decide_needed_ = true;
  kick();
}

void controller::handle_node_leaving(const conn_ptr& c, const protocol::node_leaving& m) {
  node_entry* n = nodes_.of_conn(*c);
  if (n == nullptr) return reply_error(c, m.id, protocol::error_code::invalid_state, "register first");
  // The ok goes out before node_down closes the connection (a close waits
  // for queued writes). Waiting out the heartbeat timeout would only leave
  // the node UP for new work that its agent can no longer take.
  c->send(protocol::ok{m.id, {}});
  if (sched_.machine().at(n->index).state == core::node_state::down) return;
  node_down(n->index, "its agent is shutting down");
}

}  // namespace aqs::daemon
