// agent: connection, handshake and registration, heartbeats, launch and kill
// handling, and reliable reporting of job ends.
#include "agent.hpp"
#include "job_process.hpp"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
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

#include "aqs/mpi_adapter/launch.hpp"
#include "core/output_pattern.hpp"
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

// AQS_CPUS: "3,0,1" (one node-local cpu per processor of the job's map).
std::string join_numbers(const std::vector<std::int64_t>& v) {
  std::string out;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(v[i]);
  }
  return out;
}

// AQS_HOSTS: the host of every processor, runs written once: "a*4,b*2".
std::string join_hosts(const std::vector<std::string>& v) {
  std::string out;
  for (std::size_t i = 0; i < v.size();) {
    std::size_t j = i;
    while (j < v.size() && v[j] == v[i]) ++j;
    if (!out.empty()) out += ',';
    out += v[i] + "*" + std::to_string(j - i);
    i = j;
  }
  return out;
}

}  // namespace

agent::agent(asio::io_context& io, agent_options options, std::function<void(const std::string&)> on_fatal)
    : io_(io),
      options_(std::move(options)),
      on_fatal_(std::move(on_fatal)),
      supervisor_(io, [this](const job_outcome& o) { on_job_end(o); }, options_.spool, fencing_for(options_)),
      backoff_timer_(io) {}

agent::~agent() { stop(); }

fencing fencing_for(const agent_options& o) {
  using ms = std::chrono::milliseconds;
  // A heartbeat as long as the timeout leaves nothing: then half of it.
  const ms kill = o.node_down_timeout > 2 * o.heartbeat ? o.node_down_timeout - o.heartbeat : o.node_down_timeout / 2;
  return fencing{kill - std::min<ms>(2000ms, kill / 2), kill};
}

void agent::log(const std::string& line) const {
  std::time_t t = std::time(nullptr);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", std::localtime(&t));
  std::fprintf(stderr, "%s aqs-node[%s]: %s\n", stamp, options_.name.c_str(), line.c_str());
}

void agent::start() {
  const std::string spool = options_.spool.string();
  std::error_code ec;
  std::filesystem::create_directories(options_.spool.parent_path(), ec);
  if (::mkdir(spool.c_str(), 0711) != 0 && errno != EEXIST) {
    throw std::runtime_error("cannot create spool directory " + spool + ": " + std::strerror(errno));
  }
  // A root agent writes job scripts here and hands them to their users: a
  // directory someone else prepared (or a symlink to one) would let them
  // redirect those writes onto any file.
  struct stat sb {};
  if (::lstat(spool.c_str(), &sb) != 0 || !S_ISDIR(sb.st_mode)) {
    throw std::runtime_error("spool " + spool + " is not a directory (a symlink?): refusing to use it");
  }
  if (sb.st_uid != ::geteuid()) {
    throw std::runtime_error("spool directory " + spool + " belongs to uid " + std::to_string(sb.st_uid) +
                             ", not to this agent's uid " + std::to_string(::geteuid()) + ": refusing to use it");
  }
  // Jobs run as their users and must be able to execute their own script,
  // but not list or create entries.
  if (::chmod(spool.c_str(), 0711) != 0) {
    throw std::runtime_error("cannot set the mode of spool directory " + spool + ": " + std::strerror(errno));
  }
  // Jobs a previous agent on this spool left running (it was killed, or
  // the machine's agent was upgraded) are ours again; those that ended
  // meanwhile are reported once aqsd is reached.
  const auto adopted = supervisor_.adopt();
  if (!adopted.empty()) log("adopted " + std::to_string(adopted.size()) + " running job(s) from the spool");
  remove_stale_job_files();
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
  if (!outbox_.empty()) log(std::to_string(outbox_.size()) + " reports not acknowledged by aqsd at exit");
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
    if (!left_) log("aqsd did not acknowledge that this node is leaving");
  }
  stop();
  if (done) done();
}

void agent::stop() {
  stopping_ = true;
  backoff_timer_.cancel();
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
    if (last_error_ != ec.message()) log("cannot resolve " + where + ": " + (last_error_ = ec.message()));
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
  co_await sock_->async_connect(ep, asio::redirect_error(use_awaitable, ec));
  if (ec) {
    if (last_error_ != ec.message()) log("cannot reach aqsd at " + where + ": " + (last_error_ = ec.message()) + " (retrying)");
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
      if (last_error_ != e->message) log("aqsd at " + where + " cannot take this agent now: " + (last_error_ = e->message) + " (retrying)");
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
  reg.running = supervisor_.running();
  reg.host = host_name();
  send(reg);
  reply = co_await read_one();
  if (!reply) co_return false;
  if (auto* e = std::get_if<protocol::error>(&*reply)) {
    if (e->code == protocol::error_code::invalid_state || transient(e->code)) {
      // The name is still held by our previous connection (aqsd has not yet
      // seen it close) or by another agent: wait and try again.
      if (last_error_ != e->message) log("aqsd refused to register node " + options_.name + ": " + (last_error_ = e->message));
      co_return false;
    }
    fail("aqsd refused to register node " + options_.name + ": " + e->message);
    co_return false;
  }
  if (auto* okr = std::get_if<protocol::ok>(&*reply)) {
    protocol::register_reply registered;
    try {
      registered = protocol::read_reply<protocol::register_reply>(*okr);
    } catch (const protocol::protocol_error& e) {
      fail("aqsd at " + where + " answered register with an unreadable reply: " + e.what());
      co_return false;
    }
    // Jobs aqsd no longer wants here (e.g. it declared them NODE_FAIL while
    // we were away): they go before the node takes new work.
    for (const std::int64_t id : registered.kill) supervisor_.kill(id, SIGKILL, 0ms);
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
    send(protocol::heartbeat{next_id(), supervisor_.running()});
  }
}

std::optional<protocol::message> agent::take_frame() {
  while (!frames_.empty()) {
    std::string body = std::move(frames_.front());
    frames_.erase(frames_.begin());
    try {
      return protocol::parse_message(std::string_view(body));
    } catch (const protocol::protocol_error& e) {
      log(std::string("ignoring a malformed message from aqsd: ") + e.what());
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
      log(std::string("broken frame from aqsd, reconnecting: ") + e.what());
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
    log(std::string("cannot encode ") + std::string(protocol::type_of(m)) + ": " + e.what());
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
  if (auto* l = std::get_if<protocol::launch>(&m)) {
    handle_launch(*l);
  } else if (auto* k = std::get_if<protocol::kill>(&m)) {
    bool found = k->escalate
                     ? supervisor_.kill(k->job_id, static_cast<int>(k->signal), std::chrono::seconds(k->grace_s))
                     : supervisor_.signal(k->job_id, static_cast<int>(k->signal));
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
  } else if (auto* o = std::get_if<protocol::ok>(&m)) {
    if (leaving_id_ && o->id == *leaving_id_) left_ = true;
    auto it = outbox_.find(o->id);
    if (it != outbox_.end()) {
      // aqsd has the job's end on disk: its spool records may go.
      if (auto* e = std::get_if<protocol::job_exited>(&it->second)) supervisor_.forget(e->job_id);
      outbox_.erase(it);
    }
  } else if (auto* e = std::get_if<protocol::error>(&m)) {
    if (e->id && outbox_.erase(*e->id) > 0) log("aqsd refused a report: " + e->message);
  } else {
    log("ignoring " + std::string(protocol::type_of(m)) + " from aqsd");
  }
}

void agent::handle_launch(const protocol::launch& l) {
  auto refuse = [&](protocol::error_code code, const std::string& why) {
    log("job " + std::to_string(l.job_id) + " not started: " + why);
    send(protocol::error{l.id, code, why});
  };
  if (supervisor_.is_running(l.job_id)) {
    send(protocol::ok{l.id, {}});  // a repeated launch after a reconnect: already running
    return;
  }
  if (draining_) {
    return refuse(protocol::error_code::invalid_state, "node " + options_.name + " is shutting down");
  }
  const bool root = ::geteuid() == 0;
  if (!root && static_cast<uid_t>(l.uid) != ::getuid()) {
    return refuse(protocol::error_code::permission_denied,
                  "this agent runs as uid " + std::to_string(::getuid()) + " and cannot start jobs of uid " +
                      std::to_string(l.uid) + " (run aqs-node as root)");
  }
  launch_spec spec;
  if (root) {
    spec.uid = static_cast<uid_t>(l.uid);
    spec.gid = static_cast<gid_t>(l.gid);
  }
  spec.workdir = l.job.workdir;
  // The submitter's (old clients send none: the traditional 0022).
  spec.umask = static_cast<mode_t>(l.job.umask.value_or(022) & 0777);
  // The job's own environment, then what AQS tells every job.
  const std::vector<std::pair<std::string, std::string>> ours = {
      {"AQS_JOB_ID", std::to_string(l.job_id)}, {"AQS_JOB_NAME", l.job.name},
      {"AQS_PROCS", l.procs},                    {"AQS_NPROCS", std::to_string(l.nprocs)},
      {"AQS_NODELIST", l.nodelist},              {"AQS_NODENAME", options_.name}};
  std::vector<std::pair<std::string, std::string>> extra;
  // Where a job's shim (and fsub inside a job) finds aqsd.
  if (options_.socket_path) extra.emplace_back("AQS_SOCKET", *options_.socket_path);
  if (options_.server) extra.emplace_back("AQS_SERVER", *options_.server);
  if (!l.proc_cpus.empty()) {
    extra.emplace_back("AQS_CPUS", join_numbers(l.proc_cpus));
    extra.emplace_back("AQS_HOSTS", join_hosts(l.proc_hosts));
  }
  if (l.uid == 0) {
    extra.emplace_back("OMPI_ALLOW_RUN_AS_ROOT", "1");
    extra.emplace_back("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
  }
  // The job's plain `mpirun ./app` starts one rank per processor of its map
  // on that processor's host (aqs::mpi_adapter's hostfile and variables;
  // daemons on other hosts through aqs-rsh). A rigid job's rankfile binds
  // each rank to its cpu; an adaptive job's shim pins its ranks itself and
  // spawns more on the processors it gains, on any host.
  bool placed = false;
  if (!l.proc_cpus.empty() && l.proc_cpus.size() == l.proc_hosts.size()) {
    try {
      mpi_adapter::allocation a;
      a.procs = mpi_adapter::make_processors(l.proc_hosts, std::vector<int>(l.proc_cpus.begin(), l.proc_cpus.end()));
      a.launch_agent = options_.rsh_agent;
      a.tcp_interfaces = options_.mpi_interfaces;
      a.adaptive = l.job.adaptive;
      a.spare_hosts = l.spare_hosts;
      const auto files = mpi_adapter::write_launch_files(mpi_dir(l.job_id), a);
      for (auto& kv : mpi_adapter::launch_environment(a, files)) extra.push_back(std::move(kv));
      placed = true;
    } catch (const std::exception& e) {
      log("job " + std::to_string(l.job_id) + ": no MPI launch files (its mpirun keeps OpenMPI's defaults): " +
          e.what());
    }
  }
  // The shim still pins and spawns: mpirun must neither bind nor refuse to
  // start more ranks than it has slots.
  if (l.job.adaptive && !placed) {
    for (auto& kv : mpi_adapter::adaptive_placement()) extra.push_back(std::move(kv));
  }
  for (const auto& kv : l.job.environment) {
    const std::string key = kv.substr(0, kv.find('='));
    bool shadowed = key == "AQS_JOB_TOKEN" || key == "AQS_CPUS" || key == "AQS_HOSTS";
    for (const auto& [k, v] : extra) shadowed = shadowed || k == key;
    for (const auto& [k, v] : ours) shadowed = shadowed || k == key;
    if (!shadowed) spec.env.push_back(kv);
  }
  for (const auto& [k, v] : ours) spec.env.push_back(k + "=" + v);
  for (const auto& [k, v] : extra) spec.env.push_back(k + "=" + v);
  if (l.job_token) spec.env.push_back("AQS_JOB_TOKEN=" + *l.job_token);

  const core::pattern_values values{l.job_id, l.job.name, l.user};
  spec.stdout_path = core::expand_output_pattern(l.job.stdout_pattern, values);
  if (l.job.stderr_pattern) spec.stderr_path = core::expand_output_pattern(*l.job.stderr_pattern, values);
  for (auto c : l.local_cpus) spec.cpus.push_back(static_cast<int>(c));

  if (l.job.script) {
    const auto path = options_.spool / ("job-" + std::to_string(l.job_id) + ".script");
    // A fresh file, never one that was there (or a link planted in its place).
    ::unlink(path.c_str());
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0700);
    bool written = fd >= 0;
    if (written) {
      const std::string& text = *l.job.script;
      std::size_t off = 0;
      while (written && off < text.size()) {
        const ssize_t n = ::write(fd, text.data() + off, text.size() - off);
        written = n > 0;
        off += written ? static_cast<std::size_t>(n) : 0;
      }
      if (root && written) written = ::fchown(fd, spec.uid.value_or(0), spec.gid.value_or(0)) == 0;
      ::close(fd);
    }
    if (!written) {
      std::error_code ec;
      std::filesystem::remove_all(mpi_dir(l.job_id), ec);
      return refuse(protocol::error_code::internal, "cannot write the job script to " + path.string());
    }
    // A script without a shebang runs with /bin/sh, as sbatch scripts do.
    if (l.job.script->rfind("#!", 0) != 0) spec.argv.push_back("/bin/sh");
    spec.argv.push_back(path.string());
  }
  spec.argv.insert(spec.argv.end(), l.job.argv.begin(), l.job.argv.end());

  std::optional<std::chrono::milliseconds> limit;
  if (l.job.walltime_s) limit = std::chrono::seconds(*l.job.walltime_s);
  // Interactive (frun): output goes through pipes to aqsd, not to files.
  int out_pipe[2] = {-1, -1}, err_pipe[2] = {-1, -1};
  if (l.job.interactive) {
    if (::pipe2(out_pipe, O_CLOEXEC) != 0 || ::pipe2(err_pipe, O_CLOEXEC) != 0) {
      for (int fd : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]}) {
        if (fd >= 0) ::close(fd);
      }
      return refuse(protocol::error_code::internal, std::string("cannot create pipes: ") + std::strerror(errno));
    }
    spec.stdout_fd = out_pipe[1];
    spec.stderr_fd = err_pipe[1];
  }
  const std::int64_t job_id = l.job_id, request = l.id;
  auto forget_script = [this, job_id] {
    std::error_code ec;
    std::filesystem::remove(options_.spool / ("job-" + std::to_string(job_id) + ".script"), ec);
    std::filesystem::remove_all(mpi_dir(job_id), ec);  // a job that never started leaves nothing
  };
  // The step starts the job while we go on; its answer comes back here.
  // The answer belongs to this connection: after a reconnect its request id
  // means nothing (or another request) to aqsd, which sends the launch again
  // if it still wants it.
  const std::uint64_t generation = generation_;
  auto answer = [this, generation](protocol::message m) {
    if (connected_ && generation == generation_) send(m);
  };
  auto started = [this, job_id, request, forget_script, answer](std::optional<std::string> error) {
    if (error) {
      forget_script();
      auto s = streams_.find(job_id);
      if (s != streams_.end()) {
        boost::system::error_code ignored;
        if (s->second.out) s->second.out->close(ignored);
        if (s->second.err) s->second.err->close(ignored);
      }
      log("job " + std::to_string(job_id) + " not started: " + *error);
      answer(protocol::error{request, protocol::error_code::bad_request, *error});
      return;
    }
    answer(protocol::ok{request, {}});
    report(protocol::job_started{0, job_id});
  };
  try {
    supervisor_.start_async(l.job_id, spec, limit, options_.timeout_grace, started);
  } catch (const std::exception& e) {
    forget_script();
    for (int fd : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]}) {
      if (fd >= 0) ::close(fd);
    }
    return refuse(protocol::error_code::bad_request, e.what());
  }
  if (l.job.interactive) {
    ::close(out_pipe[1]);  // the step has its own copies now
    ::close(err_pipe[1]);
    job_streams& js = streams_[l.job_id];
    js.out = std::make_unique<asio::posix::stream_descriptor>(io_, out_pipe[0]);
    js.err = std::make_unique<asio::posix::stream_descriptor>(io_, err_pipe[0]);
    js.open = 2;
    asio::co_spawn(io_, read_stream(l.job_id, false), asio::detached);
    asio::co_spawn(io_, read_stream(l.job_id, true), asio::detached);
  }
}

awaitable<void> agent::read_stream(std::int64_t job_id, bool is_stderr) {
  std::array<char, 64 * 1024> buf{};
  while (true) {
    auto it = streams_.find(job_id);
    if (it == streams_.end()) co_return;
    auto& d = is_stderr ? it->second.err : it->second.out;
    if (!d || !d->is_open()) break;
    boost::system::error_code ec;
    const std::size_t n = co_await d->async_read_some(asio::buffer(buf), asio::redirect_error(use_awaitable, ec));
    if (n > 0) {
      protocol::output o;
      o.job_id = job_id;
      o.stream = is_stderr ? "stderr" : "stdout";
      o.data.assign(buf.data(), n);
      send_output(std::move(o));
    }
    if (ec) break;  // EOF: every writer is gone (or we gave up waiting)
  }
  stream_closed(job_id);
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
  if (dropped) log("aqsd is away: dropped the oldest interactive output beyond 4 MiB");
}

void agent::stream_closed(std::int64_t job_id) {
  auto it = streams_.find(job_id);
  if (it == streams_.end()) return;
  if (--it->second.open > 0) return;
  std::optional<job_outcome> ended = std::move(it->second.ended);
  streams_.erase(it);
  if (ended) report_end(*ended);
}

void agent::on_job_end(const job_outcome& o) {
  auto it = streams_.find(o.job_id);
  if (it != streams_.end() && it->second.open > 0) {
    // Its output first: the end is reported once the pipes are drained. A
    // process that escaped the job's group and keeps them open gets 2 s.
    it->second.ended = o;
    it->second.linger = std::make_unique<asio::steady_timer>(io_, 2s);
    const std::int64_t id = o.job_id;
    it->second.linger->async_wait([this, id](boost::system::error_code ec) {
      if (ec) return;
      auto s = streams_.find(id);
      if (s == streams_.end()) return;
      boost::system::error_code ignored;
      if (s->second.out) s->second.out->close(ignored);
      if (s->second.err) s->second.err->close(ignored);
    });
    return;
  }
  report_end(o);
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

void agent::remove_stale_job_files() {
  // Scripts and MPI launch files of jobs not running here: an earlier agent
  // died between writing them and the job's start or end. (Adopted jobs
  // that ended meanwhile have already been reported, and theirs removed.)
  std::error_code ec;
  std::vector<std::filesystem::path> stale;
  for (const auto& e : std::filesystem::directory_iterator(options_.spool, ec)) {
    const std::string name = e.path().filename().string();
    const auto ext = e.path().extension().string();
    if (name.rfind("job-", 0) != 0 || (ext != ".mpi" && ext != ".script")) continue;
    std::int64_t id = 0;
    try {
      id = std::stoll(e.path().stem().string().substr(4));
    } catch (const std::exception&) {
      continue;
    }
    if (!supervisor_.is_running(id)) stale.push_back(e.path());
  }
  for (const auto& p : stale) std::filesystem::remove_all(p, ec);
}

std::filesystem::path agent::mpi_dir(std::int64_t job_id) const {
  return options_.spool / ("job-" + std::to_string(job_id) + ".mpi");
}

void agent::report_end(const job_outcome& o) {
  std::error_code ec;
  std::filesystem::remove(options_.spool / ("job-" + std::to_string(o.job_id) + ".script"), ec);
  std::filesystem::remove_all(mpi_dir(o.job_id), ec);
  if (ended_for_leaving_.count(o.job_id) != 0 && o.state == core::job_state::cancelled) {
    // Killed because this node is leaving: node_leaving tells aqsd, which
    // ends it as on a node failure (NODE_FAIL, or requeued).
    supervisor_.forget(o.job_id);
    return;
  }
  protocol::job_exited e;
  e.job_id = o.job_id;
  e.state = o.state;
  if (o.status.signaled()) {
    e.signal = o.status.term_signal;
  } else {
    e.exit_code = o.status.exit_code;
  }
  report(e);
}

}  // namespace aqs::node
