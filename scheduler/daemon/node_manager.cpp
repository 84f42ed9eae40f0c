// node_manager: agents registering (new nodes numbered after the last),
// heartbeats, and nodes going DOWN when they fall silent or leave.
#include "daemon/node_manager.hpp"

#include <algorithm>

#include <fmt/ranges.h>

#include "logging/log.hpp"

namespace aqs::daemon {

namespace {

std::string cpu_ranges(const std::vector<std::int64_t>& cpus) {
  std::int64_t top = 0;
  for (auto c : cpus) top = std::max(top, c);
  core::processor_set s(static_cast<std::size_t>(top) + 1);
  for (auto c : cpus) s.set(static_cast<std::size_t>(c));
  return s.to_ranges();
}

}  // namespace

node_manager::node_manager(core::scheduler& core, clock& time, boost::asio::any_io_executor strand, pipeline& out,
                           node_jobs& jobs, std::chrono::milliseconds heartbeat_timeout)
    : core_(core),
      clock_(time),
      strand_(std::move(strand)),
      out_(out),
      jobs_(jobs),
      heartbeat_timeout_(heartbeat_timeout) {}

void node_manager::send(std::size_t index, protocol::message m) {
  node_entry& n = table_.at(index);
  if (n.conn) {
    n.conn->send(std::move(m));
  } else {
    n.queued.push_back(std::move(m));
  }
}

const node_entry* node_manager::heard(const connection& c) {
  node_entry* n = table_.of_conn(c);
  if (n != nullptr) n->last_seen = clock_.now();
  return n;
}

void node_manager::disconnected(const connection& c) {
  node_entry* n = table_.of_conn(c);
  if (n == nullptr) return;
  n->conn.reset();
  jobs_.refresh_agent_addresses();
  logging::info("node {} disconnected; its jobs keep running (DOWN after {} ms of silence)", n->name,
                heartbeat_timeout_.count());
}

void node_manager::handle_register(const std::shared_ptr<connection>& c, const protocol::register_node& m) {
  store::node_request req;
  req.name = m.name;
  req.address = c->peer().remote;
  req.nprocs = static_cast<std::int32_t>(m.procs);
  req.cpus = cpu_ranges(m.cpus);
  req.memory_mb = m.memory_mb;
  req.gpus = static_cast<std::int32_t>(m.gpus);
  const node_entry* known = table_.find(m.name);
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
  out_.store_task(
      [req, result, refusal](store::job_store& st) {
        try {
          *result = st.register_node(req);
        } catch (const store::invalid_job& e) {
          *refusal = e.what();
        }
      },
      [this, c, m, result, refusal] {
        if (!*result) return reply_error(c, m.id, protocol::error_code::bad_request, *refusal);
        const node_entry* existing = table_.find(m.name);
        std::size_t index;
        if (existing == nullptr) {
          index = core_.add_node(m.name, static_cast<std::size_t>(m.procs));
          if (core_.machine().at(index).first_proc != static_cast<std::size_t>((*result)->first_proc)) {
            return out_.fatal("node " + m.name + " numbered differently by the store and the scheduler");
          }
          node_entry n;
          n.name = m.name;
          n.index = index;
          n.first_proc = static_cast<std::size_t>((*result)->first_proc);
          n.nprocs = static_cast<std::size_t>(m.procs);
          table_.add(std::move(n));
          jobs_.refresh_spans();
          logging::info("node {} registered: processors {}-{}", m.name, (*result)->first_proc,
                        (*result)->first_proc + m.procs - 1);
        } else {
          index = existing->index;
        }
        finish_register(c, m, index);
      });
}

void node_manager::finish_register(const std::shared_ptr<connection>& c, const protocol::register_node& m,
                                   std::size_t index) {
  node_entry& n = table_.at(index);
  if (n.conn && n.conn->serial() != c->serial()) {
    // Another agent took the name while this one's store write ran.
    return reply_error(c, m.id, protocol::error_code::invalid_state,
                       "node " + m.name + " is in use by a connected agent (" + n.conn->peer().remote +
                           "); retry once it is gone");
  }
  n.conn = c;
  jobs_.refresh_agent_addresses();
  n.probe_port = m.probe_port;
  n.containment = m.containment;
  n.peers_sent = 0;  // its next heartbeat's ok lists its peers
  latency_.peers_changed();
  n.cpus = m.cpus;
  n.host = m.host.empty() ? m.name : m.host;
  n.memory_mb = m.memory_mb;
  n.gpus = m.gpus;
  core_.set_node_resources(index, static_cast<std::uint64_t>(std::max<std::int64_t>(m.memory_mb, 0)),
                           static_cast<std::size_t>(std::max<std::int64_t>(m.gpus, 0)));
  jobs_.refresh_spans();
  n.last_seen = clock_.now();
  n.last_stored_heartbeat = n.last_seen;
  if (core_.machine().at(index).state == core::node_state::down) {
    core_.apply(core::event::on_node(core::event::kind::node_up, index));
    logging::info("node {} is UP again", n.name);
  }
  // Its `running` list names jobs of the cluster `m.cluster_id` (the one its
  // spool's jobs were started for): another cluster's, or an agent that does
  // not know whose they are, is set aside: never adopted, never killed (the
  // agent does not adopt them either, once it has learnt our id below).
  const std::string& cluster_id = jobs_.cluster_id();
  std::vector<std::int64_t> running = m.running;
  if (!running.empty() && m.cluster_id != cluster_id) {
    logging::warn("node {}: set aside {} running job(s) of {} (this is cluster {}): not adopted, not killed: {}",
                  n.name, running.size(),
                  m.cluster_id.empty() ? std::string("an unknown cluster") : "cluster " + m.cluster_id, cluster_id,
                  fmt::join(running, ","));
    running.clear();
  }
  // Jobs it runs that we no longer want there die before it takes new work.
  std::vector<std::int64_t> kill = jobs_.adopt_running(index, running);
  if (!kill.empty()) {
    logging::info("node {}: killing {} job(s) it still ran that ended here: {}", n.name, kill.size(),
                  fmt::join(kill, ","));
  }
  c->send(protocol::make_ok(m.id, protocol::register_reply{static_cast<std::int64_t>(n.first_proc), kill, cluster_id}));
  std::vector<protocol::message> queued = std::move(n.queued);
  n.queued.clear();
  for (auto& q : queued) {
    if (jobs_.still_wanted(index, q)) c->send(std::move(q));
  }
  if (!registered_.empty()) {
    std::erase_if(running, [&](std::int64_t id) { return std::find(kill.begin(), kill.end(), id) != kill.end(); });
    for (const auto& hook : registered_) hook(index, running);
  }
  out_.decide();
}

void node_manager::handle_heartbeat(const std::shared_ptr<connection>& c, const protocol::heartbeat& m) {
  node_entry* n = table_.of_conn(*c);
  if (n == nullptr) return reply_error(c, m.id, protocol::error_code::invalid_state, "register first");
  n->last_seen = clock_.now();
  jobs_.jobs_reported(n->index, m.running);
  if (n->last_seen - n->last_stored_heartbeat > std::chrono::seconds(10)) {
    n->last_stored_heartbeat = n->last_seen;
    out_.store_task([name = n->name](store::job_store& st) { st.heartbeat(name); }, [] {});
  }
  if (m.latency) latency_.take_report(*n, *m.latency, table_, core_.machine());
  c->send(latency_.heartbeat_ok(*n, m.id, table_, core_.machine()));
}

void node_manager::check_heartbeats() {
  if (out_.stopped()) return;
  const auto t = clock_.now();
  for (auto& n : table_) {
    if (core_.machine().at(n.index).state == core::node_state::down) continue;
    if (t - n.last_seen > heartbeat_timeout_) {
      node_down(n.index, "no word from its agent for " + std::to_string(heartbeat_timeout_.count()) + " ms");
    }
  }
  heartbeat_timer_ = clock_.after(strand_, std::chrono::milliseconds(200), [this] { check_heartbeats(); });
}

void node_manager::node_down(std::size_t index, const std::string& why) {
  node_entry& n = table_.at(index);
  logging::info("node {} is DOWN: {}", n.name, why);
  if (n.conn) {
    n.conn->close();
    n.conn.reset();
    jobs_.refresh_agent_addresses();
  }
  n.queued.clear();  // launches for it are void; its jobs are requeued or failed
  latency_.forget(n.name);
  latency_.peers_changed();
  core_.apply(core::event::on_node(core::event::kind::node_down, index));
  out_.store_op([name = n.name](store::job_store& st) { st.set_node_state(name, store::node_state::down); });
  out_.decide();
}

void node_manager::handle_node_leaving(const std::shared_ptr<connection>& c, const protocol::node_leaving& m) {
  const node_entry* n = table_.of_conn(*c);
  if (n == nullptr) return reply_error(c, m.id, protocol::error_code::invalid_state, "register first");
  // The ok goes out before node_down closes the connection (a close waits
  // for queued writes). Waiting out the heartbeat timeout would only leave
  // the node UP for new work that its agent can no longer take.
  c->send(protocol::ok{m.id, {}});
  if (core_.machine().at(n->index).state == core::node_state::down) return;
  node_down(n->index, "its agent is shutting down");
}

}  // namespace aqs::daemon
