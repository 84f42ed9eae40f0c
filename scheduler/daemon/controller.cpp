// controller: routing of requests onto the scheduling strand, and the write
// pipeline that commits each batch of transitions before acting on it.
#include "daemon/controller.hpp"

#include <boost/asio/post.hpp>

#include "daemon/log.hpp"
#include "protocol/auth.hpp"

namespace aqs::daemon {

namespace asio = boost::asio;
using core::job_state;

controller::controller(asio::io_context& io, store::job_store& store, controller_options options,
                       std::function<void()> request_stop)
    : io_(io),
      store_(store),
      options_(std::move(options)),
      request_stop_(std::move(request_stop)),
      strand_(asio::make_strand(io)),
      heartbeat_timer_(strand_),
      sched_(core::cluster{}, core::make_strategy(options_.policy)) {}

controller::~controller() { stop(); }

void controller::start() {
  post([this] {
    decide_needed_ = true;
    kick();
    check_heartbeats();
  });
}

void controller::stop() {
  {
    std::lock_guard lock(shared_mu_);
    if (stopped_) return;
    stopped_ = true;
  }
  {
    std::lock_guard lock(retry_mu_);  // the writer tests stopped_ under it before it waits
  }
  retry_cv_.notify_all();
  heartbeat_timer_.cancel();
  // Before the pools: a write waiting for a dead database gives up at once,
  // and no submission callback can run once this controller is gone.
  store_.shutdown();
  writer_.join();
  readers_.join();
}

void controller::post(std::function<void()> f) {
  asio::post(strand_, [this, f = std::move(f)] {
    if (stopped_) return;
    try {
      f();
    } catch (const std::exception& e) {
      log("internal error while handling an event: {}", e.what());
    }
  });
}

double controller::now() const {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

bool controller::is_root(const conn_ptr& c) {
  const peer_info& p = c->peer();
  // A TCP client proved it holds the cluster key: an administrator.
  return p.via == transport::tcp || (p.uid && *p.uid == 0);
}

void controller::reply_error(const conn_ptr& c, std::int64_t id, protocol::error_code code, std::string message) {
  c->send(protocol::error{id, code, std::move(message)});
}

void controller::fatal(const std::string& why) {
  log("fatal: {}; stopping (a restart recovers from the store)", why);
  failed_ = true;
  request_stop_();
}

// ---------------------------------------------------------------- routing --

void controller::on_open(const conn_ptr& conn) {
  const peer_info& p = conn->peer();
  if (p.role != protocol::peer_role::job) return;
  const std::int64_t job = p.job_id.value_or(0);
  {
    std::lock_guard lock(shared_mu_);
    auto it = owners_.find(job);
    if (it == owners_.end()) {
      throw protocol::protocol_error(protocol::error_code::not_found, "job " + std::to_string(job) + " is not running");
    }
    if (p.via == transport::unix_socket && !(p.uid && (*p.uid == 0 || static_cast<std::int32_t>(*p.uid) == it->second))) {
      throw protocol::protocol_error(protocol::error_code::permission_denied,
                                     "job " + std::to_string(job) + " belongs to another user");
    }
    // Over TCP the token alone is not enough: it must be used from a host
    // the job runs on (or, adaptive, may grow onto).
    if (p.via == transport::tcp && !job_address_allowed(job, p.address)) {
      throw protocol::protocol_error(protocol::error_code::permission_denied,
                                     "job " + std::to_string(job) + " does not run on " + p.address);
    }
  }
  if (p.launcher) return;  // aqs-rsh: it asks, it is sent no maps
  post([this, conn, job] {
    shims_[job] = conn;
    send_map(job);  // a resize already under way
  });
}

void controller::on_close(const conn_ptr& conn) {
  post([this, conn] {
    if (node_entry* n = node_of_conn(conn)) {
      n->conn.reset();
      refresh_agent_addresses();
      log("node {} disconnected; its jobs keep running (DOWN after {} ms of silence)", n->name,
          options_.heartbeat_timeout.count());
    }
    orphan_interactive(conn);
    end_steps_of(conn);
    const peer_info& p = conn->peer();
    if (p.role == protocol::peer_role::job && p.job_id) {
      auto it = shims_.find(*p.job_id);
      if (it != shims_.end() && it->second.lock() == conn) shims_.erase(it);
    }
  });
}

namespace {

// Where processes started by an agent connect from: its TCP address, or
// loopback for an agent on aqsd's own machine (Unix socket).
void add_agent_address(const peer_info& agent, std::set<std::string>& addrs) {
  if (agent.via == transport::tcp) {
    addrs.insert(agent.address);
  } else {
    addrs.insert("127.0.0.1");
    addrs.insert("::1");
    addrs.insert("::ffff:127.0.0.1");
  }
}

}  // namespace

bool controller::job_address_allowed(std::int64_t job, const std::string& address) const {
  // Called with shared_mu_ held.
  auto it = job_addrs_.find(job);
  if (it == job_addrs_.end()) return false;
  if (it->second.count(address) != 0) return true;
  return it->second.count("*") != 0 && agent_addrs_.count(address) != 0;
}

void controller::refresh_job_addresses(std::int64_t id, const core::processor_set& procs, bool adaptive) {
  std::set<std::string> addrs;
  auto add_node = [&](std::size_t index) {
    if (index < nodes_.size() && nodes_[index].conn) add_agent_address(nodes_[index].conn->peer(), addrs);
  };
  procs.for_each([&](std::size_t proc) { add_node(sched_.machine().node_of(proc)); });
  auto jt = jobs_.find(id);
  if (jt != jobs_.end() && jt->second.host) add_node(*jt->second.host);
  if (auto st = step_nodes_.find(id); st != step_nodes_.end()) {
    for (std::size_t n : st->second) add_node(n);
  }
  if (adaptive) addrs.insert("*");  // any host with an agent: it may grow there
  std::lock_guard lock(shared_mu_);
  job_addrs_[id] = std::move(addrs);
}

void controller::refresh_agent_addresses() {
  std::set<std::string> addrs;
  for (const auto& n : nodes_) {
    if (n.conn) add_agent_address(n.conn->peer(), addrs);
  }
  std::lock_guard lock(shared_mu_);
  agent_addrs_ = std::move(addrs);
}

std::optional<std::string> controller::tcp_key(protocol::peer_role role, std::optional<std::int64_t> job_id) {
  if (role != protocol::peer_role::job) return options_.cluster_key;
  std::lock_guard lock(shared_mu_);
  auto it = tokens_.find(job_id.value_or(0));
  if (it == tokens_.end()) return std::nullopt;
  return it->second;
}

void controller::on_message(const conn_ptr& c, protocol::message m) {
  std::visit(
      [&](auto& msg) {
        using T = std::decay_t<decltype(msg)>;
        if constexpr (std::is_same_v<T, protocol::submit>) {
          handle_submit(c, msg);
        } else if constexpr (std::is_same_v<T, protocol::list_jobs>) {
          handle_list_jobs(c, msg);
        } else if constexpr (std::is_same_v<T, protocol::job_history>) {
          handle_job_history(c, msg);
        } else if constexpr (std::is_same_v<T, protocol::shutdown>) {
          if (!is_root(c)) {
            reply_error(c, msg.id, protocol::error_code::permission_denied, "only root may shut aqsd down");
            return;
          }
          log("shutdown requested by {}", c->peer().remote);
          c->send(protocol::ok{msg.id, {}});
          request_stop_();
        } else if constexpr (std::is_same_v<T, protocol::cancel>) {
          post([this, c, msg] { handle_cancel(c, msg); });
        } else if constexpr (std::is_same_v<T, protocol::list_nodes>) {
          post([this, c, msg] { handle_list_nodes(c, msg); });
        } else if constexpr (std::is_same_v<T, protocol::watch_job>) {
          post([this, c, msg] { handle_watch(c, msg); });
        } else if constexpr (std::is_same_v<T, protocol::register_node>) {
          post([this, c, msg] { handle_register(c, msg); });
        } else if constexpr (std::is_same_v<T, protocol::heartbeat>) {
          post([this, c, msg] { handle_heartbeat(c, msg); });
        } else if constexpr (std::is_same_v<T, protocol::job_started>) {
          post([this, c, msg] { handle_job_started(c, msg); });
        } else if constexpr (std::is_same_v<T, protocol::job_exited>) {
          post([this, c, msg] { handle_job_exited(c, msg); });
        } else if constexpr (std::is_same_v<T, protocol::output>) {
          if (c->peer().role == protocol::peer_role::node) post([this, c, msg] { handle_output(c, msg); });
        } else if constexpr (std::is_same_v<T, protocol::ok> || std::is_same_v<T, protocol::error>) {
          if (c->peer().role == protocol::peer_role::node) post([this, c, msg] { handle_agent_reply(c, msg); });
        } else if constexpr (std::is_same_v<T, protocol::resize_ack>) {
          post([this, c, msg] { handle_resize_ack(c, msg); });
        } else if constexpr (std::is_same_v<T, protocol::resize_begin>) {
          post([this, c, msg] { handle_resize_begin(c, msg); });
        } else if constexpr (std::is_same_v<T, protocol::resize_refused>) {
          post([this, c, msg] { handle_resize_refused(c, msg); });
        } else if constexpr (std::is_same_v<T, protocol::remote_exec>) {
          post([this, c, msg] { handle_remote_exec(c, msg); });
        } else if constexpr (std::is_same_v<T, protocol::node_leaving>) {
          post([this, c, msg] { handle_node_leaving(c, msg); });
        } else {
          const auto id = protocol::id_of(m);
          if (id) reply_error(c, *id, protocol::error_code::unknown_type,
                              "aqsd does not accept " + std::string(protocol::type_of(m)));
        }
      },
      m);
}

// ----------------------------------------------------------- the pipeline --

void controller::transition(std::int64_t job, job_state to, std::optional<core::processor_set> procs,
                            std::string reason, std::optional<std::int32_t> exit_code,
                            std::optional<std::int32_t> signal) {
  store::job_transition t;
  t.job_id = job;
  t.to = to;
  t.procs = std::move(procs);
  t.reason = std::move(reason);
  t.exit_code = exit_code;
  t.term_signal = signal;
  batch_.transitions.push_back(std::move(t));
}

void controller::kick() {
  if (writing_ || stopped_ || recovering_) return;
  if (decide_needed_) {
    // One decision for everything already waiting on the strand: a burst of
    // submissions or job ends is decided once, not once per event.
    if (!decision_posted_) {
      decision_posted_ = true;
      post([this] {
        decision_posted_ = false;
        decide_and_write();
      });
    }
    return;
  }
  decide_and_write();
}

void controller::decide_and_write() {
  if (writing_ || stopped_ || recovering_) return;
  if (decide_needed_) {
    decide_needed_ = false;
    try {
      apply_decisions(sched_.decide(now()));
    } catch (const std::exception& e) {
      log("the {} strategy failed to decide: {}", sched_.policy().name(), e.what());
    }
  }
  if (batch_.empty()) return;
  batch b = std::move(batch_);
  batch_ = batch{};
  write_batch(std::move(b));
}

bool controller::until_stored(const std::function<void()>& op) {
  auto delay = std::chrono::milliseconds(50);
  std::optional<clock::time_point> down_since;
  for (;;) {
    if (stopped_) return false;
    try {
      op();
      if (down_since) {
        log("the job store is back after {:.1f} s; carrying on",
            std::chrono::duration<double>(clock::now() - *down_since).count());
      }
      return true;
    } catch (const store::store_unavailable& e) {
      if (!down_since) {
        down_since = clock::now();
        log("the job store is unavailable ({}); holding the writes and retrying until it is back", e.what());
      }
    }
    std::unique_lock lock(retry_mu_);
    retry_cv_.wait_for(lock, delay, [this] { return stopped_.load(); });
    delay = std::min(delay * 2, std::chrono::milliseconds(2000));
  }
}

// One transition_all per step, each job at most once per step (the store
// refuses a job twice in one call): a requeue is NODE_FAIL, then PENDING,
// then maybe RUNNING again, in three steps. A step the database could not
// take is retried until it can (steps already written are not written
// again); false if the controller stopped first.
bool controller::write_transitions(const std::vector<store::job_transition>& all) {
  std::vector<std::vector<store::job_transition>> steps;
  std::unordered_map<std::int64_t, std::size_t> seen;
  for (const auto& t : all) {
    const std::size_t k = seen[t.job_id]++;
    if (steps.size() <= k) steps.resize(k + 1);
    steps[k].push_back(t);
  }
  for (const auto& step : steps) {
    const bool written = until_stored([&] {
      try {
        store_.transition_all(step);
      } catch (const store::store_unavailable&) {
        throw;
      } catch (const store::store_error& e) {
        // A bug somewhere (the core allowed what the store refuses), or a
        // retry of a step that landed in part: keep every transition that
        // is valid rather than losing the whole batch.
        log("a batch of {} transitions was refused ({}); writing them one by one", step.size(), e.what());
        for (const auto& t : step) {
          try {
            store_.transition(t);
          } catch (const store::store_unavailable&) {
            throw;
          } catch (const store::store_error& one) {
            log("job {}: transition to {} refused: {}", t.job_id, core::to_string(t.to), one.what());
          }
        }
      }
    });
    if (!written) return false;
  }
  return true;
}

void controller::write_batch(batch b) {
  writing_ = true;
  auto shared = std::make_shared<batch>(std::move(b));
  asio::post(writer_, [this, shared] {
    try {
      // Stopped before all was written: nothing of it was acted on or
      // acknowledged, so nothing is lost (agents resend their reports).
      for (auto& op : shared->store_ops) {
        if (!until_stored([&] { op(store_); })) return;
      }
      if (!write_transitions(shared->transitions)) return;
    } catch (const std::exception& e) {
      post([this, why = std::string(e.what())] { fatal("the job store failed: " + why); });
      return;
    }
    post([this, shared] { committed(std::move(*shared)); });
  });
}

void controller::committed(batch b) {
  writing_ = false;
  for (auto& f : b.after) {
    try {
      f();
    } catch (const std::exception& e) {
      log("internal error after a commit: {}", e.what());
    }
  }
  kick();
}

void controller::store_task(std::function<void(store::job_store&)> op, std::function<void()> then) {
  asio::post(writer_, [this, op = std::move(op), then = std::move(then)] {
    try {
      if (!until_stored([&] { op(store_); })) return;
    } catch (const std::exception& e) {
      post([this, why = std::string(e.what())] { fatal("the job store failed: " + why); });
      return;
    }
    post(then);
  });
}

void controller::apply_decisions(const std::vector<core::decision>& ds) {
  using kind = core::decision::kind;
  for (const core::decision& d : ds) {
    const auto id = static_cast<std::int64_t>(d.job);
    switch (d.what) {
      case kind::start:
        transition(id, job_state::running, d.to, "started on " + core::format_processor_map(spans(), d.to));
        after_commit([this, id, to = d.to] {
          notify(id, job_state::running, std::nullopt, std::nullopt, &to);
          launch(id, to);
        });
        break;
      case kind::resize:
        begin_resize(id, d.to);
        break;
      case kind::requeue:
      case kind::fail: {
        const bool requeue = d.what == kind::requeue;
        transition(id, job_state::node_fail, std::nullopt, "a node of the job went down");
        if (requeue) transition(id, job_state::pending, std::nullopt, "requeued after a node failure");
        auto it = jobs_.find(id);
        std::optional<std::size_t> host;
        if (it != jobs_.end()) {
          host = it->second.host;
          it->second.host.reset();
          // The lost instance's token dies with it: if it still runs
          // somewhere, it can no longer speak for the job.
          it->second.token.clear();
          std::lock_guard lock(shared_mu_);
          tokens_.erase(id);
          job_addrs_.erase(id);
          it->second.launch_confirmed = false;
          it->second.misses = 0;
        }
        after_commit([this, id, requeue, host] {
          // What is left of it on nodes that are still up must go.
          end_steps_of_job(id);
          if (host && host < nodes_.size() && sched_.machine().at(*host).state != core::node_state::down) {
            send_to_node(*host, protocol::kill{next_request_id_++, id, 9, 0});
          } else if (host && *host < nodes_.size()) {
            // Its agent is told to kill it when it registers again.
          }
          if (requeue) {
            notify(id, job_state::pending, std::nullopt, std::nullopt, nullptr);
          } else {
            on_final(id, job_state::node_fail);
          }
        });
        break;
      }
    }
  }
}

}  // namespace aqs::daemon
