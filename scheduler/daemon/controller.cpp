// controller: the parts wired together; the routing table that takes each
// message to its part; the core's decisions turned into the parts' calls;
// a job's end fanned out to every part.
#include "daemon/controller.hpp"

#include <algorithm>

#include <boost/asio/post.hpp>

#include "daemon_base/permissions.hpp"
#include "logging/log.hpp"
#include "protocol/auth.hpp"

namespace aqs::daemon {

namespace asio = boost::asio;
using core::job_state;

controller::controller(asio::io_context& io, store::job_store& store, controller_options options,
                       std::function<void()> request_stop, clock& time)
    : request_stop_(std::move(request_stop)),
      clock_(time),
      pipe_(io, store),
      sched_(core::cluster{}, core::make_strategy(options.policy)),
      accounts_(options.accounting, pipe_, time, sched_),
      reservations_(options.accounting.conninfo, pipe_, time, sched_, view_),
      launcher_(sched_, pipe_, intake_, nodes_, steps_, resizes_, gate_, view_, watchers_,
                [this](std::int64_t id, job_state st, std::optional<std::int32_t> code,
                       std::optional<std::int32_t> sig) { on_final(id, st, code, sig); }),
      nodes_(sched_, time, pipe_.strand(), pipe_, launcher_, options.heartbeat_timeout),
      intake_(sched_, pipe_, view_, pipe_.stats(), time, accounts_, options.partitions, options.limits,
              [this](std::int64_t id) { return gate_.admits(id); },
              [this](std::int64_t id, job_state st) { on_final(id, st); }),
      resizes_(sched_, time, pipe_.strand(), pipe_, launcher_, nodes_, pipe_.stats(),
               resize_timeouts{options.resize_timeout, options.resize_claim_timeout}),
      steps_(sched_, nodes_, intake_.jobs()),
      control_(sched_, pipe_, intake_, nodes_, steps_, launcher_, view_, watchers_, options.kill_grace,
               [this](std::int64_t id, job_state st, std::optional<std::int32_t> code,
                      std::optional<std::int32_t> sig) { on_final(id, st, code, sig); }),
      views_(sched_, pipe_, intake_, nodes_, view_, options.list_page),
      view_(options.cluster_key),
      tokens_(options.cluster_key, options.revoked_tokens_file, options.token_lifespan_s, time),
      watchers_(sched_, intake_.jobs(), nodes_, steps_, pipe_, time),
      gate_(!options.faucets_gate, sched_, intake_.jobs(), view_, pipe_, [this](std::int64_t id) { intake_.admit_or_hold(id); }),
      telemetry_(time, [this](std::int64_t id) { return view_.owner(id); }, options.telemetry) {
  accounts_.set_readmit([this](std::int64_t id) { intake_.admit_or_hold(id); });
  reservations_.set_account_check([this](const std::string& a) {
    const auto& accts = accounts_.state().index().tree().accounts;
    return std::any_of(accts.begin(), accts.end(), [&](const core::account& x) { return x.name == a; });
  });
  intake_.set_reservation_check([this](const protocol::job_spec& spec, const std::string& user, bool root) {
    return reservations_.check_submission(spec, user, root);
  });
  watchers_.on_change([this](const job_change& ch) { accounts_.on_change(ch); });
  // The implicit partition is no partition to the core: every node, as before.
  if (const auto parts = intake_.partitions(); parts->configured) sched_.set_partitions(parts->partitions);
  pipe_.set_hooks({
      .decide = [this] { decide_now(); },
      .notify = [this](std::int64_t id, job_state st, std::optional<std::int32_t> code,
                       std::optional<std::int32_t> sig, const core::processor_set* procs) { watchers_.notify(id, st, code, sig, procs); },
      .fatal =
          [this](const std::string& why) {
            logging::error("fatal: {}; stopping (a restart recovers from the store)", why);
            request_stop_();
          },
  });
}

controller::~controller() { stop(); }

void controller::reload_partitions(core::site_config partitions) {
  pipe_.post([this, partitions = std::move(partitions)]() mutable {
    intake_.set_partitions(std::move(partitions));
    const auto now = intake_.partitions();
    sched_.set_partitions(now->configured ? now->partitions : std::vector<core::partition>{});
    if (sched_.partitions().empty()) view_.set_partition_reasons({}, {});
    logging::info("partitions reloaded: {}", now->configured ? now->names() : std::string("none (every node in one)"));
    pipe_.decide();
  });
}

void controller::start() {
  pipe_.post([this] {
    pipe_.decide();
    nodes_.start();
    accounts_.start();
    reservations_.start();
  });
}

void controller::stop() {
  accounts_.stop();
  reservations_.stop();
  pipe_.stop();
}

double controller::now() const { return clock_.wall_seconds(); }

// ---------------------------------------------------------------- routing --

void controller::on_open(const conn_ptr& conn) {
  const peer_info& p = conn->peer();
  if (p.role != protocol::peer_role::job) return;
  view_.check_job_peer(p);  // throws the refusal
  if (p.launcher) return;   // aqs-rsh: it asks, it is sent no maps
  pipe_.post([this, conn, job = p.job_id.value_or(0), seen = p.map_epoch] {
    if (jobs().is_live(job)) resizes_.attach_shim(job, conn, seen);
  });
}

void controller::on_close(const conn_ptr& conn) {
  pipe_.post([this, conn] {
    nodes_.disconnected(*conn);
    control_.orphan_interactive(conn);
    steps_.end_of(*conn);
    const peer_info& p = conn->peer();
    if (p.role == protocol::peer_role::job && p.job_id) resizes_.detach_shim(*p.job_id, *conn);
  });
}




// The one routing table: every message aqsd takes, who may send it (the
// same roles as protocol::may_send, which the server checks on the wire; a
// test compares them), any further rule, and where it runs.
const routing_table<controller>& controller::routes() {
  using protocol::peer_role;
  constexpr auto client = peer_role::client;
  constexpr auto node = peer_role::node;
  constexpr auto job = peer_role::job;
  using self = controller;
  static const routing_table<controller> table = [] {
    routing_table<controller> t;
    // Users (fsub, fjobs, fctl, ftoken, ... and the HTTP front as its user).
    t.add<protocol::submit>({client}, runs_on::session,
                            [](self& s, const conn_ptr& c, const protocol::submit& m) { s.intake_.handle_submit(c, m); });
    t.add<protocol::list_jobs>({client}, runs_on::session,
                               [](self& s, const conn_ptr& c, const protocol::list_jobs& m) { s.views_.handle_list_jobs(c, m); });
    t.add<protocol::job_history>(
        {client}, runs_on::session,
        [](self& s, const conn_ptr& c, const protocol::job_history& m) { s.views_.handle_job_history(c, m); });
    t.add<protocol::shutdown>(
        {client}, runs_on::session,
        [](self& s, const conn_ptr& c, const protocol::shutdown& m) {
          logging::info("shutdown requested by {}", c->peer().remote);
          c->send(protocol::ok{m.id, {}});
          s.request_stop_();
        },
        &is_admin, "only root may shut aqsd down");
    t.add<protocol::control>({client, job}, runs_on::strand,
                             [](self& s, const conn_ptr& c, const protocol::control& m) { s.control_.handle_control(c, m); });
    t.add<protocol::reservations>({client}, runs_on::strand,
                                  [](self& s, const conn_ptr& c, const protocol::reservations& m) { s.reservations_.handle(c, m); });
    t.add<protocol::accounts>({client}, runs_on::strand,
                              [](self& s, const conn_ptr& c, const protocol::accounts& m) { s.accounts_.handle_accounts(c, m); });
    t.add<protocol::cancel>({client}, runs_on::strand,
                            [](self& s, const conn_ptr& c, const protocol::cancel& m) { s.control_.handle_cancel(c, m); });
    t.add<protocol::list_nodes>(
        {client}, runs_on::strand,
        [](self& s, const conn_ptr& c, const protocol::list_nodes& m) { s.views_.handle_list_nodes(c, m); });
    t.add<protocol::watch_job>({client}, runs_on::strand,
                               [](self& s, const conn_ptr& c, const protocol::watch_job& m) { s.watchers_.handle_watch(c, m); });
    t.add<protocol::issue_token>(
        {client}, runs_on::session,
        [](self& s, const conn_ptr& c, const protocol::issue_token& m) { s.tokens_.handle_issue(c, m); },
        &may_get_token, "tokens are issued over the Unix socket, where the kernel vouches for the user");
    t.add<protocol::revoke_token>(
        {client}, runs_on::session,
        [](self& s, const conn_ptr& c, const protocol::revoke_token& m) { s.tokens_.handle_revoke(c, m); },
        &may_get_token, "tokens are revoked over the Unix socket, where the kernel vouches for the user");
    // Node agents: the nodes part, and what they say of their jobs.
    t.add<protocol::register_node>(
        {node}, runs_on::strand,
        [](self& s, const conn_ptr& c, const protocol::register_node& m) { s.nodes_.handle_register(c, m); });
    t.add<protocol::heartbeat>(
        {node}, runs_on::strand,
        [](self& s, const conn_ptr& c, const protocol::heartbeat& m) { s.nodes_.handle_heartbeat(c, m); });
    t.add<protocol::node_leaving>(
        {node}, runs_on::strand,
        [](self& s, const conn_ptr& c, const protocol::node_leaving& m) { s.nodes_.handle_node_leaving(c, m); });
    t.add<protocol::job_started>(
        {node}, runs_on::strand,
        [](self& s, const conn_ptr& c, const protocol::job_started& m) { s.launcher_.handle_job_started(c, m); });
    t.add<protocol::job_exited>(
        {node}, runs_on::strand,
        [](self& s, const conn_ptr& c, const protocol::job_exited& m) { s.launcher_.handle_job_exited(c, m); });
    t.add<protocol::output>({node}, runs_on::strand,
                            [](self& s, const conn_ptr& c, const protocol::output& m) { s.watchers_.handle_output(c, m); });
    t.add<protocol::ok>({node}, runs_on::strand,
                        [](self& s, const conn_ptr& c, const protocol::ok& m) { s.launcher_.handle_agent_reply(c, m); });
    t.add<protocol::error>({node}, runs_on::strand,
                           [](self& s, const conn_ptr& c, const protocol::error& m) { s.launcher_.handle_agent_reply(c, m); });
    t.add<protocol::job_signal>(
        {node}, runs_on::strand,
        [](self& s, const conn_ptr& c, const protocol::job_signal& m) { s.steps_.handle_job_signal(c, m); });
    // Jobs: their shim (the resize part) and aqs-rsh.
    t.add<protocol::resize_begin>(
        {job}, runs_on::strand,
        [](self& s, const conn_ptr& c, const protocol::resize_begin& m) { s.resizes_.handle_resize_begin(c, m); });
    t.add<protocol::resize_ack>(
        {job}, runs_on::strand,
        [](self& s, const conn_ptr& c, const protocol::resize_ack& m) { s.resizes_.handle_resize_ack(c, m); });
    t.add<protocol::resize_refused>(
        {job}, runs_on::strand,
        [](self& s, const conn_ptr& c, const protocol::resize_refused& m) { s.resizes_.handle_resize_refused(c, m); });
    // Values a running job publishes (AQS_Publish, aqs-publish): on the
    // session, off the scheduling strand, capped per job.
    t.add<protocol::publish>({job}, runs_on::session, [](self& s, const conn_ptr& c, const protocol::publish& m) {
      s.telemetry_.handle_publish(c, m);
    });
    t.add<protocol::remote_exec>(
        {job}, runs_on::strand,
        [](self& s, const conn_ptr& c, const protocol::remote_exec& m) { s.steps_.handle_remote_exec(c, m); });
    return t;
  }();
  return table;
}

void controller::on_message(const conn_ptr& c, protocol::message m) {
  const route<controller>& r = routes().of(m);
  const auto id = protocol::id_of(m);
  if (!r.accepted()) {
    if (id) reply_error(c, *id, protocol::error_code::unknown_type, "aqsd does not accept " + std::string(protocol::type_of(m)));
    return;
  }
  const peer_info& p = c->peer();
  if (!r.allows(p.role)) {
    // A reply (ok, error) is never answered, lest two peers answer each
    // other for ever.
    const bool reply = std::holds_alternative<protocol::ok>(m) || std::holds_alternative<protocol::error>(m);
    if (id && !reply) {
      reply_error(c, *id, protocol::error_code::unauthorized,
                  "a " + std::string(protocol::to_string(p.role)) + " may not send " + std::string(r.type));
    }
    return;
  }
  if (r.gate != nullptr && !r.gate(p)) {
    if (id) reply_error(c, *id, protocol::error_code::permission_denied, std::string(r.refusal));
    return;
  }
  if (r.where == runs_on::session) return r.handle(*this, c, m);
  pipe_.post([this, &r, c, m = std::move(m)] { r.handle(*this, c, m); }, r.type.data());
}

// ------------------------------------------------------------ deciding --

// The pipeline's decider: the core decides, its decisions join the batch.
void controller::decide_now() {
  try {
    const auto t0 = std::chrono::steady_clock::now();
    reservations_.sync(now());
    auto decisions = sched_.decide(now());
    pipe_.stats().decided(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    apply_decisions(decisions);
    const auto& q = sched_.queue();
    view_.set_queue_head(q.empty() ? std::nullopt : std::optional<std::int64_t>(static_cast<std::int64_t>(q.begin()->id)));
    if (!sched_.partitions().empty() || reservations_.matters()) refresh_partition_reasons();
  } catch (const std::exception& e) {
    logging::warn("the {} strategy failed to decide: {}", sched_.policy().name(), e.what());
  }
}

void controller::refresh_partition_reasons() {
  const auto& parts = sched_.partitions();
  std::set<std::int64_t> heads;
  std::unordered_map<std::int64_t, std::string> why;
  std::vector<bool> headed(parts.size(), false);
  for (const core::queue_key& k : sched_.queue()) {
    const core::job& j = sched_.get(k.id);
    const auto id = static_cast<std::int64_t>(k.id);
    if (std::string r = reservations_.pending_reason(j, now()); !r.empty()) {
      why[id] = std::move(r);
      continue;
    }
    if (parts.empty()) continue;
    if (j.partitions.empty()) {
      why[id] = "PartitionConfig";  // its partition is no longer configured
      continue;
    }
    bool can_start = false;
    for (std::size_t i : j.partitions) {
      if (!parts[i].starts_jobs()) continue;
      can_start = true;
      if (!headed[i]) {
        headed[i] = true;
        heads.insert(id);
      }
    }
    if (!can_start) why[id] = "PartitionDown";
  }
  view_.set_partition_reasons(std::move(heads), std::move(why));
}

void controller::apply_decisions(const std::vector<core::decision>& ds) {
  using kind = core::decision::kind;
  for (const core::decision& d : ds) {
    const auto id = static_cast<std::int64_t>(d.job);
    switch (d.what) {
      case kind::start:
        pipe_.transition(id, job_state::running, d.to, "started on " + core::format_processor_map(view_.spans(), d.to));
        pipe_.after_commit([this, id, to = d.to] {
          watchers_.notify(id, job_state::running, std::nullopt, std::nullopt, &to);
          launcher_.launch(id, to);
          // Jobs waiting with `after:ID` may go now that it started.
          intake_.started(id);
        });
        break;
      case kind::resize:
        resizes_.begin(id, d.to);
        break;
      case kind::resume: {
        const core::job* j = sched_.find(d.job);
        launcher_.resumed(id, d.to, j != nullptr && j->req.adaptive);
        break;
      }
      case kind::requeue:
      case kind::fail: {
        const bool requeue = d.what == kind::requeue;
        pipe_.transition(id, job_state::node_fail, std::nullopt, "a node of the job went down");
        if (requeue) pipe_.transition(id, job_state::pending, std::nullopt, "requeued after a node failure");
        std::optional<std::size_t> host;
        if (job_entry* e = jobs().find(id)) {
          host = e->host;
          e->requeue_by.reset();  // the node's loss decided its fate first
          // The lost instance's token dies with it: if it still runs
          // somewhere, it can no longer speak for the job.
          launcher_.drop_instance(id, *e);
        }
        pipe_.after_commit([this, id, requeue, host] {
          // What is left of it on nodes that are still up must go.
          steps_.end_of_job(id);
          if (host && nodes_.is_up(*host)) {
            nodes_.send(*host, protocol::kill{nodes_.new_request_id(), id, 9, 0});
          }
          if (requeue) {
            watchers_.notify(id, job_state::pending, std::nullopt, std::nullopt, nullptr);
          } else {
            on_final(id, job_state::node_fail);
          }
        });
        break;
      }
    }
  }
}

void controller::on_final(std::int64_t id, job_state state, std::optional<std::int32_t> code,
                          std::optional<std::int32_t> signal) {
  pipe_.stats().job_ended(std::string(core::to_string(state)));
  steps_.end_of_job(id);
  resizes_.forget(id);
  view_.forget_job(id);  // the token dies with the job
  telemetry_.ended(id);
  watchers_.notify(id, state, code, signal, nullptr);
  watchers_.forget(id);
  intake_.finish(id, state, code, signal);
}


}  // namespace aqs::daemon
