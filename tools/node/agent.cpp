// agent: connection, handshake and registration, heartbeats, launch and kill
// handling, and reliable reporting of job ends.
#include "agent.hpp"
#include "job_environment.hpp"
#include "job_process.hpp"
#include "job_script.hpp"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <pwd.h>
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include "logging/log.hpp"
#include "protocol/auth.hpp"
#include "protocol/replies.hpp"

namespace aqs::node {

namespace asio = boost::asio;
using asio::awaitable;
using asio::use_awaitable;
using namespace std::chrono_literals;

namespace {

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return {};
  return buf;
}

}  // namespace

agent::agent(asio::io_context& io, agent_options options, std::function<void(const std::string&)> on_fatal)
    : io_(io),
      options_(std::move(options)),
      on_fatal_(std::move(on_fatal)),
      supervisor_(io, [this](const job_outcome& o) { on_job_end(o); }, options_.spool, fencing_for(options_)),
      backoff_timer_(io),
      output_(io, [this](protocol::output o) { send_output(std::move(o)); },
              [this](const job_outcome& o) { report_end(o); }) {}

agent::~agent() { stop(); }

fencing fencing_for(const agent_options& o) {
  using ms = std::chrono::milliseconds;
  // A heartbeat as long as the timeout leaves nothing: then half of it.
  const ms kill = o.node_down_timeout > 2 * o.heartbeat ? o.node_down_timeout - o.heartbeat : o.node_down_timeout / 2;
  return fencing{kill - std::min<ms>(2000ms, kill / 2), kill};
}

void agent::log(const std::string& line) const { logging::info("{}", line); }
void agent::warn(const std::string& line) const { logging::warn("{}", line); }

void agent::start() {
  prepare_spool(options_.spool);
  // One agent per spool: another one (an agent of the same name of another
  // cluster, with the default spool) would adopt and report this one's jobs.
  // Taken first: an agent refused here says that and nothing else.
  spool_lock_ = std::make_unique<spool_lock>(options_.spool);
  // sstat asks this node about its jobs on a local socket named after the
  // aqsd it serves and the node (job_stats.hpp); without it sstat says the
  // node did not answer, and the jobs run as ever.
  {
    std::error_code ec;
    const std::string aqsd = options_.socket_path
                                 ? std::filesystem::weakly_canonical(std::filesystem::absolute(*options_.socket_path), ec).string()
                                 : "tcp:" + options_.server.value_or("");
    stats_ = std::make_unique<job_stats_server>(io_, options_.name, supervisor_);
    try {
      stats_->start(protocol::stat_socket_name(aqsd, options_.name));
    } catch (const std::exception& e) {
      warn(std::string("no stat socket for sstat (another process holds its name?): ") + e.what());
      stats_.reset();
    }
  }
  // Containment: cgroups where the host has them, else process groups,
  // SIGSTOP and polling, with the reason logged. Asked for by version
  // (--cgroups v1|v2) and unusable: the agent does not start.
  {
    cgroup_options co = options_.cgroups;
    co.node = options_.name;
    std::string why;
    if (auto cg = probe_cgroups(co, why)) {
      // Jobs' cgroups go under the cluster's directory once aqsd has named
      // it (take_cluster).
      containment_ = cg->describe() + "/<cluster>/" + options_.name;
      cgroups_usable_ = true;
      log("containment: " + containment_);
    } else {
      if (co.want == cgroup_options::mode::v1 || co.want == cgroup_options::mode::v2) {
        throw std::runtime_error("--cgroups: " + why);
      }
      containment_ = "none (" + why + ")";
      warn("containment: none, jobs are process groups, their memory is polled (resident memory of the group, 4 times "
           "a second) and suspend is SIGSTOP: " + why);
    }
  }
  spool_cluster_ = spool_cluster(options_.spool);
  if (const auto legacy = job_records(options_.spool); !legacy.empty()) {
    warn("spool " + options_.spool.string() + " holds " + std::to_string(legacy.size()) +
         " job record(s) of an agent without a cluster id: set aside, not adopted and not killed");
  }
  // A --signal warning without B: that went out here reaches the job's
  // steps on its other nodes through aqsd (kept in the outbox until it
  // answers). Set before adopting: an adopted job's warning may be due.
  supervisor_.on_warning([this](std::int64_t job_id, int sig) { report(protocol::job_signal{0, job_id, sig}); });
  // Jobs a previous agent on this spool left running (it was killed, or
  // the machine's agent was upgraded) are adopted at registration, once
  // aqsd has said which cluster it is (take_cluster): a job is only ever
  // matched by its number within its own cluster.
  // Probes are signed with the cluster key: without one (an agent on aqsd's
  // Unix socket given no --key) there is no probe socket.
  if (options_.probe && !options_.key.empty()) {
    prober_options po;
    po.key = options_.key;
    po.port = options_.probe_port;
    po.interval = options_.probe_interval;
    prober_ = std::make_unique<latency_prober>(io_, po, [this](std::vector<protocol::latency_sample> s) {
      latency_report_ = std::move(s);
    });
    prober_->start();
    log("latency probe socket on UDP port " + std::to_string(prober_->port()));
  }
  asio::co_spawn(io_, run(), asio::detached);
}

void agent::shutdown(std::function<void()> done) {
  if (draining_) return;
  draining_ = true;
  log("shutting down: ending " + std::to_string(supervisor_.running().size()) + " jobs");
  for (auto id : supervisor_.running()) {
    ended_for_leaving_.insert(id);
    supervisor_.kill(id, SIGTERM, options_.timeout_grace);
  }
  asio::co_spawn(io_, drain(std::move(done)), asio::detached);
}

awaitable<void> agent::drain(std::function<void()> done) {
  asio::steady_timer t(io_);
  // Bounded: the jobs get their grace period, aqsd a moment to acknowledge.
  const auto until = std::chrono::steady_clock::now() + options_.timeout_grace + 10s;
  while (std::chrono::steady_clock::now() < until &&
         (!supervisor_.running().empty() || (connected_ && !outbox_.empty()))) {
    t.expires_after(20ms);
    boost::system::error_code ec;
    co_await t.async_wait(asio::redirect_error(use_awaitable, ec));
  }
  if (!outbox_.empty()) warn(std::to_string(outbox_.size()) + " reports not acknowledged by aqsd at exit");
  // Its jobs gone, this node's cgroup directories go too (where empty).
  if (const cgroup_backend* cg = supervisor_.containment(); cg != nullptr && supervisor_.running().empty()) {
    cg->remove_empty_levels();
  }
  if (connected_) {
    // The jobs are gone: now aqsd may take the node DOWN (and requeue them
    // elsewhere) at once rather than after its heartbeat timeout. It closes
    // the connection after its ok; no reconnecting from here on.
    stopping_ = true;
    leaving_id_ = next_id();
    send(protocol::node_leaving{*leaving_id_});
    const auto leave_until = std::chrono::steady_clock::now() + 3s;
    while (!left_ && connected_ && std::chrono::steady_clock::now() < leave_until) {
      t.expires_after(20ms);
      boost::system::error_code ec;
      co_await t.async_wait(asio::redirect_error(use_awaitable, ec));
    }
    if (!left_) warn("aqsd did not acknowledge that this node is leaving");
  }
  stop();
  if (done) done();
}

void agent::stop() {
  stopping_ = true;
  backoff_timer_.cancel();
  if (prober_) prober_->stop();
  if (sock_) {
    boost::system::error_code ec;
    sock_->close(ec);
  }
}

void agent::fail(const std::string& why) {
  log(why);
  stop();
  if (on_fatal_) on_fatal_(why);
}

awaitable<void> agent::run() {
  auto backoff = 100ms;
  while (!stopping_) {
    const bool served = co_await serve_once();
    if (stopping_) break;
    backoff = served ? 100ms : std::min<std::chrono::milliseconds>(backoff * 2, options_.reconnect_max);
    backoff_timer_.expires_after(backoff);
    boost::system::error_code ec;
    co_await backoff_timer_.async_wait(asio::redirect_error(use_awaitable, ec));
  }
}

bool agent::connect_endpoint(asio::generic::stream_protocol::endpoint& ep, std::string& where) {
  if (options_.socket_path) {
    where = *options_.socket_path;
    ep = asio::generic::stream_protocol::endpoint(asio::local::stream_protocol::endpoint(*options_.socket_path));
    return true;
  }
  where = *options_.server;
  const auto colon = where.rfind(':');
  std::string host = where.substr(0, colon), port = colon == std::string::npos ? "" : where.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
  asio::ip::tcp::resolver resolver(io_);
  boost::system::error_code ec;
  auto results = resolver.resolve(host, port, ec);
  if (ec || results.empty()) {
    if (last_error_ != ec.message()) warn("cannot resolve " + where + ": " + (last_error_ = ec.message()));
    return false;
  }
  ep = asio::generic::stream_protocol::endpoint(results.begin()->endpoint());
  return true;
}

// One connection, from connect to disconnect. Returns true if it got as far
// as a registration (so the next reconnect starts with a short backoff).
awaitable<bool> agent::serve_once() {
  asio::generic::stream_protocol::endpoint ep;
  std::string where;
  if (!connect_endpoint(ep, where)) co_return false;
  sock_ = std::make_unique<asio::generic::stream_protocol::socket>(io_);
  boost::system::error_code ec;
  const std::int64_t tried_at = job_supervisor::monotonic_ms();
  co_await sock_->async_connect(ep, asio::redirect_error(use_awaitable, ec));
  if (ec == asio::error::connection_refused || (options_.socket_path && ec == boost::system::errc::no_such_file_or_directory)) {
    // Nothing listens where aqsd does: no aqsd runs to declare this node
    // DOWN (a new one gives every node a full heartbeat timeout), so the
    // jobs are safe: this renews their leases as an acknowledgement would.
    supervisor_.renew(tried_at);
  }
  if (ec) {
    if (last_error_ != ec.message()) warn("cannot reach aqsd at " + where + ": " + (last_error_ = ec.message()) + " (retrying)");
    co_return false;
  }
  decoder_ = protocol::frame_decoder();
  frames_.clear();
  const bool registered = co_await converse(where);
  connected_ = false;
  sock_->close(ec);
  // The write in flight (if any) still uses out_.front(): let it finish
  // with its error before the queue is dropped.
  while (writing_) {
    backoff_timer_.expires_after(5ms);
    co_await backoff_timer_.async_wait(asio::redirect_error(use_awaitable, ec));
  }
  out_.clear();
  co_return registered;
}

namespace {
// Refusals that say "not now" rather than "never": the agent retries them.
bool transient(protocol::error_code c) {
  return c == protocol::error_code::internal || c == protocol::error_code::too_large;
}
}  // namespace

// Handshake, registration and then messages until the connection ends.
awaitable<bool> agent::converse(const std::string& where) {
  std::optional<std::string> auth;
  boost::system::error_code ec;
  if (options_.server) {
    auto ch = co_await read_one();
    if (!ch || !std::holds_alternative<protocol::challenge>(*ch)) co_return false;
    auth = protocol::compute_auth(options_.key, std::get<protocol::challenge>(*ch).nonce);
  }
  send(protocol::hello{next_id(), protocol::k_protocol_version, protocol::peer_role::node, auth, {}, false});
  auto reply = co_await read_one();
  if (!reply) co_return false;
  if (auto* e = std::get_if<protocol::error>(&*reply)) {
    if (transient(e->code)) {
      // aqsd is busy (its connection limits) or failed for a moment: the
      // node's jobs must not pay for that with an agent that gives up.
      if (last_error_ != e->message) warn("aqsd at " + where + " cannot take this agent now: " + (last_error_ = e->message) + " (retrying)");
      co_return false;
    }
    fail("aqsd at " + where + " refused this agent: " + e->message);
    co_return false;
  }
  protocol::register_node reg;
  reg.id = next_id();
  reg.name = options_.name;
  reg.procs = options_.procs;
  reg.cpus.assign(options_.cpus.begin(), options_.cpus.end());
  reg.memory_mb = options_.memory_mb;
  reg.gpus = options_.gpus;
  // Until this agent has adopted anything, `running` lists the jobs of the
  // cluster its spool served last, which aqsd honours only if it is that
  // cluster (it sets another cluster's aside).
  if (!cluster_.empty()) {
    reg.cluster_id = cluster_;
    reg.running = supervisor_.running();
  } else if (spool_cluster_) {
    reg.cluster_id = *spool_cluster_;
    reg.running = job_records(cluster_spool(options_.spool, *spool_cluster_));
  }
  reg.host = host_name();
  reg.probe_port = prober_ ? prober_->port() : 0;
  reg.containment = containment_;
  const std::int64_t registered_at = job_supervisor::monotonic_ms();
  send(reg);
  reply = co_await read_one();
  if (!reply) co_return false;
  if (auto* e = std::get_if<protocol::error>(&*reply)) {
    if (e->code == protocol::error_code::invalid_state || transient(e->code)) {
      // The name is still held by our previous connection (aqsd has not yet
      // seen it close) or by another agent: wait and try again.
      if (last_error_ != e->message) warn("aqsd refused to register node " + options_.name + ": " + (last_error_ = e->message));
      co_return false;
    }
    fail("aqsd refused to register node " + options_.name + ": " + e->message);
    co_return false;
  }
  if (auto* okr = std::get_if<protocol::ok>(&*reply)) {
    protocol::register_reply registered;
    if (!okr->result.contains("cluster_id")) {
      fail("aqsd at " + where + " names no cluster id at registration: it is older than this agent, upgrade it");
      co_return false;
    }
    try {
      registered = protocol::read_reply<protocol::register_reply>(*okr);
    } catch (const protocol::protocol_error& e) {
      fail("aqsd at " + where + " answered register with an unreadable reply: " + e.what());
      co_return false;
    }
    if (registered.cluster_id != cluster_) {
      if (!cluster_.empty() && (!supervisor_.running().empty() || !outbox_.empty())) {
        // aqsd was re-created on another database while we ran: what we run
        // is the old cluster's, and must not be reported to this one.
        fail("aqsd at " + where + " is now cluster " + registered.cluster_id + ", not cluster " + cluster_ +
             " whose " + std::to_string(supervisor_.running().size()) +
             " job(s) this agent runs: restart aqs-node to serve the new cluster (they are set aside)");
        co_return false;
      }
      if (!take_cluster(registered.cluster_id, where)) co_return false;
    }
    // Jobs aqsd no longer wants here (e.g. it declared them NODE_FAIL while
    // we were away): they go before the node takes new work.
    for (const std::int64_t id : registered.kill) supervisor_.kill(id, SIGKILL, 0ms);
    supervisor_.renew(registered_at);  // aqsd heard us then: the node is UP
  }
  connected_ = true;
  last_error_.clear();
  const std::uint64_t generation = ++generation_;
  log("registered with aqsd at " + where + " (" + std::to_string(options_.procs) + " processors, " +
      std::to_string(supervisor_.running().size()) + " jobs running)");
  while (!pending_output_.empty()) {  // output first: it precedes the ends in the outbox
    send(pending_output_.front());
    pending_output_.pop_front();
  }
  pending_output_bytes_ = 0;
  for (const auto& [id, m] : outbox_) send(m);  // what the last connection left unacknowledged
  asio::co_spawn(io_, heartbeat_loop(generation), asio::detached);

  while (true) {
    auto m = co_await read_one();
    if (!m) break;
    handle(std::move(*m));
    // A burst of launches arrives in one read: let the write loop, SIGCHLD
    // reaping and job reports run between them, or a job's end waits until
    // the whole burst has been forked.
    co_await asio::post(io_, use_awaitable);
  }
  if (!stopping_) log("lost the connection to aqsd; jobs keep running, reconnecting");
  co_return true;
}

awaitable<void> agent::heartbeat_loop(std::uint64_t generation) {
  asio::steady_timer timer(io_);
  while (connected_ && generation == generation_ && !stopping_) {
    timer.expires_after(options_.heartbeat);
    boost::system::error_code ec;
    co_await timer.async_wait(asio::redirect_error(use_awaitable, ec));
    if (!connected_ || generation != generation_ || stopping_) break;
    // Not kept in the outbox: the next heartbeat supersedes a lost one.
    const std::int64_t id = next_id();
    const std::int64_t now = job_supervisor::monotonic_ms();
    const std::int64_t every = options_.heartbeat.count();
    if (last_heartbeat_ms_ > 0 && now - last_heartbeat_ms_ > 2 * every + 1000) {
      // This agent itself was not run (a starved machine): its jobs' leases
      // age without a heartbeat to renew them.
      warn("heartbeat " + std::to_string(now - last_heartbeat_ms_ - every) + " ms late (this agent was not scheduled)");
    }
    last_heartbeat_ms_ = now;
    heartbeat_sent_[id] = now;
    while (heartbeat_sent_.size() > 64) heartbeat_sent_.erase(heartbeat_sent_.begin());  // never acknowledged
    protocol::heartbeat hb{id, supervisor_.running()};
    hb.latency = std::exchange(latency_report_, std::nullopt);  // each round is reported once
    send(hb);
  }
}

std::optional<protocol::message> agent::take_frame() {
  while (!frames_.empty()) {
    std::string body = std::move(frames_.front());
    frames_.erase(frames_.begin());
    try {
      return protocol::parse_message(std::string_view(body));
    } catch (const protocol::protocol_error& e) {
      warn(std::string("ignoring a malformed message from aqsd: ") + e.what());
    }
  }
  return std::nullopt;
}

// The next message from aqsd, or nullopt when the connection is gone.
awaitable<std::optional<protocol::message>> agent::read_one() {
  while (true) {
    if (auto m = take_frame()) co_return m;
    boost::system::error_code ec;
    const std::size_t n = co_await sock_->async_read_some(asio::buffer(buf_), asio::redirect_error(use_awaitable, ec));
    if (ec) co_return std::nullopt;
    bool framing_ok = true;
    try {
      decoder_.feed(std::string_view(buf_.data(), n), frames_);
    } catch (const protocol::protocol_error& e) {
      warn(std::string("broken frame from aqsd, reconnecting: ") + e.what());
      framing_ok = false;
    }
    if (!framing_ok) {
      sock_->close(ec);
      co_return std::nullopt;
    }
  }
}

void agent::send(const protocol::message& m) {
  if (!sock_ || !sock_->is_open()) return;
  // Until aqsd has registered this connection only the handshake may go out:
  // anything else (a late answer to the last connection's launch) would
  // reach aqsd before hello, and aqsd refuses that connection.
  if (!connected_ && !std::holds_alternative<protocol::hello>(m) && !std::holds_alternative<protocol::register_node>(m)) {
    return;
  }
  std::string frame;
  try {
    frame = protocol::encode(m);
  } catch (const protocol::protocol_error& e) {
    warn(std::string("cannot encode ") + std::string(protocol::type_of(m)) + ": " + e.what());
    return;
  }
  out_.push_back(std::move(frame));
  if (!writing_) {
    writing_ = true;
    asio::co_spawn(io_, write_loop(), asio::detached);
  }
}

awaitable<void> agent::write_loop() {
  // out_ is only appended to while this runs; the front is written in place.
  while (!out_.empty() && sock_ && sock_->is_open()) {
    boost::system::error_code ec;
    co_await asio::async_write(*sock_, asio::buffer(out_.front()), asio::redirect_error(use_awaitable, ec));
    if (ec) break;
    out_.pop_front();
  }
  writing_ = false;
}

void agent::report(protocol::message m) {
  std::visit([this](auto& msg) {
    if constexpr (requires { msg.id = std::int64_t{}; }) msg.id = next_id();
  }, m);
  const auto id = protocol::id_of(m).value_or(0);
  outbox_.emplace(id, m);
  if (connected_) send(m);
}

void agent::handle(protocol::message m) {
  if (!protocol::may_receive(protocol::peer_role::node, m)) {
    return log("ignoring " + std::string(protocol::type_of(m)) + " from aqsd: not a message for a node");
  }
  if (auto* l = std::get_if<protocol::launch>(&m)) {
    handle_launch(*l);
  } else if (auto* k = std::get_if<protocol::kill>(&m)) {
    const bool job_control = !k->escalate && (k->signal == SIGSTOP || k->signal == SIGCONT);
    bool found = k->escalate    ? supervisor_.kill(k->job_id, static_cast<int>(k->signal), std::chrono::seconds(k->grace_s))
                 : job_control ? supervisor_.pause(k->job_id, k->signal == SIGSTOP)
                 : k->steps    ? supervisor_.signal_steps(k->job_id, static_cast<int>(k->signal))
                               : supervisor_.signal(k->job_id, static_cast<int>(k->signal));
    // fctl suspend/resume: the job's processes that left its group (an MPI
    // daemon in its own session, and its ranks) stop and continue too (in
    // a cgroup, the freezer has them all).
    if (job_control && !supervisor_.contained(k->job_id) && signal_tagged(k->job_id, static_cast<int>(k->signal)) > 0) {
      found = true;
    }
    if (k->escalate) {
      // Processes of the job that left its group and session (an MPI daemon
      // that made itself a session leader, and its ranks) go too; killing
      // the job kills them, with the same grace.
      const std::int64_t job_id = k->job_id;
      if (signal_tagged(job_id, static_cast<int>(k->signal)) > 0) {
        found = true;
        if (k->signal != SIGKILL) {
          auto t = std::make_shared<boost::asio::steady_timer>(io_, std::chrono::seconds(k->grace_s));
          t->async_wait([t, job_id](boost::system::error_code ec) {
            if (!ec) signal_tagged(job_id, SIGKILL);
          });
        }
      }
    }
    if (found) {
      send(protocol::ok{k->id, {}});
    } else {
      send(protocol::error{k->id, protocol::error_code::not_found,
                           "job " + std::to_string(k->job_id) + " is not running on " + options_.name});
    }
  } else if (auto* cpus = std::get_if<protocol::job_cpus>(&m)) {
    handle_job_cpus(*cpus);
  } else if (auto* o = std::get_if<protocol::ok>(&m)) {
    if (leaving_id_ && o->id == *leaving_id_) left_ = true;
    if (auto hb = heartbeat_sent_.find(o->id); hb != heartbeat_sent_.end()) {
      // aqsd heard this node when it got that heartbeat, not before it was
      // sent: its jobs are safe until that time plus the node-down timeout.
      supervisor_.renew(hb->second);
      // The steps fence their jobs once no heartbeat is acknowledged for
      // fencing_for().term_after: say so when acknowledgements come at half that.
      const std::int64_t waited = job_supervisor::monotonic_ms() - hb->second;
      const std::int64_t half = fencing_for(options_).term_after.count() / 2;
      if (waited > half && !slow_acks_) {
        warn("aqsd took " + std::to_string(waited) + " ms to acknowledge a heartbeat (this node's jobs end themselves "
             "after " + std::to_string(fencing_for(options_).term_after.count()) + " ms without one)");
      } else if (waited <= half && slow_acks_) {
        log("aqsd acknowledges heartbeats in time again (" + std::to_string(waited) + " ms)");
      }
      slow_acks_ = waited > half;
      heartbeat_sent_.erase(heartbeat_sent_.begin(), std::next(hb));
      if (prober_ && o->result.contains("peers")) {
        try {
          auto r = protocol::read_reply<protocol::heartbeat_reply>(*o);
          if (r.peers) prober_->set_peers(std::move(*r.peers));
        } catch (const protocol::protocol_error& e) {
          warn(std::string("ignoring an unreadable list of nodes to probe from aqsd: ") + e.what());
        }
      }
    }
    auto it = outbox_.find(o->id);
    if (it != outbox_.end()) {
      // aqsd has the job's end on disk: its spool records may go.
      if (auto* e = std::get_if<protocol::job_exited>(&it->second)) supervisor_.forget(e->job_id);
      outbox_.erase(it);
    }
  } else if (auto* e = std::get_if<protocol::error>(&m)) {
    if (e->id && outbox_.erase(*e->id) > 0) warn("aqsd refused a report: " + e->message);
  } else {
    log("ignoring " + std::string(protocol::type_of(m)) + " from aqsd");
  }
}

void agent::handle_job_cpus(const protocol::job_cpus& m) {
  const std::string job = "job " + std::to_string(m.job_id);
  if (!supervisor_.is_running(m.job_id)) {
    // A resize told every node of the job, and this one has none of it (yet).
    return send(protocol::error{m.id, protocol::error_code::not_found, job + " is not running on " + options_.name});
  }
  std::vector<int> cpus;
  for (const std::int64_t c : m.cpus) {
    if (std::find(options_.cpus.begin(), options_.cpus.end(), c) == options_.cpus.end()) {
      warn("aqsd gave " + job + " cpu " + std::to_string(c) + ", which is not one of this node's: cpuset unchanged");
      return send(protocol::error{m.id, protocol::error_code::bad_request,
                                  "cpu " + std::to_string(c) + " is not one of node " + options_.name + "'s"});
    }
    cpus.push_back(static_cast<int>(c));
  }
  // None left here: what the job still runs on this node (an MPI daemon
  // waiting for the job to grow back) idles on the node's cpus, as a daemon
  // on a spare host does from its launch.
  if (cpus.empty()) cpus = options_.cpus;
  if (!supervisor_.contained(m.job_id)) {
    return send(protocol::ok{m.id, {}});  // no cpuset: its ranks pin themselves
  }
  try {
    supervisor_.set_cpus(m.job_id, cpus);
  } catch (const std::exception& e) {
    warn("cannot set the cpus of " + job + ": " + e.what());
    return send(protocol::error{m.id, protocol::error_code::internal, e.what()});
  }
  std::string list;
  for (const int c : cpus) list += (list.empty() ? "" : ",") + std::to_string(c);
  log(job + " may use cpus " + list + (m.cpus.empty() ? " (it holds no processors here)" : ""));
  send(protocol::ok{m.id, {}});
}

void agent::handle_launch(const protocol::launch& l) {
  if (supervisor_.is_running(l.job_id)) {
    send(protocol::ok{l.id, {}});  // a repeated launch after a reconnect: already running
    return;
  }
  if (draining_) {
    return refuse_launch(l, protocol::error_code::invalid_state, "node " + options_.name + " is shutting down");
  }
  if (l.job_token && l.job_token->rfind(cluster_ + ".", 0) != 0) {
    // aqsd's job tokens begin with its cluster id: this launch is not of
    // the cluster this agent registered with (and keeps records for).
    return refuse_launch(l, protocol::error_code::permission_denied,
                         "the launch of job " + std::to_string(l.job_id) +
                             " carries another cluster's token; this agent serves cluster " + cluster_);
  }
  const bool root = ::geteuid() == 0;
  if (!root && static_cast<uid_t>(l.uid) != ::getuid()) {
    return refuse_launch(l, protocol::error_code::permission_denied,
                         "this agent runs as uid " + std::to_string(::getuid()) + " and cannot start jobs of uid " +
                             std::to_string(l.uid) + " (run aqs-node as root)");
  }
  if (stats_) stats_->owner(l.job_id, static_cast<uid_t>(l.uid));
  const node_environment node{options_.name, options_.socket_path, options_.server, options_.rsh_agent,
                              options_.mpi_interfaces};
  launch_spec spec = job_environment(l, node, root, mpi_launch_dir(job_spool(), l.job_id),
                                     [this](const std::string& why) { log(why); });
  set_output_files(l, spec, options_.name);
  spec.cgroup_step = step_of(l);

  if (l.job.script) {
    const auto path = script_path(job_spool(), l.job_id);
    std::optional<file_owner> owner;  // mode 0700: the job's user must own it to run it
    if (root) owner = file_owner{static_cast<uid_t>(l.uid), static_cast<gid_t>(l.gid)};
    if (!write_job_script(path, *l.job.script, owner)) {
      std::error_code ec;
      std::filesystem::remove_all(mpi_launch_dir(job_spool(), l.job_id), ec);
      return refuse_launch(l, protocol::error_code::internal, "cannot write the job script to " + path.string());
    }
    spec.argv = script_command(path, *l.job.script);
  }
  spec.argv.insert(spec.argv.end(), l.job.argv.begin(), l.job.argv.end());

  // Interactive (frun): output goes through pipes to aqsd, not to files.
  output_pipes pipes;
  if (l.job.interactive) {
    if (!pipes.open()) {
      const std::string why = std::string("cannot create pipes: ") + std::strerror(errno);
      return refuse_launch(l, protocol::error_code::internal, why);
    }
    pipes.attach(spec);
  }
  std::optional<std::chrono::milliseconds> limit;
  if (l.job.walltime_s) limit = std::chrono::seconds(*l.job.walltime_s);
  // --mem / --mem-per-cpu: what the job may use on this node (the kernel's
  // limit of its cgroup, or the agent's polling of its resident memory).
  if (const auto& g = l.job.geometry) {
    spec.memory_mb = g->mem_per_node_mb ? static_cast<std::uint64_t>(*g->mem_per_node_mb)
                                        : static_cast<std::uint64_t>(g->mem_per_cpu_mb.value_or(0)) * l.local_cpus.size();
  }
  try {
    supervisor_.start_async(l.job_id, spec, limit, options_.timeout_grace, on_started(l));
    if (const auto& g = l.job.geometry) {
      if (spec.memory_mb > 0) supervisor_.limit_memory(l.job_id, spec.memory_mb);
      // --signal=[B:]SIG[@TIME]: a warning before the time limit.
      if (const auto warn = core::signal_spec_of(g->recorded); warn && limit) {
        supervisor_.signal_before_limit(l.job_id, *warn);
      }
    }
  } catch (const std::exception& e) {
    remove_job_files(job_spool(), l.job_id);  // a job that never started leaves nothing
    return refuse_launch(l, protocol::error_code::bad_request, e.what());
  }
  if (l.job.interactive) output_.forward(l.job_id, std::move(pipes));
}

std::string agent::step_of(const protocol::launch& l) {
  // The job's first node (where aqsd runs its batch script or command)
  // names itself first in the job's node list; anything aqsd launches of
  // the job on another node is a step aqs-rsh asked for.
  const std::string& list = l.nodelist;
  const std::string first = list.substr(0, list.find_first_of(":,"));
  if (first == options_.name) return "batch";
  if (step_counts_.size() > 4096) {  // the counts of jobs no longer here go
    std::erase_if(step_counts_, [this](const auto& e) { return !supervisor_.is_running(e.first); });
  }
  return std::to_string(step_counts_[l.job_id]++);
}

void agent::refuse_launch(const protocol::launch& l, protocol::error_code code, const std::string& why) {
  warn("job " + std::to_string(l.job_id) + " not started: " + why);
  send(protocol::error{l.id, code, why});
}

job_supervisor::started_callback agent::on_started(const protocol::launch& l) {
  // The step starts the job while we go on; its answer comes back here.
  // The answer belongs to this connection: after a reconnect its request id
  // means nothing (or another request) to aqsd, which sends the launch again
  // if it still wants it.
  const std::uint64_t generation = generation_;
  auto answer = [this, generation](protocol::message m) {
    if (connected_ && generation == generation_) send(m);
  };
  return [this, job_id = l.job_id, request = l.id, answer](std::optional<std::string> error) {
    if (error) {
      remove_job_files(job_spool(), job_id);  // a job that never started leaves nothing
      output_.abandon(job_id);
      warn("job " + std::to_string(job_id) + " not started: " + *error);
      answer(protocol::error{request, protocol::error_code::bad_request, *error});
      return;
    }
    answer(protocol::ok{request, {}});
    report(protocol::job_started{0, job_id});
  };
}

void agent::send_output(protocol::output o) {
  if (connected_ && pending_output_.empty()) {
    send(o);
    return;
  }
  // aqsd is away: keep the newest few MiB; frun gets what is left.
  constexpr std::size_t k_max_pending = std::size_t{4} << 20;
  pending_output_bytes_ += o.data.size();
  pending_output_.push_back(std::move(o));
  bool dropped = false;
  while (pending_output_bytes_ > k_max_pending && !pending_output_.empty()) {
    pending_output_bytes_ -= pending_output_.front().data.size();
    pending_output_.pop_front();
    dropped = true;
  }
  if (dropped) warn("aqsd is away: dropped the oldest interactive output beyond 4 MiB");
}

void agent::on_job_end(const job_outcome& o) {
  // An interactive job's output first: its end is reported once its pipes are drained.
  if (!output_.hold_end(o)) report_end(o);
}

std::string default_rsh_agent() {
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const auto beside = self.parent_path() / "aqs-rsh";
    if (::access(beside.c_str(), X_OK) == 0) return beside.string();
  }
#ifdef AQS_RSH_BUILD_PATH
  if (::access(AQS_RSH_BUILD_PATH, X_OK) == 0) return AQS_RSH_BUILD_PATH;
#endif
  return {};
}

bool agent::take_cluster(const std::string& cluster_id, const std::string& where) {
  const std::optional<std::string> before = cluster_.empty() ? spool_cluster_ : std::optional<std::string>(cluster_);
  if (before && *before != cluster_id) {
    const auto old_dir = cluster_spool(options_.spool, *before);
    if (const auto ids = job_records(old_dir); !ids.empty()) {
      warn("spool " + old_dir.string() + " holds " + std::to_string(ids.size()) + " job record(s) of cluster " + *before +
           ", not of cluster " + cluster_id + " that aqsd at " + where + " is: set aside, not adopted and not killed");
    }
  }
  const auto dir = cluster_spool(options_.spool, cluster_id);
  try {
    prepare_spool(dir);
  } catch (const std::exception& e) {
    fail(e.what());
    return false;
  }
  if (!set_spool_cluster(options_.spool, cluster_id)) {
    fail("cannot record the cluster id in " + (options_.spool / "cluster").string() + ": " + std::strerror(errno));
    return false;
  }
  spool_lock_->describe(cluster_id);
  supervisor_.set_spool(dir);
  if (cgroups_usable_) {
    cgroup_options co = options_.cgroups;
    co.node = options_.name;
    co.cluster = cluster_id;
    std::string why;
    auto cg = probe_cgroups(co, why);
    if (!cg) {
      // Usable at start, not now (removed by hand?): no job may run uncontained.
      fail("cannot make this node's cgroups for cluster " + cluster_id + ": " + why);
      return false;
    }
    containment_ = cg->describe();
    log("containment: " + containment_);
    supervisor_.contain(std::move(cg));
  }
  cluster_ = cluster_id;
  spool_cluster_ = cluster_id;
  log("serving cluster " + cluster_id + " (job records in " + dir.string() + ")");
  // Jobs an earlier agent on this spool left running for this cluster (it
  // was killed, or upgraded) are ours again; those that ended meanwhile are
  // reported with the rest of the outbox.
  const auto adopted = supervisor_.adopt();
  if (!adopted.empty()) log("adopted " + std::to_string(adopted.size()) + " running job(s) from the spool");
  remove_stale_job_files();
  return true;
}

void agent::remove_stale_job_files() {
  // Scripts and MPI launch files of jobs not running here: an earlier agent
  // died between writing them and the job's start or end. (Adopted jobs
  // that ended meanwhile have already been reported, and theirs removed.)
  std::error_code ec;
  const auto stale = stale_job_files(job_spool(), [this](std::int64_t id) { return supervisor_.is_running(id); });
  for (const auto& p : stale) std::filesystem::remove_all(p, ec);
}

void agent::report_end(const job_outcome& o) {
  remove_job_files(job_spool(), o.job_id);
  if (ended_for_leaving_.count(o.job_id) != 0 && o.state == core::job_state::cancelled) {
    // Killed because this node is leaving: node_leaving tells aqsd, which
    // ends it as on a node failure (NODE_FAIL, or requeued).
    supervisor_.forget(o.job_id);
    return;
  }
  protocol::job_exited e;
  e.job_id = o.job_id;
  e.state = o.state;
  if (!o.reason.empty()) {
    e.reason = o.reason;
    // The admin's record of it here, the step named (on a node other than
    // the job's first, aqsd knows it only as a step's end).
    warn("job " + std::to_string(o.job_id) + (o.step.empty() ? "" : " (step " + o.step + ")") + " ended " +
         std::string(core::to_string(o.state)) + ": " + o.reason);
  }
  if (o.status.signaled()) {
    e.signal = o.status.term_signal;
  } else {
    e.exit_code = o.status.exit_code;
  }
  if (o.measured) {
    e.user_cpu_us = o.measured->user_cpu_us;
    e.system_cpu_us = o.measured->system_cpu_us;
    e.max_rss_kb = o.measured->max_rss_kb;
  }
  report(e);
}

}  // namespace aqs::node
