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
  heartbeat_timer_.cancel();
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
          if (c->peer().role == protocol::peer_role::node) post([this, msg] { handle_output(msg); });
        } else if constexpr (std::is_same_v<T, protocol::ok> || std::is_same_v<T, protocol::error>) {
          if (c->peer().role == protocol::peer_role::node) post([this, c, msg] { handle_agent_reply(c, msg); });
        } else if constexpr (std::is_same_v<T, protocol::resize_ack>) {
          post([this, c, msg] { handle_resize_ack(c, msg); });
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

namespace {

// One transition_all per step, each job at most once per step (the store
// refuses a job twice in one call): a requeue is NODE_FAIL, then PENDING,
// then maybe RUNNING again, in three steps.
void write_transitions(store::job_store& store, const std::vector<store::job_transition>& all) {
  std::vector<std::vector<store::job_transition>> steps;
  std::unordered_map<std::int64_t, std::size_t> seen;
  for (const auto& t : all) {
    const std::size_t k = seen[t.job_id]++;
    if (steps.size() <= k) steps.resize(k + 1);
    steps[k].push_back(t);
  }
  for (const auto& step : steps) {
    try {
      store.transition_all(step);
    } catch (const store::store_unavailable&) {
      throw;
    } catch (const store::store_error& e) {
      // A bug somewhere (the core allowed what the store refuses): keep
      // every transition that is valid rather than losing the whole batch.
      log("a batch of {} transitions was refused ({}); writing them one by one", step.size(), e.what());
      for (const auto& t : step) {
        try {
          store.transition(t);
        } catch (const store::store_unavailable&) {
          throw;
        } catch (const store::store_error& one) {
          log("job {}: transition to {} refused: {}", t.job_id, core::to_string(t.to), one.what());
        }
      }
    }
  }
}

}  // namespace

void controller::write_batch(batch b) {
  writing_ = true;
  auto shared = std::make_shared<batch>(std::move(b));
  asio::post(writer_, [this, shared] {
    try {
      for (auto& op : shared->store_ops) op(store_);
      write_transitions(store_, shared->transitions);
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
      op(store_);
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
        transition(id, job_state::running, d.to, "started on " + cmdline::format_processor_map(spans(), d.to));
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
