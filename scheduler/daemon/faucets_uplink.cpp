// faucets_uplink: the link to faucetsd, one coroutine per connection on the
// uplink's strand; requests reach the controller as a local user's would.
#include "daemon/faucets_uplink.hpp"

#include "daemon/job_files.hpp"
#include "protocol/staged_files.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <variant>
#include <atomic>
#include <fstream>
#include <sstream>
#include <pwd.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <nlohmann/json.hpp>

#include "core/output_pattern.hpp"
#include "core/utf8.hpp"
#include "daemon/controller.hpp"
#include "daemon/job_records.hpp"
#include "daemon/reply_connection.hpp"
#include "cluster_link/link_channel.hpp"
#include "cluster_link/link_messages.hpp"
#include "cluster_link/tls.hpp"
#include "cluster_link/word_table.hpp"
#include "logging/log.hpp"
#include "protocol/auth.hpp"
#include "protocol/replies.hpp"

namespace aqs::daemon {

namespace asio = boost::asio;
namespace ssl = boost::asio::ssl;
using nlohmann::json;

// ---- submit tokens ----------------------------------------------------

std::string faucets_token(const std::string& cluster, std::int64_t fid, std::int64_t attempt) {
  std::string t = "faucets:" + cluster + ":" + std::to_string(fid);
  if (attempt > 0) t += "." + std::to_string(attempt);
  return t;
}

std::optional<faucets_mark> parse_faucets_token(std::string_view token) {
  if (!placed_by_faucets(token)) return std::nullopt;
  const auto colon = token.rfind(':');
  std::string_view tail = token.substr(colon + 1);  // FID or FID.ATTEMPT
  auto number = [](std::string_view digits) -> std::optional<std::int64_t> {
    if (digits.empty() || digits.size() > 15) return std::nullopt;
    std::int64_t v = 0;
    for (const char ch : digits) {
      if (ch < '0' || ch > '9') return std::nullopt;
      v = v * 10 + (ch - '0');
    }
    return v;
  };
  faucets_mark m;
  const auto dot = tail.find('.');
  const auto fid = number(tail.substr(0, dot));
  if (!fid || *fid == 0) return std::nullopt;
  m.fid = *fid;
  if (dot != std::string_view::npos) {
    const auto attempt = number(tail.substr(dot + 1));
    if (!attempt) return std::nullopt;
    m.attempt = *attempt;
  }
  return m;
}

// ---- the market -------------------------------------------------------

double faucets_price(double rate, std::int64_t procs_total, std::int64_t procs_free, std::int64_t pending_procs) {
  if (procs_total <= 0) return rate * 2.0;
  const double busy = static_cast<double>(std::max<std::int64_t>(procs_total - procs_free, 0));
  const double load = (busy + static_cast<double>(std::max<std::int64_t>(pending_procs, 0))) /
                      static_cast<double>(procs_total);
  return rate * (1.0 + load);
}

void held_meter::change(double time, std::int64_t nprocs) {
  if (since_ > 0 && time > since_) acc_ += static_cast<double>(nprocs_) * (time - since_);
  if (since_ <= 0 || time > since_) since_ = time;
  nprocs_ = std::max<std::int64_t>(nprocs, 0);
}

double held_meter::total(double time) const {
  if (since_ <= 0 || time <= since_) return acc_;
  return acc_ + static_cast<double>(nprocs_) * (time - since_);
}

// ---- the user table ---------------------------------------------------

faucets_user_table faucets_user_table::parse(const std::string& text, const std::string& origin) {
  faucets_user_table t;
  for (auto& row : faucets::parse_word_table(text, origin, 2, "SERVER_USER LOCAL_USER")) {
    t.rules_.emplace_back(std::move(row[0]), std::move(row[1]));
  }
  return t;
}

faucets_user_table faucets_user_table::load(const std::filesystem::path& file) {
  return parse(faucets::read_text_file(file, "Faucets user table"), file.string());
}

std::optional<std::string> faucets_user_table::refusal(const std::string& server_user,
                                                       const std::string& local_user) const {
  if (local_user == "root") return "the Faucets server may not run jobs as root";
  for (const auto& [s, l] : rules_) {
    if ((s == "*" || s == server_user) && (l == local_user || (l == "*" && local_user == server_user))) {
      return std::nullopt;
    }
  }
  return "this cluster's table does not let Faucets user '" + server_user + "' run as '" + local_user + "'";
}

// ---- requests into the controller -------------------------------------

namespace {

struct local_account {
  uid_t uid;
  gid_t gid;
};

std::optional<local_account> account_of(const std::string& name) {
  struct passwd pw {};
  struct passwd* out = nullptr;
  std::vector<char> buf(16384);
  if (::getpwnam_r(name.c_str(), &pw, buf.data(), buf.size(), &out) != 0 || out == nullptr) return std::nullopt;
  return local_account{pw.pw_uid, pw.pw_gid};
}

std::string message_text(const protocol::message& m) {
  if (const auto* e = std::get_if<protocol::error>(&m)) return e->message;
  return "unexpected reply";
}

std::string iso_of(double unix_s) {
  return iso8601(store::time_point(std::chrono::duration_cast<store::time_point::duration>(
      std::chrono::duration<double>(unix_s))));
}

std::pair<std::string, std::string> split_host_port(const std::string& hp) {
  const auto colon = hp.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == hp.size()) {
    throw uplink_error("--faucets-server must be HOST:PORT, not '" + hp + "'");
  }
  std::string host = hp.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  return {host, hp.substr(colon + 1)};
}

}  // namespace

// ---- the state --------------------------------------------------------

struct faucets_uplink::state : std::enable_shared_from_this<faucets_uplink::state> {
  state(asio::io_context& io_, controller& ctl_, uplink_options o)
      : io(io_), ctl(ctl_), options(std::move(o)), strand(asio::make_strand(io_)), retry(strand), ticker(strand) {}

  asio::io_context& io;
  controller& ctl;
  uplink_options options;
  std::string host, port;
  std::unique_ptr<ssl::context> tls;
  asio::strand<asio::io_context::executor_type> strand;
  asio::steady_timer retry;
  asio::steady_timer ticker;
  // On the strand:
  std::shared_ptr<faucets::link_channel> channel;
  std::map<std::int64_t, std::int64_t> followed;  // local job id -> the server's fid
  std::map<std::int64_t, std::string> started;     // local job id -> start time (ISO)
  // Jobs seen starting here (not only reported after a restart): the
  // processor-seconds each held, sent with its end.
  std::map<std::int64_t, held_meter> meters;
  std::chrono::steady_clock::time_point last_heard{};
  bool stopped = false;
  std::atomic<bool> up{false};

  void ask(peer_info p, protocol::message m, std::function<void(protocol::message)> then) {
    auto self = shared_from_this();
    auto conn = std::make_shared<reply_connection>(std::move(p), [self, then = std::move(then)](protocol::message r) {
      asio::post(self->strand, [then, r = std::move(r)]() mutable { then(std::move(r)); });
    });
    ctl.on_message(conn, std::move(m));
  }
  static peer_info as_root() {
    peer_info p;
    p.via = transport::unix_socket;
    p.uid = 0;
    p.gid = 0;
    p.remote = "faucets-uplink";
    return p;
  }
  static peer_info as_user(const local_account& a, const std::string& server) {
    peer_info p;
    p.via = transport::http;  // a user vouched for by someone else than the kernel: never admin
    p.uid = a.uid;
    p.gid = a.gid;
    p.remote = "faucets:" + server;
    p.faucets_uplink = true;
    return p;
  }

  void send(json m) {
    if (channel && !channel->closed()) channel->send(std::move(m));
  }

  asio::awaitable<void> run();
  asio::awaitable<void> session();
  asio::awaitable<void> report_loop(std::shared_ptr<faucets::link_channel> ch);
  void handle(const json& m);
  void on_forward(const json& m);
  void on_follow(const json& m);
  void on_release(const json& m);
  void report_copies(std::vector<faucets_copy> copies);
  void on_estimate(const json& m);
  void on_cancel(const json& m);
  // faucetsd's page asks for a job's values or output's tail (issue 35).
  void on_job_view(const json& m);
  // Staged files (job_files.hpp): the job's directory read back and removed.
  void on_fetch(const json& m);
  void on_change(const job_change& ch);
  // Start grants: a job the server placed here launches only once the server
  // has recorded that it starts (faucets_gate::on_start).
  struct start_wait {
    std::function<void(bool)> done;
    std::chrono::steady_clock::time_point deadline;
  };
  std::map<std::int64_t, start_wait> start_waits;  // local job id -> its launch
  void ask_start(std::int64_t id, const std::string& token, std::function<void(bool)> done);
  void on_start_answer(const json& m, bool ok);
  void fail_start_waits();
  void send_update_from(std::int64_t fid, const protocol::job_info& j);
};

asio::awaitable<void> faucets_uplink::state::run() {
  auto self = shared_from_this();
  std::chrono::milliseconds backoff{250};
  std::string last_error;
  while (!stopped) {
    try {
      co_await session();
      backoff = std::chrono::milliseconds{250};
    } catch (const std::exception& e) {
      if (e.what() != last_error) logging::warn("Faucets server {}: {}", options.server, e.what());
      last_error = e.what();
    }
    if (up.exchange(false)) {
      logging::warn("Faucets server {}: link lost; its pending jobs wait until it is back", options.server);
      ctl.faucets().close();
    }
    fail_start_waits();
    if (channel) channel->close();
    channel.reset();
    if (stopped) break;
    retry.expires_after(backoff);
    {
      boost::system::error_code ignored;
      co_await retry.async_wait(asio::redirect_error(asio::use_awaitable, ignored));
    }
    backoff = std::min(backoff * 2, options.retry_max);
  }
}

asio::awaitable<void> faucets_uplink::state::session() {
  asio::ip::tcp::resolver resolver(strand);
  const auto endpoints = co_await resolver.async_resolve(host, port, asio::use_awaitable);
  auto sock = std::make_shared<faucets::tls_socket>(strand, *tls);
  // A connect or handshake that hangs (the server's host is gone) is cut.
  auto deadline = std::make_shared<asio::steady_timer>(strand, std::chrono::seconds(10));
  deadline->async_wait([weak = std::weak_ptr<faucets::tls_socket>(sock)](const boost::system::error_code& ec) {
    auto s = weak.lock();
    if (!ec && s) {
      boost::system::error_code ignore;
      s->lowest_layer().close(ignore);
    }
  });
  co_await asio::async_connect(sock->lowest_layer(), endpoints, asio::use_awaitable);
  if (!SSL_set_tlsext_host_name(sock->native_handle(), host.c_str())) throw uplink_error("cannot set the TLS server name");
  sock->set_verify_callback(ssl::host_name_verification(host));
  co_await sock->async_handshake(ssl::stream_base::client, asio::use_awaitable);
  deadline->cancel();
  auto ch = std::make_shared<faucets::link_channel>(std::move(*sock));
  channel = ch;
  const json challenge = co_await ch->read();
  if (faucets::type_of(challenge) != "challenge") throw uplink_error("the server did not send a challenge");
  const std::string nonce = faucets::string_field(challenge, "nonce", 128);
  ch->send(json{{"type", "hello"},
                {"protocol", faucets::k_link_protocol},
                {"cluster", options.cluster},
                {"auth", protocol::compute_auth(options.key, nonce)}});
  const json verdict = co_await ch->read();
  if (faucets::type_of(verdict) == "error") {
    throw uplink_error("refused: " + faucets::opt_string_field(verdict, "message", 4096).value_or("no reason"));
  }
  if (faucets::type_of(verdict) != "welcome") throw uplink_error("the server did not welcome us");
  up = true;
  last_heard = std::chrono::steady_clock::now();
  logging::info("Faucets server {}: connected as cluster '{}'", options.server, options.cluster);
  asio::co_spawn(strand, report_loop(ch), asio::detached);
  while (!stopped) {
    const json m = co_await ch->read();
    last_heard = std::chrono::steady_clock::now();
    try {
      handle(m);
    } catch (const faucets::link_error& e) {
      logging::warn("Faucets server {}: {}", options.server, e.what());
    }
  }
}

asio::awaitable<void> faucets_uplink::state::report_loop(std::shared_ptr<faucets::link_channel> ch) {
  auto self = shared_from_this();
  asio::steady_timer t(strand);
  while (!stopped && !ch->closed() && channel == ch) {
    const auto now = std::chrono::steady_clock::now();
    if (std::any_of(start_waits.begin(), start_waits.end(), [&](const auto& w) { return w.second.deadline < now; })) {
      logging::warn("Faucets server {}: a job's start was not confirmed within {} ms; closing the link",
                    options.server, options.start_timeout.count());
      ch->close();
      break;
    }
    if (now - last_heard > options.silence_limit) {
      logging::warn("Faucets server {}: silent for {} ms; closing the link", options.server,
                    options.silence_limit.count());
      ch->close();
      break;
    }
    ctl.capacity([self, ch](capacity_summary c) {
      asio::post(self->strand, [self, ch, c = std::move(c)] {
        if (self->channel != ch) return;
        faucets::cluster_report r;
        r.procs_total = c.procs_total;
        r.procs_free = c.procs_free;
        r.gpus_total = c.gpus_total;
        r.gpus_free = c.gpus_free;
        r.shrinkable = c.shrinkable;
        r.running_jobs = c.running_jobs;
        r.pending_jobs = c.pending_jobs;
        r.pending_procs = c.pending_procs;
        r.pending_by_partition = c.pending_by_partition;
        r.max_job_procs = c.max_job_procs;
        r.max_job_gpus = c.max_job_gpus;
        r.nodes_up = c.nodes_up;
        r.speed = self->options.speed;
        r.price = faucets_price(self->options.rate, c.procs_total, c.procs_free, c.pending_procs);
        r.datasets = self->options.datasets;
        ch->send(faucets::to_json(r));
      });
    });
    t.expires_after(options.report_every);
    {
      boost::system::error_code ignored;
      co_await t.async_wait(asio::redirect_error(asio::use_awaitable, ignored));
    }
  }
}

void faucets_uplink::state::handle(const json& m) {
  const std::string type = faucets::type_of(m);
  if (type == "forward") return on_forward(m);
  if (type == "follow") return on_follow(m);
  if (type == "release") return on_release(m);
  if (type == "start_ok") return on_start_answer(m, true);
  if (type == "start_no") return on_start_answer(m, false);
  if (type == "estimate") return on_estimate(m);
  if (type == "cancel") return on_cancel(m);
  if (type == "job_view") return on_job_view(m);
  if (type == "fetch") return on_fetch(m);
  if (type == "ping") {
    const auto pad = faucets::opt_string_field(m, "pad", faucets::k_max_link_frame).value_or("");
    send(json{{"type", "pong"}, {"t", m.value("t", 0.0)}, {"bytes", pad.size()}});
    return;
  }
  logging::debug("Faucets server {}: ignoring a '{}' message", options.server, type);
}

void faucets_uplink::state::on_forward(const json& m) {
  constexpr std::int64_t big = (std::int64_t{1} << 53) - 1;
  const std::int64_t fid = faucets::int_field(m, "fid", 1, big);
  const std::string user = faucets::string_field(m, "user");
  const std::string local = faucets::string_field(m, "local_user");
  const std::int64_t attempt = faucets::opt_int_field(m, "attempt", 0, big).value_or(0);
  auto refuse = [&](const std::string& why) {
    logging::warn("Faucets job {} of server user '{}' as '{}' refused: {}", fid, user, local, why);
    send(json{{"type", "refused"}, {"fid", fid}, {"error", why}});
  };
  if (auto why = options.users.refusal(user, local)) return refuse(*why);
  const auto account = account_of(local);
  if (!account) return refuse("no local user '" + local + "' on cluster " + options.cluster);
  if (account->uid == 0) return refuse("the Faucets server may not run jobs as root");
  const auto it = m.find("submit");
  if (it == m.end() || !it->is_object()) return refuse("forward.submit is missing");
  protocol::message parsed;
  try {
    parsed = protocol::parse_message(*it);
  } catch (const std::exception& e) {
    return refuse(std::string("the job is not valid here: ") + e.what());
  }
  auto* sub = std::get_if<protocol::submit>(&parsed);
  if (sub == nullptr) return refuse("forward.submit is not a submit message");
  // The server's job, this forward of it (however often the message comes):
  // the store returns the job it already has for this token.
  sub->job.submit_token = faucets_token(options.cluster, fid, attempt);
  sub->id = fid;
  // Staged files: into the job's own directory, as its user; the job runs there.
  std::optional<std::filesystem::path> staged_dir;
  if (const auto f = m.find("files"); f != m.end()) {
    try {
      const auto files = protocol::parse_staged_files(*f, options.stage_max_bytes);
      staged_dir = stage_in(options.stage_root, fid, attempt, stage_owner{account->uid, account->gid}, files);
    } catch (const std::exception& e) {
      return refuse(std::string("staged files refused: ") + e.what());
    }
    sub->job.workdir = staged_dir->string();
  }
  auto self = shared_from_this();
  ask(as_user(*account, options.server), std::move(*sub), [self, fid, user, local, staged_dir,
                                                          owner = stage_owner{account->uid, account->gid}](
                                                             protocol::message r) {
    if (staged_dir && !std::holds_alternative<protocol::ok>(r)) remove_stage_dir(*staged_dir, owner);
    if (const auto* ok = std::get_if<protocol::ok>(&r)) {
      try {
        const auto reply = protocol::read_reply<protocol::submit_reply>(*ok);
        self->followed[reply.job_id] = fid;
        // A copy this forward made before the link broke may wait behind the gate.
        self->ctl.faucets().release(reply.job_id);
        logging::info("Faucets job {} of '{}' is job {} here, run as '{}'", fid, user, reply.job_id, local);
        self->send(json{{"type", "forwarded"}, {"fid", fid}, {"job_id", reply.job_id}});
        return;
      } catch (const std::exception& e) {
        self->send(json{{"type", "refused"}, {"fid", fid}, {"error", e.what()}});
        return;
      }
    }
    logging::warn("Faucets job {} of '{}' refused: {}", fid, user, message_text(r));
    self->send(json{{"type", "refused"}, {"fid", fid}, {"error", message_text(r)}});
  });
}

void faucets_uplink::state::send_update_from(std::int64_t fid, const protocol::job_info& j) {
  faucets::job_update u;
  u.fid = fid;
  u.job_id = j.id;
  u.state = std::string(core::to_string(j.state));
  u.nprocs = j.nprocs;
  u.exit_code = j.exit_code;
  u.start_time = j.start_time;
  u.end_time = j.end_time;
  if (j.start_time) started[j.id] = *j.start_time;
  send(faucets::to_json(u));
  if (core::is_final(j.state)) {
    followed.erase(j.id);
    started.erase(j.id);
    meters.erase(j.id);
  }
}

void faucets_uplink::state::on_follow(const json& m) {
  constexpr std::int64_t big = (std::int64_t{1} << 53) - 1;
  const auto it = m.find("jobs");
  if (it == m.end() || !it->is_array()) throw faucets::link_error("follow.jobs must be an array");
  std::map<std::int64_t, std::int64_t> asked;
  for (const auto& j : *it) {
    const std::int64_t fid = faucets::int_field(j, "fid", 1, big);
    const std::int64_t id = faucets::int_field(j, "job_id", 1, big);
    followed[id] = fid;
    asked[id] = fid;
  }
  // The server has cancelled what it sent elsewhere (before this): its own
  // may run; every other copy is reported and waits for its word.
  std::set<std::int64_t> theirs;
  for (const auto& [id, fid] : asked) theirs.insert(id);
  auto self = shared_from_this();
  ctl.faucets().follow(std::move(theirs), [self](std::vector<faucets_copy> copies) {
    asio::post(self->strand, [self, copies = std::move(copies)]() mutable { self->report_copies(std::move(copies)); });
  });
  if (asked.empty()) return;
  // In pages the store can answer; every asked job is answered, unknown ones as UNKNOWN.
  std::vector<std::int64_t> ids;
  for (const auto& [id, fid] : asked) ids.push_back(id);
  for (std::size_t from = 0; from < ids.size(); from += 1000) {
    protocol::list_jobs q;
    q.id = 1;
    q.all = true;
    q.job_ids.assign(ids.begin() + static_cast<std::ptrdiff_t>(from),
                     ids.begin() + static_cast<std::ptrdiff_t>(std::min(ids.size(), from + 1000)));
    ask(as_root(), q, [self, q, asked](protocol::message r) {
      std::set<std::int64_t> seen;
      if (const auto* ok = std::get_if<protocol::ok>(&r)) {
        try {
          // Through the wire form: the jobs of a list reply are raw members.
          const auto back = protocol::parse_message(protocol::encode_body(*ok));
          for (const auto& j : protocol::read_reply<protocol::list_jobs_reply>(std::get<protocol::ok>(back)).jobs) {
            seen.insert(j.id);
            self->send_update_from(asked.at(j.id), j);
          }
        } catch (const std::exception& e) {
          logging::warn("Faucets follow: cannot read the job list: {}", e.what());
          return;
        }
      }
      for (const std::int64_t id : q.job_ids) {
        if (seen.contains(id)) continue;
        faucets::job_update u;
        u.fid = asked.at(id);
        u.job_id = id;
        u.state = "UNKNOWN";
        self->send(faucets::to_json(u));
      }
    });
  }
}

void faucets_uplink::state::report_copies(std::vector<faucets_copy> copies) {
  for (const auto& c : copies) {
    const auto mark = parse_faucets_token(c.submit_token);
    if (!mark) continue;
    followed[c.job_id] = mark->fid;
    faucets::job_update u;
    u.fid = mark->fid;
    u.job_id = c.job_id;
    u.state = std::string(core::to_string(c.state));
    u.nprocs = c.nprocs;
    u.attempt = mark->attempt;
    if (const auto s = started.find(c.job_id); s != started.end()) u.start_time = s->second;
    logging::info("Faucets job {} here (the server's {}, forward {}) is not on the server's list: reported ({}{})",
                  c.job_id, mark->fid, mark->attempt, u.state, c.waiting ? ", waiting for its word" : "");
    send(faucets::to_json(u));
  }
  // The server may place jobs here now (it has heard of every copy).
  send(json{{"type", "synced"}});
}

void faucets_uplink::state::ask_start(std::int64_t id, const std::string& token, std::function<void(bool)> done) {
  const auto mark = parse_faucets_token(token);
  if (!mark || !up || !channel || channel->closed()) {
    done(false);
    return;
  }
  if (auto old = start_waits.find(id); old != start_waits.end()) {
    auto first = std::move(old->second.done);
    start_waits.erase(old);
    first(false);  // a second launch of the same job: the newer one asks
  }
  start_waits[id] = start_wait{std::move(done), std::chrono::steady_clock::now() + options.start_timeout};
  followed[id] = mark->fid;
  send(json{{"type", "start"}, {"fid", mark->fid}, {"job_id", id}});
}

void faucets_uplink::state::on_start_answer(const json& m, bool ok) {
  const std::int64_t id = faucets::int_field(m, "job_id", 1, (std::int64_t{1} << 53) - 1);
  const auto it = start_waits.find(id);
  if (it == start_waits.end()) return;
  auto done = std::move(it->second.done);
  start_waits.erase(it);
  if (!ok) logging::warn("Faucets server {}: job {} may not start here", options.server, id);
  done(ok);
}

void faucets_uplink::state::fail_start_waits() {
  auto waits = std::move(start_waits);
  start_waits.clear();
  for (auto& [id, w] : waits) w.done(false);
}

void faucets_uplink::state::on_release(const json& m) {
  constexpr std::int64_t big = (std::int64_t{1} << 53) - 1;
  const std::int64_t fid = faucets::int_field(m, "fid", 1, big);
  const std::int64_t id = faucets::int_field(m, "job_id", 1, big);
  followed[id] = fid;
  ctl.faucets().release(id);
}

void faucets_uplink::state::on_estimate(const json& m) {
  constexpr std::int64_t big = std::int64_t{1} << 40;
  const std::int64_t qid = faucets::int_field(m, "qid", 0, big);
  core::job_request r;
  r.min_pe = static_cast<std::size_t>(faucets::int_field(m, "min_pe", 1, big));
  r.max_pe = static_cast<std::size_t>(faucets::opt_int_field(m, "max_pe", 1, big).value_or(static_cast<std::int64_t>(r.min_pe)));
  r.max_pe = std::max(r.max_pe, r.min_pe);
  r.adaptive = m.value("adaptive", false);
  r.walltime = m.contains("walltime_s") ? faucets::number_field(m, "walltime_s", 1, 1e9) : 3600.0;
  const double walltime = r.walltime;
  auto self = shared_from_this();
  // The bid: the start estimate, when it would be done (the time limit at
  // this cluster's speed) and the price its load asks now.
  ctl.estimate_start(std::move(r), [self, qid, walltime](std::optional<double> s) {
    self->ctl.capacity([self, qid, walltime, s](capacity_summary c) {
      asio::post(self->strand, [self, qid, walltime, s, c] {
        json reply{{"type", "estimate_reply"}, {"qid", qid}, {"start_in_s", s ? json(*s) : json(nullptr)}};
        if (s) {
          reply["completion_in_s"] = *s + walltime / self->options.speed;
          reply["price"] = faucets_price(self->options.rate, c.procs_total, c.procs_free, c.pending_procs);
        }
        self->send(std::move(reply));
      });
    });
  });
}

namespace {

// The last `bytes` of the job's output file at `path`, read only when it is
// a regular file owned by the job's user (not through a symlink): what that
// user could read anyway, nothing of anyone else's. Invalid UTF-8 bytes
// become '?'. The reason when it cannot be read.
std::variant<json, std::string> output_tail(const std::string& path, uid_t owner, std::int64_t bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) {
      // Not written yet is an empty tail; no directory at all is a reason
      // (a staged job's directory went back to the server when it ended).
      std::error_code ec;
      const auto dir = std::filesystem::path(path).parent_path();
      if (!std::filesystem::is_directory(dir, ec)) return "no directory " + dir.string() + " here (any more)";
      return json{{"output", ""}, {"size", 0}, {"path", path}};
    }
    return "cannot open " + path + ": " + std::strerror(errno);
  }
  struct stat st {};
  std::string text;
  std::string why;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != owner) {
    why = path + " is not a regular file of the job's user";
  } else {
    const off_t from = st.st_size > bytes ? st.st_size - bytes : 0;
    text.resize(static_cast<std::size_t>(st.st_size - from));
    const ssize_t n = ::pread(fd, text.data(), text.size(), from);
    text.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
  }
  ::close(fd);
  if (!why.empty()) return why;
  std::string clean;
  clean.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t len = core::utf8_sequence_length(text, i);
    if (len == 0) {
      clean += '?';
      ++i;
    } else {
      clean.append(text, i, len);
      i += len;
    }
  }
  return json{{"output", clean}, {"size", st.st_size}, {"path", path}};
}

}  // namespace

void faucets_uplink::state::on_job_view(const json& m) {
  constexpr std::int64_t big = (std::int64_t{1} << 53) - 1;
  const std::int64_t qid = faucets::int_field(m, "qid", 0, big);
  const std::int64_t id = faucets::int_field(m, "job_id", 1, big);
  const std::string user = faucets::string_field(m, "user");
  const std::string local = faucets::string_field(m, "local_user");
  const std::string what = faucets::string_field(m, "what");
  auto refuse = [this, qid](const std::string& why) {
    send(json{{"type", "job_view_reply"}, {"qid", qid}, {"error", why}});
  };
  // Only what the server could do as this user anyway: the table must let it act as them.
  if (auto why = options.users.refusal(user, local)) return refuse(*why);
  const auto account = account_of(local);
  if (!account || account->uid == 0) return refuse("no local user '" + local + "' here");
  if (what != "values" && what != "output") return refuse("what must be \"values\" or \"output\"");
  const double since = what == "values" && m.contains("since") ? faucets::number_field(m, "since", 0, 1e11) : 0.0;
  std::string workdir, pattern, name;
  std::int64_t bytes = 4096;
  if (what == "output") {
    workdir = faucets::string_field(m, "workdir", protocol::k_max_path);
    pattern = faucets::string_field(m, "stdout", protocol::k_max_path);
    name = faucets::opt_string_field(m, "name", 1024).value_or("");
    bytes = faucets::int_field(m, "bytes", 1, 65536);
    if (workdir.empty() || workdir.front() != '/') return refuse("the job's working directory must be absolute");
    // A job that staged files ran in its forward's own directory (job_files.hpp).
    const std::int64_t fid = faucets::int_field(m, "fid", 1, big);
    const std::int64_t attempt = m.contains("attempt") ? faucets::int_field(m, "attempt", 0, big) : 0;
    std::error_code ec;
    if (attempt > 0 && !options.stage_root.empty()) {
      if (const auto d = stage_dir_of(options.stage_root, fid, attempt); std::filesystem::is_directory(d, ec)) {
        workdir = d.string();
      }
    }
  }
  protocol::list_jobs q;
  q.id = 1;
  q.all = true;
  q.job_ids = {id};
  auto self = shared_from_this();
  const uid_t uid = account->uid;
  ask(as_root(), q, [self, qid, id, local, uid, what, since, workdir, pattern, name, bytes](protocol::message r) {
    auto refuse = [&](const std::string& why) {
      self->send(json{{"type", "job_view_reply"}, {"qid", qid}, {"error", why}});
    };
    std::optional<protocol::job_info> job;
    if (const auto* ok = std::get_if<protocol::ok>(&r)) {
      try {
        const auto back = protocol::parse_message(protocol::encode_body(*ok));
        for (auto& j : protocol::read_reply<protocol::list_jobs_reply>(std::get<protocol::ok>(back)).jobs) {
          if (j.id == id) job = std::move(j);
        }
      } catch (const std::exception& e) {
        return refuse(std::string("cannot read the job: ") + e.what());
      }
    }
    // Another user's job is as absent as a missing one.
    if (!job || job->user != local) return refuse("no job " + std::to_string(id) + " of " + local + " here");
    json reply{{"type", "job_view_reply"}, {"qid", qid}};
    if (what == "values") {
      const auto v = self->ctl.telemetry().read(id, since);
      json series = json::object();
      if (v) {
        for (const auto& s : v->series) {
          json points = json::array();
          for (const auto& p : s.points) points.push_back(json::array({std::round(p.time * 1000.0) / 1000.0, p.value}));
          series[s.name] = {{"total", s.total}, {"points", std::move(points)}};
        }
      }
      reply["values"] = {{"job_id", id}, {"ended", v ? v->ended : false}, {"series", std::move(series)}};
    } else {
      std::string node = job->nodes.substr(0, job->nodes.find(':'));
      core::pattern_values pv;
      pv.job_id = id;
      pv.job_name = name;
      pv.user = local;
      pv.node = node;
      pv.array_job_id = id;
      const std::string file = core::expand_output_pattern(pattern, pv);
      const std::string path = file.starts_with("/") ? file : workdir + "/" + file;
      auto tail = output_tail(path, uid, bytes);
      if (const auto* why = std::get_if<std::string>(&tail)) return refuse(*why);
      for (auto& [k, v] : std::get<json>(tail).items()) reply[k] = v;
    }
    self->send(std::move(reply));
  });
}

void faucets_uplink::state::on_cancel(const json& m) {
  constexpr std::int64_t big = (std::int64_t{1} << 53) - 1;
  const std::int64_t fid = faucets::int_field(m, "fid", 1, big);
  const std::int64_t id = faucets::int_field(m, "job_id", 1, big);
  const std::string local = faucets::string_field(m, "local_user");
  const auto account = account_of(local);
  if (!account || account->uid == 0) {
    logging::warn("Faucets cancel of job {} as '{}' refused: no such user here", id, local);
    return;
  }
  followed[id] = fid;
  protocol::cancel c;
  c.id = 1;
  c.job_ids = {id};
  ask(as_user(*account, options.server), c, [id, server = options.server](protocol::message r) {
    if (std::holds_alternative<protocol::error>(r)) {
      logging::warn("Faucets server {}: cancelling job {}: {}", server, id, message_text(r));
    }
  });
}

void faucets_uplink::state::on_fetch(const json& m) {
  constexpr std::int64_t big = (std::int64_t{1} << 53) - 1;
  const std::int64_t fid = faucets::int_field(m, "fid", 1, big);
  const std::int64_t id = faucets::int_field(m, "job_id", 1, big);
  const std::int64_t attempt = faucets::opt_int_field(m, "attempt", 0, big).value_or(0);
  const std::string local = faucets::string_field(m, "local_user");
  auto fail = [&](const std::string& why) {
    logging::warn("Faucets job {} (job {} here): outputs not sent: {}", fid, id, why);
    send(json{{"type", "outputs"}, {"fid", fid}, {"job_id", id}, {"error", why}});
  };
  const auto account = account_of(local);
  if (!account || account->uid == 0) return fail("no local user '" + local + "' here");
  // The directory of the forward that made this copy: the one asked, else
  // the newest of this job's (a copy adopted from an earlier forward).
  std::filesystem::path dir = stage_dir_of(options.stage_root, fid, attempt);
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    std::int64_t best = -1;
    const std::string prefix = "f" + std::to_string(fid) + ".";
    for (auto it = std::filesystem::directory_iterator(options.stage_root, ec);
         !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
      const std::string n = it->path().filename().string();
      if (!n.starts_with(prefix)) continue;
      const std::string rest = n.substr(prefix.size());
      if (rest.empty() || rest.find_first_not_of("0123456789") != std::string::npos || rest.size() > 15) continue;
      if (const std::int64_t a = std::stoll(rest); a > best) {
        best = a;
        dir = it->path();
      }
    }
    if (best < 0) return fail("the job's directory is gone");
  }
  const stage_owner owner{account->uid, account->gid};
  std::vector<protocol::staged_file> files;
  try {
    files = collect_outputs(dir, owner, options.stage_max_bytes);
  } catch (const std::exception& e) {
    return fail(e.what());  // kept there: the admin or the user may take it
  }
  const auto bytes = protocol::staged_bytes(files);
  send(json{{"type", "outputs"}, {"fid", fid}, {"job_id", id}, {"files", protocol::to_json(files)}});
  if (auto why = remove_stage_dir(dir, owner); !why.empty()) logging::warn("Faucets job {}: cleaning up: {}", fid, why);
  logging::info("Faucets job {} (job {} here): {} output file(s), {} bytes sent; its directory removed", fid, id,
                files.size(), bytes);
}

void faucets_uplink::state::on_change(const job_change& ch) {
  const auto it = followed.find(ch.job_id);
  if (it == followed.end()) return;
  faucets::job_update u;
  u.fid = it->second;
  u.job_id = ch.job_id;
  u.state = std::string(core::to_string(ch.state));
  u.nprocs = static_cast<std::int64_t>(std::count(ch.procs.begin(), ch.procs.end(), '1'));
  u.exit_code = ch.exit_code;
  if (core::holds_processors(ch.state) && !started.contains(ch.job_id)) {
    started[ch.job_id] = iso_of(ch.time);
    meters[ch.job_id];  // seen from its start: metered
  }
  if (const auto m = meters.find(ch.job_id); m != meters.end()) {
    m->second.change(ch.time, core::is_final(ch.state) ? 0 : u.nprocs);
  }
  if (const auto s = started.find(ch.job_id); s != started.end()) u.start_time = s->second;
  if (core::is_final(ch.state)) {
    u.end_time = iso_of(ch.time);
    if (const auto m = meters.find(ch.job_id); m != meters.end()) u.proc_seconds = m->second.total(ch.time);
    followed.erase(it);
    started.erase(ch.job_id);
    meters.erase(ch.job_id);
  }
  send(faucets::to_json(u));
}

// ---- the handle -------------------------------------------------------

faucets_uplink::faucets_uplink(asio::io_context& io, controller& ctl, uplink_options options)
    : state_(std::make_shared<state>(io, ctl, std::move(options))) {
  auto& st = *state_;
  std::tie(st.host, st.port) = split_host_port(st.options.server);
  try {
    st.tls = faucets::client_tls(st.options.ca);
  } catch (const faucets::tls_error& e) {
    throw uplink_error(e.what());
  }
  ctl.on_change([weak = std::weak_ptr<state>(state_)](const job_change& ch) {
    if (auto s = weak.lock()) asio::post(s->strand, [s, ch] { s->on_change(ch); });
  });
  ctl.faucets().on_start([weak = std::weak_ptr<state>(state_)](std::int64_t id, const std::string& token,
                                                              std::function<void(bool)> done) {
    auto s = weak.lock();
    if (!s) return done(false);
    asio::post(s->strand, [s, id, token, done = std::move(done)]() mutable { s->ask_start(id, token, std::move(done)); });
  });
}

faucets_uplink::~faucets_uplink() { stop(); }

void faucets_uplink::start() { asio::co_spawn(state_->strand, state_->run(), asio::detached); }

void faucets_uplink::stop() {
  asio::post(state_->strand, [s = state_] {
    s->stopped = true;
    s->retry.cancel();
    if (s->channel) s->channel->close();
  });
}

bool faucets_uplink::connected() const noexcept { return state_->up; }

}  // namespace aqs::daemon
