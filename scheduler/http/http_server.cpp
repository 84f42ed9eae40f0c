// http_server: listener, sessions (plain and TLS) with Boost.Beast and C++20
// coroutines on a strand per connection, the bearer-token check on the
// request head, the limits (anonymous and per-user connection pools, bodies
// per route and in flight, deadlines), and the REST handlers as thin
// adapters over the controller's dispatcher.
#include "http/http_server.hpp"

#include <array>
#include <atomic>
#include <charconv>
#include <deque>
#include <limits>
#include <list>
#include <mutex>
#include <pwd.h>
#include <sys/ioctl.h>
#include <sstream>
#include <unordered_map>
#include <utility>  // before Boost.Asio: 1.74's awaitable.hpp uses std::exchange without it
#include <variant>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

#include "core/job_state.hpp"
#include "daemon/controller.hpp"
#include "daemon/reply_connection.hpp"
#include "http/openmetrics.hpp"
#include "http/rest.hpp"
#include "logging/log.hpp"
#include "protocol/json_limits.hpp"
#include "protocol/replies.hpp"

namespace aqs::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;
namespace ssl = asio::ssl;
using asio::awaitable;
using asio::use_awaitable;
using nlohmann::json;
using request_t = bhttp::request<bhttp::string_body>;
using response_t = bhttp::response<bhttp::string_body>;
using head_t = bhttp::request_header<>;  // a request's head: what is known before its body is read

namespace {

std::int64_t wall_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// One event stream's queue: filled on the controller's strand, drained by
// its session. Thread-safe.
struct sse_feed {
  std::int64_t values_of = 0;  // 0: job changes (/api/v1/events); else that job's published values
  std::mutex mu;
  std::deque<std::string> queued;
  std::size_t bytes = 0;
  bool overflowed = false;
  std::function<void()> wake;  // posts to the session's strand (under mu)
};

}  // namespace

// ---------------------------------------------------------------- state --

struct http_server::state {
  asio::io_context& io;
  http_options options;
  daemon::controller& ctl;
  std::unique_ptr<ssl::context> tls;
  std::unique_ptr<asio::ip::tcp::acceptor> acceptor;
  std::atomic<unsigned short> port{0};

  std::mutex mu;
  bool stopped = false;
  std::unordered_map<std::int64_t, std::size_t> per_user;  // requests under way by uid
  std::vector<std::weak_ptr<sse_feed>> feeds;
  std::uint64_t next_session = 1;

  // Connections (under mu), by session serial, with the pool each counts
  // against: anonymous until a request on it shows a valid token, then its
  // user's. Anonymous ones are queued oldest first: the first to go when
  // the anonymous pool (or that of their address) is full.
  enum class pool : unsigned char { anonymous, user, none };
  struct conn {
    std::string address;
    pool in = pool::none;
    std::int64_t uid = -1;
    std::list<std::uint64_t>::iterator queued;  // in `anonymous` while pool::anonymous
    std::function<void()> close;                // posts a close to the session's strand
    int fd = -1;  // its socket (open while the record exists: released before it is closed)
    std::chrono::steady_clock::time_point since{};  // joined the anonymous queue (its place in it)
  };
  std::unordered_map<std::uint64_t, conn> conns;
  std::list<std::uint64_t> anonymous;
  std::unordered_map<std::string, std::size_t> anonymous_by_address;
  std::unordered_map<std::int64_t, std::size_t> connections_by_user;
  // Bytes of request bodies reserved (being read or handled), in total and by uid.
  std::size_t body_bytes = 0;
  std::unordered_map<std::int64_t, std::size_t> body_bytes_by_user;
  std::uint64_t evictions = 0;

  void leave_pool_locked(conn& c) {
    if (c.in == pool::anonymous) {
      anonymous.erase(c.queued);
      auto it = anonymous_by_address.find(c.address);
      if (it != anonymous_by_address.end() && --it->second == 0) anonymous_by_address.erase(it);
    } else if (c.in == pool::user) {
      auto it = connections_by_user.find(c.uid);
      if (it != connections_by_user.end() && --it->second == 0) connections_by_user.erase(it);
    }
    c.in = pool::none;
  }
  void join_anonymous_locked(std::uint64_t serial, conn& c) {
    c.in = pool::anonymous;
    c.since = std::chrono::steady_clock::now();
    c.queued = anonymous.insert(anonymous.end(), serial);
    ++anonymous_by_address[c.address];
  }
  // Closes the oldest anonymous connection (from `address` if given) other
  // than `keep`; its closer goes to `victims` (called outside mu). Soft
  // (the anonymous pools): only connections older than k_eviction_grace go,
  // so that a newcomer always has time to send its head however fast one
  // address opens connections; none that old: nothing goes (false) and the
  // newcomer is let in over the soft cap. Hard (max_connections): the
  // oldest goes whatever its age. Either way a connection whose bytes wait
  // unread in the kernel (about to be served: a head) is passed over for
  // one that sent nothing or stalled, among the oldest few.
  static constexpr std::chrono::milliseconds k_eviction_grace{1000};
  bool evict_locked(std::uint64_t keep, const std::string* address, bool hard,
                    std::vector<std::function<void()>>& victims) {
    const auto young = std::chrono::steady_clock::now() - k_eviction_grace;
    conn* fallback = nullptr;
    conn* chosen = nullptr;
    int looked = 0;
    for (const std::uint64_t serial : anonymous) {
      if (serial == keep) continue;
      auto it = conns.find(serial);
      if (it == conns.end()) continue;
      if (!hard && it->second.since > young) break;  // oldest first: the rest are younger still
      if (address != nullptr && it->second.address != *address) continue;
      if (fallback == nullptr) fallback = &it->second;
      int pending = 0;
      if (it->second.fd < 0 || ::ioctl(it->second.fd, FIONREAD, &pending) != 0 || pending == 0) {
        chosen = &it->second;
        break;
      }
      if (++looked >= 16) break;
    }
    if (chosen == nullptr) chosen = fallback;
    if (chosen == nullptr) return false;
    leave_pool_locked(*chosen);
    if (chosen->close) victims.push_back(chosen->close);
    ++evictions;
    return true;
  }

  // A new connection from `address`: admitted into the anonymous pool,
  // making room by closing the oldest anonymous connections (of that
  // address first); refused (false) only when every connection belongs to
  // a user and there are max_connections of them.
  bool admit(std::uint64_t serial, const std::string& address, int fd, std::vector<std::function<void()>>& victims) {
    std::lock_guard lock(mu);
    if (stopped) return false;
    auto& c = conns[serial];
    c.address = address;
    c.fd = fd;
    join_anonymous_locked(serial, c);
    if (anonymous_by_address[address] > std::max<std::size_t>(options.max_connections_per_address, 1)) {
      evict_locked(serial, &address, false, victims);
    }
    if (anonymous.size() > std::max<std::size_t>(options.max_anonymous_connections, 1)) {
      evict_locked(serial, nullptr, false, victims);
    }
    // Evicted connections still count until their sessions end: only live
    // pool members count against the total.
    std::size_t live = anonymous.size();
    for (const auto& [uid, n] : connections_by_user) live += n;
    if (live > options.max_connections && !evict_locked(serial, nullptr, true, victims)) {
      leave_pool_locked(c);
      conns.erase(serial);
      return false;
    }
    return true;
  }

  // A request on connection `serial` showed `uid`'s valid token (or none:
  // nullopt). False: that user holds max_connections_per_user already.
  bool claim(std::uint64_t serial, std::optional<std::int64_t> uid) {
    std::lock_guard lock(mu);
    auto it = conns.find(serial);
    if (it == conns.end()) return true;
    conn& c = it->second;
    if (!uid) {
      // Still anonymous: to the back of the queue (an active client is not
      // the oldest).
      if (c.in == pool::anonymous) {
        anonymous.splice(anonymous.end(), anonymous, c.queued);
        c.since = std::chrono::steady_clock::now();
      }
      return true;
    }
    if (c.in == pool::user && c.uid == *uid) return true;
    if (connections_by_user[*uid] >= options.max_connections_per_user) {
      if (connections_by_user[*uid] == 0) connections_by_user.erase(*uid);
      return false;
    }
    leave_pool_locked(c);
    c.in = pool::user;
    c.uid = *uid;
    ++connections_by_user[*uid];
    return true;
  }

  void release(std::uint64_t serial) {
    std::lock_guard lock(mu);
    auto it = conns.find(serial);
    if (it == conns.end()) return;
    leave_pool_locked(it->second);
    conns.erase(it);
  }

  // Room for a body of `n` bytes of `uid`'s, or false (the answer is 503).
  bool reserve_body(std::int64_t uid, std::size_t n) {
    std::lock_guard lock(mu);
    std::size_t& mine = body_bytes_by_user[uid];
    if (body_bytes + n > options.max_body_bytes_in_flight || mine + n > options.max_body_bytes_per_user) {
      if (mine == 0) body_bytes_by_user.erase(uid);
      return false;
    }
    body_bytes += n;
    mine += n;
    return true;
  }
  void release_body(std::int64_t uid, std::size_t n) {
    std::lock_guard lock(mu);
    body_bytes -= std::min(body_bytes, n);
    auto it = body_bytes_by_user.find(uid);
    if (it != body_bytes_by_user.end()) {
      it->second -= std::min(it->second, n);
      if (it->second == 0) body_bytes_by_user.erase(it);
    }
  }

  // Utilisation over time: samples (under mu), taken by the sampler
  // coroutine on its strand; a job change wakes it (at most one a second).
  std::deque<utilization_sample> samples;
  asio::strand<asio::io_context::executor_type> sampler_strand;
  asio::steady_timer sampler_wait, sampler_limit;
  std::atomic<bool> changed{false};

  state(asio::io_context& i, http_options o, daemon::controller& c)
      : io(i), options(std::move(o)), ctl(c), sampler_strand(asio::make_strand(i)), sampler_wait(sampler_strand),
        sampler_limit(sampler_strand) {}

  void record(const daemon::cluster_snapshot& snap) {
    std::lock_guard lock(mu);
    samples.push_back(sample_of(snap));
    while (samples.size() > std::max<std::size_t>(options.utilization_samples, 1)) samples.pop_front();
  }

  // On a publishing job's session: its new points to the streams of its values.
  std::atomic<std::size_t> value_feeds{0};
  void publish_values(std::int64_t job, const std::vector<std::pair<std::string, daemon::value_point>>& kept) {
    if (value_feeds.load(std::memory_order_relaxed) == 0) return;
    std::string text;
    std::vector<std::shared_ptr<sse_feed>> live;
    {
      std::lock_guard lock(mu);
      for (const auto& w : feeds) {
        if (auto f = w.lock(); f && f->values_of == job) live.push_back(std::move(f));
      }
    }
    if (live.empty()) return;
    text = "event: values\ndata: " + values_event_json(job, kept) + "\n\n";
    deliver(live, text);
  }

  void deliver(const std::vector<std::shared_ptr<sse_feed>>& live, const std::string& text) {
    for (const auto& f : live) {
      std::function<void()> wake;
      {
        std::lock_guard lock(f->mu);
        if (f->overflowed) continue;
        f->bytes += text.size();
        if (f->bytes > options.max_stream_backlog) {
          f->overflowed = true;  // a client that does not read is dropped
          f->queued.clear();
        } else {
          f->queued.push_back(text);
        }
        wake = f->wake;
      }
      if (wake) wake();
    }
  }

  // On the controller's strand: one event to every stream.
  void publish(const daemon::job_change& ch) {
    if (!changed.exchange(true)) {
      asio::post(sampler_strand, [this] { sampler_wait.cancel(); });
    }
    const std::string text = "event: job\ndata: " + change_json(ch) + "\n\n";
    std::vector<std::shared_ptr<sse_feed>> live;
    {
      std::lock_guard lock(mu);
      for (auto it = feeds.begin(); it != feeds.end();) {
        if (auto f = it->lock()) {
          if (f->values_of == 0) live.push_back(std::move(f));
          ++it;
        } else {
          it = feeds.erase(it);
        }
      }
    }
    deliver(live, text);
  }
};

namespace {

using state_ptr = std::shared_ptr<http_server::state>;

// Who is asking: a verified token's user, or nobody.
struct identity {
  std::optional<daemon::token_claims> claims;
  daemon::peer_info peer;
};

response_t make_response(unsigned status, std::string body, std::string_view type = "application/json") {
  response_t res{static_cast<bhttp::status>(status), 11};
  res.set(bhttp::field::server, "aqsd");
  res.set(bhttp::field::content_type, beast::string_view(type.data(), type.size()));
  res.set(bhttp::field::cache_control, "no-store");
  res.set("X-Content-Type-Options", "nosniff");
  res.body() = std::move(body);
  res.prepare_payload();
  return res;
}

response_t error_response(unsigned status, std::string_view message) {
  response_t res = make_response(status, error_body(message));
  if (status == 401) res.set(bhttp::field::www_authenticate, "Bearer realm=\"aqsd\"");
  return res;
}

response_t from_protocol_error(const protocol::error& e) { return error_response(status_of(e.code), e.message); }

// What a request needs once parsed and authorized: an answer now, a
// request to the controller and how to turn its reply into the answer, a
// snapshot of the scheduling state, or an event stream.
struct ask_controller {
  protocol::message request;
  std::function<response_t(const protocol::ok&)> finish;
};
struct ask_snapshot {
  std::function<response_t(const daemon::cluster_snapshot&)> finish;
};
// An event stream: job changes (values_of 0), or a job's published values
// once `check` (may the caller see that job?) answered 200.
struct open_stream {
  std::int64_t values_of = 0;
  std::optional<ask_controller> check;
};
using plan = std::variant<response_t, ask_controller, ask_snapshot, open_stream>;

std::optional<std::string> bearer_of(const head_t& req) {
  const auto it = req.find(bhttp::field::authorization);
  if (it == req.end()) return std::nullopt;
  const std::string_view v(it->value().data(), it->value().size());
  if (v.size() < 7 || !beast::iequals(beast::string_view(v.data(), 7), "Bearer ")) return std::string();
  std::string_view t = v.substr(7);
  while (!t.empty() && t.front() == ' ') t.remove_prefix(1);
  while (!t.empty() && t.back() == ' ') t.remove_suffix(1);
  return std::string(t);
}

// The job list's JSON from a list_jobs ok: {"more":..,"jobs":[...]}.
std::string jobs_page(const protocol::ok& ok) {
  if (ok.raw_members.empty()) return ok.result.dump() + "\n";
  const bool more = ok.result.value("more", false);
  return std::string("{\"more\":") + (more ? "true" : "false") + "," + ok.raw_members + "}\n";
}

json jobs_of(const protocol::ok& ok) {
  if (ok.raw_members.empty()) return ok.result.value("jobs", json::array());
  return json::parse("{" + ok.raw_members + "}").at("jobs");
}

std::optional<std::int64_t> integer_param(const std::string& name, const std::string& v, std::int64_t lo,
                                          std::int64_t hi) {
  std::int64_t n = 0;
  const auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (v.empty() || ec != std::errc{} || p != v.data() + v.size() || n < lo || n > hi) {
    throw protocol::protocol_error(protocol::error_code::bad_request,
                                   "parameter '" + name + "' must be an integer in " + std::to_string(lo) + ".." +
                                       std::to_string(hi));
  }
  return n;
}

// ---- the handlers: parse, build the protocol request, format the reply ----

class api {
public:
  explicit api(const state_ptr& st) : st_(st) {}

  // On the head alone, before any body byte is read: the route, and who is
  // asking (a bad or missing token is refused here). A response is the
  // refusal to send; never throws.
  std::variant<response_t, route_match> authorize(const head_t& req, identity& who, const std::string& remote) noexcept {
    try {
      return authorize_or_throw(req, who, remote);
    } catch (const protocol::protocol_error& e) {
      return error_response(status_of(e.code()), e.what());
    } catch (const std::exception& e) {
      return error_response(500, e.what());
    }
  }

  // The authorized request with its body: what to do. Never throws.
  plan prepare(const route_match& m, const request_t& req, const identity& who) noexcept {
    try {
      const std::string_view target(req.target().data(), req.target().size());
      const auto q = target.find('?');
      const std::string_view query = q == std::string_view::npos ? std::string_view{} : target.substr(q + 1);
      return dispatch(*m.r, m.id, m.name, req, query, who);
    } catch (const protocol::protocol_error& e) {
      return error_response(status_of(e.code()), e.what());
    } catch (const std::exception& e) {
      return error_response(500, e.what());
    }
  }

  // Finishing a controller reply; never throws.
  static response_t finish(const ask_controller& a, const protocol::message& reply) noexcept {
    try {
      if (const auto* e = std::get_if<protocol::error>(&reply)) return from_protocol_error(*e);
      return a.finish(std::get<protocol::ok>(reply));
    } catch (const std::exception& e) {
      return error_response(500, std::string("cannot format the reply: ") + e.what());
    }
  }
  static response_t finish(const ask_snapshot& a, const daemon::cluster_snapshot& s) noexcept {
    try {
      return a.finish(s);
    } catch (const std::exception& e) {
      return error_response(500, std::string("cannot format the reply: ") + e.what());
    }
  }

private:
  std::variant<response_t, route_match> authorize_or_throw(const head_t& req, identity& who, const std::string& remote) {
    const std::string_view target(req.target().data(), req.target().size());
    const auto q = target.find('?');
    const std::string_view path = target.substr(0, q);
    const std::string_view method(req.method_string().data(), req.method_string().size());
    const route_match m = match_route(method, path);
    if (!m.path_known) return error_response(404, "no such resource: " + std::string(path));
    if (m.r == nullptr) {
      response_t res = error_response(405, std::string(method) + " is not allowed here (allowed: " + m.allow + ")");
      res.set(bhttp::field::allow, m.allow);
      return res;
    }
    // Who is asking. A token that is present but bad is refused whatever
    // the route: the client believes it is someone.
    who.peer.via = daemon::transport::http;
    who.peer.role = protocol::peer_role::client;
    who.peer.remote = "http:" + remote;
    if (const auto token = bearer_of(req)) {
      auto verdict = st_->ctl.tokens().verify(*token, wall_us());
      if (auto* why = std::get_if<std::string>(&verdict)) return error_response(401, *why);
      auto& c = std::get<daemon::token_claims>(verdict);
      // The user must still exist under that name (a deleted account's
      // token, or a uid given to someone else, acts as nobody).
      passwd pw{};
      passwd* found = nullptr;
      std::vector<char> buf(16384);
      if (::getpwuid_r(static_cast<uid_t>(c.uid), &pw, buf.data(), buf.size(), &found) != 0 || found == nullptr ||
          c.user != found->pw_name) {
        return error_response(401, "the token's user " + c.user + " no longer exists");
      }
      who.peer.uid = static_cast<uid_t>(c.uid);
      who.peer.gid = found->pw_gid;
      who.peer.remote += " token=" + c.id;
      who.claims = std::move(c);
    } else if (m.r->who == access::token || (m.r->who == access::public_read && !st_->options.public_read)) {
      return error_response(401, "this needs a bearer token (get one with ftoken)");
    }
    return m;
  }

  plan dispatch(const route& r, std::optional<std::int64_t> id, const std::string& name, const request_t& req,
                std::string_view query, const identity& who) {
    // Each declared route's handler (rest.cpp routes()); no default: a
    // route kind without a handler does not compile.
    switch (r.kind) {
      case route_kind::openapi:
        return make_response(200, std::string(openapi_document()));
      case route_kind::dashboard: {
        // The page holds no data (it fetches the API with the user's token):
        // anyone may load it. It loads nothing from elsewhere.
        response_t res = make_response(200, std::string(dashboard_document()), "text/html; charset=utf-8");
        res.set("Content-Security-Policy",
                "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
                "connect-src 'self'; frame-ancestors 'none'");
        return res;
      }
      case route_kind::whoami: {
        const auto& c = *who.claims;
        return make_response(
            200, json{{"user", c.user}, {"uid", c.uid}, {"token_id", c.id}, {"expires_at", c.expires_at}}.dump() + "\n");
      }
      case route_kind::login: {
        // The code comes in a header: it is never part of a URL, and a
        // request without a token takes no body.
        const auto h = req.find("X-AQS-Login-Code");
        const std::string code = h == req.end() ? std::string() : std::string(h->value().data(), h->value().size());
        if (code.empty()) return error_response(400, "no login code (header X-AQS-Login-Code; ftoken --login prints one)");
        const auto t = code.size() == 32 ? st_->ctl.logins().redeem_login(code) : std::nullopt;
        if (!t) {
          return error_response(401, "that login code is not valid (used already, expired after " +
                                         std::to_string(protocol::k_login_code_lifespan_s) +
                                         " s, or never issued): run ftoken --login again");
        }
        return make_response(200, json{{"token", t->token},
                                       {"token_id", t->token_id},
                                       {"user", t->user},
                                       {"uid", t->uid},
                                       {"expires_at", t->expires_at}}
                                          .dump() +
                                      "\n");
      }
      case route_kind::events:
        return open_stream{};
      case route_kind::metrics: {
        // The format the scraper asks for (Accept), as the Prometheus client
        // libraries negotiate it: OpenMetrics only when asked for.
        const auto accept = req.find(bhttp::field::accept);
        const metrics_format f = negotiate_metrics_format(
            accept == req.end() ? std::string_view{} : std::string_view(accept->value().data(), accept->value().size()));
        return ask_snapshot{[st = st_, f](const daemon::cluster_snapshot& s) {
          response_t res = make_response(200, render_metrics(s, st->ctl.stats().read(), f), content_type_of(f));
          res.set(bhttp::field::vary, "Accept");
          return res;
        }};
      }
      case route_kind::cluster_map:
        return ask_snapshot{[](const daemon::cluster_snapshot& s) { return make_response(200, cluster_map_json(s)); }};
      case route_kind::utilization:
        return utilization(query);
      case route_kind::usage: {
        // As fusage: root sees every user's rows, a user their own.
        protocol::accounts a;
        a.id = 1;
        a.action = "usage";
        for (const auto& [k, v] : parse_query(query)) {
          if (k == "since") {
            a.from_s = *integer_param("since", v, 0, std::int64_t{1} << 40);
          } else if (k == "until") {
            a.to_s = *integer_param("until", v, 0, std::int64_t{1} << 40);
          } else {
            throw protocol::protocol_error(protocol::error_code::bad_request, "unknown parameter '" + k + "' (since, until)");
          }
        }
        if (a.from_s && a.to_s && *a.to_s < *a.from_s) {
          throw protocol::protocol_error(protocol::error_code::bad_request, "until must not be before since");
        }
        return ask_controller{a, ok_result};
      }
      case route_kind::accounts: {
        protocol::accounts a;
        a.id = 1;
        a.action = "show";
        return ask_controller{a, ok_result};
      }
      case route_kind::nodes:
        return ask_controller{protocol::list_nodes{1}, ok_result};
      case route_kind::partitions:
        return partitions(std::nullopt);
      case route_kind::partition:
        return partitions(name);
      case route_kind::list_jobs:
        return list_jobs(query);
      case route_kind::submit:
        return submit(req);
      case route_kind::show_job: {
        protocol::list_jobs l;
        l.id = 1;
        l.all = true;
        l.job_ids = {*id};
        l.usage = true;  // account, allocated CPU time and (owner, root) what was measured: issue 32
        // Its published values (the newest of each name) for its owner and root.
        std::optional<daemon::token_claims> claims = who.claims;
        return ask_controller{l, [job = *id, claims, st = st_](const protocol::ok& ok) {
                                json jobs = jobs_of(ok);
                                if (jobs.empty()) return error_response(404, "no job " + std::to_string(job));
                                json j = jobs.at(0);
                                if (claims && (claims->uid == 0 || j.value("user", std::string()) == claims->user)) {
                                  const auto v = st->ctl.telemetry().latest(job);
                                  j["values"] = v ? latest_values_json(*v) : json::object();
                                }
                                return make_response(200, j.dump() + "\n");
                              }};
      }
      case route_kind::cancel_job: {
        protocol::cancel c;
        c.id = 1;
        c.job_ids = {*id};
        return ask_controller{c, ok_result};
      }
      case route_kind::update_job: {
        const json body = protocol::parse_json_bounded(req.body());
        return ask_controller{protocol::parse_message(update_from_rest(body, *id)), ok_result};
      }
      case route_kind::control_job: {
        // hold, release, suspend, resume, requeue: fctl's actions.
        protocol::control c;
        c.id = 1;
        c.action = std::string(r.action);
        c.job_ids = {*id};
        return ask_controller{c, ok_result};
      }
      case route_kind::job_values: {
        double since = 0;
        for (const auto& [k, v] : parse_query(query)) {
          if (k != "since") {
            throw protocol::protocol_error(protocol::error_code::bad_request, "unknown parameter '" + k + "' (since)");
          }
          since = static_cast<double>(*integer_param("since", v, 0, std::int64_t{1} << 40));
        }
        return values_access(*id, *who.claims, [st = st_, job = *id, since] {
          const auto v = st->ctl.telemetry().read(job, since);
          daemon::job_values none;
          none.job_id = job;
          return make_response(200, values_json(v ? *v : none, st->ctl.telemetry().limits()).dump() + "\n");
        });
      }
      case route_kind::job_values_events:
        return open_stream{*id, values_access(*id, *who.claims, [] { return make_response(200, "{}"); })};
      case route_kind::job_history:
        return ask_controller{protocol::job_history{1, *id}, [](const protocol::ok& ok) {
                                return make_response(200, history_json(ok.result).dump() + "\n");
                              }};
    }
    return error_response(500, "a route without a handler");
  }

  // A job's published values are its owner's and root's to read: the job
  // is looked up (404 if none), its user compared with the token's, and
  // `answer` gives the body.
  static ask_controller values_access(std::int64_t job, const daemon::token_claims& who,
                                      std::function<response_t()> answer) {
    protocol::list_jobs l;
    l.id = 1;
    l.all = true;
    l.job_ids = {job};
    return ask_controller{l, [job, who, answer = std::move(answer)](const protocol::ok& ok) {
                            json jobs = jobs_of(ok);
                            if (jobs.empty()) return error_response(404, "no job " + std::to_string(job));
                            if (who.uid != 0 && jobs.at(0).value("user", std::string()) != who.user) {
                              return error_response(403, "job " + std::to_string(job) +
                                                             " belongs to another user: only its owner and root see its values");
                            }
                            return answer();
                          }};
  }

  // The controller's result as the body, as it is.
  static response_t ok_result(const protocol::ok& ok) { return make_response(200, ok.result.dump() + "\n"); }

  plan utilization(std::string_view query) {
    double since = 0;
    for (const auto& [k, v] : parse_query(query)) {
      if (k != "since") {
        throw protocol::protocol_error(protocol::error_code::bad_request, "unknown parameter '" + k + "' (since)");
      }
      since = static_cast<double>(*integer_param("since", v, 0, std::int64_t{1} << 40));
    }
    std::vector<utilization_sample> copy;
    {
      std::lock_guard lock(st_->mu);
      copy.assign(st_->samples.begin(), st_->samples.end());
    }
    const double interval = static_cast<double>(st_->options.utilization_interval.count()) / 1000.0;
    return make_response(200, utilization_json(copy, since, interval));
  }

  static plan partitions(std::optional<std::string> only) {
    return ask_controller{protocol::list_nodes{1}, [only = std::move(only)](const protocol::ok& ok) {
                            try {
                              const auto nodes = protocol::read_reply<protocol::list_nodes_reply>(ok);
                              return make_response(200, partitions_json(nodes, only).dump() + "\n");
                            } catch (const protocol::protocol_error& e) {
                              if (e.code() == protocol::error_code::not_found) return error_response(404, e.what());
                              throw;
                            }
                          }};
  }

  plan list_jobs(std::string_view query) {
    json l = {{"type", "list_jobs"}, {"id", 1}};
    json states = json::array();
    std::int64_t limit = 1000;
    for (const auto& [k, v] : parse_query(query)) {
      if (k == "state") {
        std::string_view rest = v;
        while (!rest.empty()) {
          const auto comma = rest.find(',');
          std::string one(rest.substr(0, comma));
          for (char& ch : one) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
          if (!one.empty()) states.push_back(one);
          rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
        }
      } else if (k == "user") {
        l["user"] = v;
      } else if (k == "limit") {
        limit = *integer_param(k, v, 1, protocol::k_max_list);
      } else if (k == "after") {
        l["after_id"] = *integer_param(k, v, 0, protocol::k_max_job_id);
      } else if (k == "all") {
        if (v != "true" && v != "false" && v != "1" && v != "0") {
          throw protocol::protocol_error(protocol::error_code::bad_request, "parameter 'all' must be true or false");
        }
        l["all"] = v == "true" || v == "1";
      } else {
        throw protocol::protocol_error(protocol::error_code::bad_request,
                                       "unknown parameter '" + k + "' (state, user, limit, after, all)");
      }
    }
    l["limit"] = limit;
    if (!states.empty()) {
      l["states"] = states;
      if (!l.contains("all")) l["all"] = true;  // a final state asked for by name is shown
    }
    return ask_controller{protocol::parse_message(l),
                          [](const protocol::ok& ok) { return make_response(200, jobs_page(ok)); }};
  }

  plan submit(const request_t& req) {
    const auto ct = req.find(bhttp::field::content_type);
    if (ct != req.end() && ct->value().find("json") == beast::string_view::npos) {
      return error_response(415, "the body must be JSON (Content-Type: application/json)");
    }
    const json body = protocol::parse_json_bounded(req.body());
    json msg = {{"type", "submit"}, {"id", 1}, {"job", job_from_rest(body)}};
    return ask_controller{protocol::parse_message(msg), [](const protocol::ok& ok) {
                            const std::int64_t id = ok.result.at("job_id").get<std::int64_t>();
                            response_t res = make_response(201, json{{"job_id", id}}.dump() + "\n");
                            res.set(bhttp::field::location, path_of(route_of(route_kind::show_job), id));
                            return res;
                          }};
  }

  state_ptr st_;
};

// ---------------------------------------------------------------- session --

template <class Stream>
class session : public std::enable_shared_from_this<session<Stream>> {
public:
  // `address`: the client's IP (what per-address limits count); `remote`:
  // with its port (logs, peer_info).
  session(Stream stream, state_ptr st, std::string address, std::string remote, std::uint64_t serial)
      : stream_(std::move(stream)),
        timer_(stream_.get_executor()),
        st_(std::move(st)),
        address_(std::move(address)),
        remote_(std::move(remote)),
        serial_(serial) {}

  void start() {
    auto self = this->shared_from_this();
    {
      std::lock_guard lock(st_->mu);
      auto it = st_->conns.find(serial_);
      if (it != st_->conns.end()) {
        it->second.close = [weak = std::weak_ptr<session>(self)] {
          if (auto s = weak.lock()) s->close_from_outside();
        };
      }
    }
    asio::co_spawn(stream_.get_executor(), [self] { return self->run(); }, asio::detached);
  }

  void close_from_outside() {
    asio::post(stream_.get_executor(), [self = this->shared_from_this()] {
      self->stopping_ = true;
      self->timer_.cancel();
      beast::error_code ec;
      beast::get_lowest_layer(self->stream_).socket().shutdown(asio::socket_base::shutdown_both, ec);
      beast::get_lowest_layer(self->stream_).close();
    });
  }

private:
  static constexpr bool k_tls = !std::is_same_v<Stream, beast::tcp_stream>;

  auto& lowest() { return beast::get_lowest_layer(stream_); }

  // Reserved body bytes, given back when the request is done.
  struct body_reservation {
    state_ptr st;
    std::int64_t uid = -1;
    std::size_t bytes = 0;
    void release() {
      if (bytes > 0) st->release_body(uid, bytes);
      bytes = 0;
    }
    ~body_reservation() { release(); }
  };

  // GCC 12 miscompiles some try blocks in coroutines: everything that may
  // throw runs in plain member functions that catch for themselves.
  awaitable<void> run() {
    beast::error_code ec;
    if constexpr (k_tls) {
      lowest().expires_after(st_->options.handshake_timeout);
      co_await stream_.async_handshake(ssl::stream_base::server, asio::redirect_error(use_awaitable, ec));
      if (ec) {
        finish();
        co_return;
      }
    }
    // Bounded: a head (max_header) and what a read may bring past it.
    beast::flat_buffer buffer(st_->options.max_header + (std::size_t{8} << 10));
    bool first = true;
    while (!stopping_) {
      if (!first && buffer.size() == 0) {
        // Keep-alive: the next request may take its time to begin.
        lowest().expires_after(st_->options.keepalive_timeout);
        const std::size_t n = co_await stream_.async_read_some(buffer.prepare(4096), asio::redirect_error(use_awaitable, ec));
        if (ec) break;
        buffer.commit(n);
      }
      first = false;
      // The head: complete within head_timeout of its first byte (of the
      // connection, for the first request).
      bhttp::request_parser<bhttp::empty_body> head;
      head.header_limit(static_cast<std::uint32_t>(st_->options.max_header));
      head.body_limit(std::numeric_limits<std::uint64_t>::max());  // judged below, per route and user
      lowest().expires_after(st_->options.head_timeout);
      co_await bhttp::async_read_header(stream_, buffer, head, asio::redirect_error(use_awaitable, ec));
      if (ec) {
        bool answered = true;
        if (ec == bhttp::error::header_limit || ec == bhttp::error::buffer_overflow) {
          co_await write(error_response(431, "the header is larger than " + std::to_string(st_->options.max_header) +
                                                 " bytes"), false);
        } else if (ec.category() == bhttp::make_error_code(bhttp::error::bad_target).category() &&
                   ec != bhttp::error::end_of_stream && ec != bhttp::error::partial_message) {
          co_await write(error_response(400, "malformed HTTP request: " + ec.message()), false);
        } else {
          answered = false;
        }
        if (answered) co_await linger();
        break;
      }
      lowest().expires_never();
      const bool has_body = head.chunked() || head.content_length().value_or(0) > 0;
      identity who;
      auto verdict = api(st_).authorize(head.get(), who, remote_);
      std::optional<response_t> refusal;
      const route_match* m = std::get_if<route_match>(&verdict);
      if (m == nullptr) {
        refusal = std::move(std::get<response_t>(verdict));
      } else if (!st_->claim(serial_, who.claims ? std::optional<std::int64_t>(who.claims->uid) : std::nullopt)) {
        refusal = error_response(429, "too many connections for " + who.claims->user + " (limit " +
                                          std::to_string(st_->options.max_connections_per_user) + ")");
      }
      // The body: none without a token; a small one except for a submission.
      const std::size_t limit = !who.claims ? 0
                                : (m != nullptr && m->r->body == body_size::job) ? st_->options.max_submit_body
                                    : st_->options.max_body;
      body_reservation reserved{st_};
      if (!refusal && has_body) {
        const std::size_t wants = head.content_length() ? static_cast<std::size_t>(std::min<std::uint64_t>(
                                                               *head.content_length(), std::uint64_t{limit} + 1))
                                                         : limit;
        if (limit == 0 || wants > limit) {
          refusal = error_response(413, limit == 0 ? std::string("a request without a token takes no body")
                                                   : "the body is larger than " + std::to_string(limit) + " bytes");
        } else if (!st_->reserve_body(who.claims->uid, wants)) {
          refusal = error_response(503, "aqsd is holding as many request bodies as it may: retry shortly");
          refusal->set(bhttp::field::retry_after, "1");
        } else {
          reserved.uid = who.claims->uid;
          reserved.bytes = wants;
        }
      }
      if (refusal) {
        // The body (if any) stays unread: answer and close.
        const bool keep = !has_body && head.get().keep_alive();
        if (!co_await write(std::move(*refusal), keep) || !keep) {
          if (has_body) co_await linger();
          break;
        }
        continue;
      }
      request_t req;
      if (has_body) {
        if (const auto expect = head.get().find(bhttp::field::expect);
            expect != head.get().end() && beast::iequals(expect->value(), "100-continue")) {
          static constexpr std::string_view k_continue = "HTTP/1.1 100 Continue\r\n\r\n";
          lowest().expires_after(st_->options.write_timeout);
          co_await asio::async_write(stream_, asio::buffer(k_continue), asio::redirect_error(use_awaitable, ec));
          if (ec) break;
        }
        bhttp::request_parser<bhttp::string_body> parser(std::move(head));
        parser.body_limit(limit);
        lowest().expires_after(st_->options.body_timeout);
        co_await bhttp::async_read(stream_, buffer, parser, asio::redirect_error(use_awaitable, ec));
        if (ec) {
          if (ec == bhttp::error::body_limit) {
            co_await write(error_response(413, "the body is larger than " + std::to_string(limit) + " bytes"), false);
            co_await linger();
          }
          break;
        }
        req = parser.release();
      } else {
        bhttp::request_parser<bhttp::string_body> parser(std::move(head));
        req = parser.release();
      }
      lowest().expires_never();
      const bool keep = req.keep_alive();
      plan p = api(st_).prepare(*m, req, who);
      req = {};  // the body is no longer needed
      // Per-user limit: requests under way, streams included.
      std::optional<std::int64_t> slot;
      if (!std::holds_alternative<response_t>(p) && who.claims) {
        if (!take_slot(who.claims->uid)) {
          p = error_response(429, "too many requests under way for " + who.claims->user + " (limit " +
                                      std::to_string(st_->options.max_requests_per_user) + ")");
        } else {
          slot = who.claims->uid;
        }
      }
      response_t res;
      bool streamed = false;
      if (auto* r = std::get_if<response_t>(&p)) {
        res = std::move(*r);
      } else if (auto* a = std::get_if<ask_controller>(&p)) {
        res = co_await ask(*a, who.peer);
      } else if (auto* s = std::get_if<ask_snapshot>(&p)) {
        res = co_await snapshot(*s);
      } else {
        auto& o = std::get<open_stream>(p);
        if (o.check) res = co_await ask(*o.check, who.peer);
        if (!o.check || res.result_int() == 200) {
          co_await stream_events(o.values_of);
          streamed = true;
        }
      }
      reserved.release();
      if (slot) give_slot(*slot);
      if (streamed) break;
      res.keep_alive(keep);
      if (!co_await write(std::move(res), keep) || !keep) break;
    }
    if constexpr (k_tls) {
      if (!stopping_) {
        lowest().expires_after(std::chrono::seconds(2));
        co_await stream_.async_shutdown(asio::redirect_error(use_awaitable, ec));
      }
    }
    finish();
  }

  // After refusing a request whose body is still coming: stop sending,
  // give the client a moment to read the answer (closing at once with
  // unread bytes resets the connection, and the client could lose it), and
  // drop at most k_linger_bytes of what it sends meanwhile: the body is
  // not read.
  awaitable<void> linger() {
    if constexpr (!k_tls) {
      static constexpr std::size_t k_linger_bytes = std::size_t{256} << 10;
      beast::error_code ec;
      lowest().socket().shutdown(asio::socket_base::shutdown_send, ec);
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
      std::array<char, 4096> sink{};
      std::size_t total = 0;
      while (!ec && total < k_linger_bytes && std::chrono::steady_clock::now() < until) {
        lowest().expires_at(until);
        total += co_await lowest().async_read_some(asio::buffer(sink), asio::redirect_error(use_awaitable, ec));
      }
      if (!ec && total >= k_linger_bytes) {
        // Still sending: wait (reading nothing) for it to see the answer and go.
        timer_.expires_at(until);
        co_await timer_.async_wait(asio::redirect_error(use_awaitable, ec));
      }
    }
    co_return;
  }

  awaitable<bool> write(response_t res, bool keep) {
    res.keep_alive(keep);
    beast::error_code ec;
    lowest().expires_after(st_->options.write_timeout);
    co_await bhttp::async_write(stream_, res, asio::redirect_error(use_awaitable, ec));
    co_return !ec;
  }

  // The controller answers on its own threads; the answer is handed over
  // under a mutex and the session woken by cancelling its timer on its strand.
  struct waiter {
    std::mutex mu;
    std::optional<protocol::message> reply;
    std::optional<daemon::cluster_snapshot> snap;
    // What aqsd answered, stored from its thread into `slot`.
    template <class T>
    void put(std::optional<T> waiter::*slot, T v) {
      std::lock_guard lock(mu);
      this->*slot = std::move(v);
    }
    // The answer in `slot`, taken on the strand; nullopt if none came.
    template <class T>
    std::optional<T> take(std::optional<T> waiter::*slot) {
      std::lock_guard lock(mu);
      return std::move(this->*slot);
    }
  };

  std::function<void()> waker() {
    return [self = this->shared_from_this()] {
      asio::post(self->stream_.get_executor(), [self] { self->timer_.cancel(); });
    };
  }

  awaitable<response_t> ask(const ask_controller& a, const daemon::peer_info& peer) {
    auto w = std::make_shared<waiter>();
    auto wake = waker();
    timer_.expires_after(st_->options.handler_timeout);
    auto conn = std::make_shared<daemon::reply_connection>(peer, [w, wake](protocol::message m) {
      w->put(&waiter::reply, std::move(m));
      wake();
    });
    send_to_controller(conn, a.request);
    co_await wait_for(w);
    const std::optional<protocol::message> got = w->take(&waiter::reply);
    if (!got) co_return error_response(504, "aqsd did not answer in time");
    co_return api::finish(a, *got);
  }

  awaitable<response_t> snapshot(const ask_snapshot& s) {
    auto w = std::make_shared<waiter>();
    auto wake = waker();
    timer_.expires_after(st_->options.handler_timeout);
    st_->ctl.snapshot([w, wake](daemon::cluster_snapshot snap) {
      w->put(&waiter::snap, std::move(snap));
      wake();
    });
    co_await wait_for(w);
    const std::optional<daemon::cluster_snapshot> got = w->take(&waiter::snap);
    if (!got) co_return error_response(504, "aqsd did not answer in time");
    co_return api::finish(s, *got);
  }

  awaitable<void> wait_for(const std::shared_ptr<waiter>& w) {
    auto ready = [&] {
      std::lock_guard lock(w->mu);
      return w->reply.has_value() || w->snap.has_value();
    };
    // The wake-up is posted to this strand, so it cannot slip in between
    // the check and the wait.
    while (!ready() && !stopping_) {
      beast::error_code ec;
      co_await timer_.async_wait(asio::redirect_error(use_awaitable, ec));
      if (!ec) break;  // the deadline passed
    }
  }

  void send_to_controller(const std::shared_ptr<daemon::reply_connection>& conn, const protocol::message& m) {
    try {
      st_->ctl.on_message(conn, m);
    } catch (const protocol::protocol_error& e) {
      auto err = protocol::make_error(e);
      err.id = 1;
      conn->send(std::move(err));
    } catch (const std::exception& e) {
      conn->send(protocol::error{1, protocol::error_code::internal, e.what()});
    }
  }

  bool take_slot(std::int64_t uid) {
    std::lock_guard lock(st_->mu);
    std::size_t& n = st_->per_user[uid];
    if (n >= st_->options.max_requests_per_user) return false;
    ++n;
    return true;
  }
  void give_slot(std::int64_t uid) {
    std::lock_guard lock(st_->mu);
    auto it = st_->per_user.find(uid);
    if (it != st_->per_user.end() && --it->second == 0) st_->per_user.erase(it);
  }

  // Server-sent events: job changes as the controller commits them, a
  // comment line every keepalive_interval (which also finds a client gone).
  // `values_of`: a job's published values instead (event "values").
  awaitable<void> stream_events(std::int64_t values_of = 0) {
    auto feed = std::make_shared<sse_feed>();
    feed->values_of = values_of;
    {
      std::lock_guard lock(feed->mu);
      feed->wake = waker();
    }
    {
      std::lock_guard lock(st_->mu);
      st_->feeds.push_back(feed);
    }
    if (values_of != 0) ++st_->value_feeds;
    beast::error_code ec;
    static constexpr std::string_view head =
        "HTTP/1.1 200 OK\r\nServer: aqsd\r\nContent-Type: text/event-stream\r\nCache-Control: no-store\r\n"
        "X-Accel-Buffering: no\r\nConnection: close\r\n\r\n";
    const std::string first = std::string(head) + (values_of == 0 ? ": aqsd job events\n\n"
                                                                  : ": aqsd values of job " + std::to_string(values_of) + "\n\n");
    lowest().expires_after(st_->options.write_timeout);
    co_await asio::async_write(stream_, asio::buffer(first), asio::redirect_error(use_awaitable, ec));
    while (!ec && !stopping_) {
      std::string out;
      bool dropped = false;
      {
        std::lock_guard lock(feed->mu);
        dropped = feed->overflowed;
        for (auto& t : feed->queued) out += t;
        feed->queued.clear();
        feed->bytes = 0;
      }
      if (dropped) break;
      if (out.empty()) {
        timer_.expires_after(st_->options.keepalive_interval);
        beast::error_code wait_ec;
        co_await timer_.async_wait(asio::redirect_error(use_awaitable, wait_ec));
        if (wait_ec || stopping_) continue;  // woken: events (or stop)
        out = ": keep-alive\n\n";
      }
      lowest().expires_after(st_->options.write_timeout);
      co_await asio::async_write(stream_, asio::buffer(out), asio::redirect_error(use_awaitable, ec));
    }
    if (values_of != 0) --st_->value_feeds;
    std::lock_guard lock(feed->mu);
    feed->wake = nullptr;  // it holds this session
  }

  void finish() {
    st_->release(serial_);  // first: its record names this socket's descriptor
    beast::error_code ec;
    lowest().socket().shutdown(asio::socket_base::shutdown_both, ec);
    lowest().close();
  }

  Stream stream_;
  asio::steady_timer timer_;
  state_ptr st_;
  std::string address_;
  std::string remote_;
  std::uint64_t serial_;
  bool stopping_ = false;
};

// Refuses a connection over a limit: a plain 429 that needs no reading (TLS
// peers are just closed: no handshake is spent on them).
template <class Socket>
void refuse(Socket& sock, bool tls, const std::string& why) {
  boost::system::error_code ec;
  if (!tls) {
    response_t res = error_response(429, why);
    res.keep_alive(false);
    std::ostringstream text;
    text << res;
    sock.non_blocking(true, ec);
    if (!ec) asio::write(sock, asio::buffer(text.str()), ec);
  }
  sock.shutdown(asio::socket_base::shutdown_both, ec);
  sock.close(ec);
}

// Samples the busy processors every utilization_interval, and soon after a
// job change (at most once a second). Runs on the sampler strand until stop().
awaitable<void> sampler(state_ptr st) {
  const std::weak_ptr<http_server::state> weak = st;
  auto take = [&] {
    st->ctl.snapshot([weak](daemon::cluster_snapshot snap) {
      if (auto s = weak.lock()) s->record(snap);
    });
  };
  take();
  for (;;) {
    boost::system::error_code ec;
    if (!st->changed.load()) {
      st->sampler_wait.expires_after(st->options.utilization_interval);
      co_await st->sampler_wait.async_wait(asio::redirect_error(use_awaitable, ec));
    }
    {
      std::lock_guard lock(st->mu);
      if (st->stopped) co_return;
    }
    st->changed.store(false);
    take();
    st->sampler_limit.expires_after(std::chrono::seconds(1));
    co_await st->sampler_limit.async_wait(asio::redirect_error(use_awaitable, ec));
    {
      std::lock_guard lock(st->mu);
      if (st->stopped) co_return;
    }
  }
}

awaitable<void> accept_loop(state_ptr st) {
  asio::steady_timer backoff(st->io);
  while (true) {
    boost::system::error_code ec;
    auto sock = co_await st->acceptor->async_accept(asio::make_strand(st->io), asio::redirect_error(use_awaitable, ec));
    if (ec == asio::error::operation_aborted || !st->acceptor->is_open()) co_return;
    if (ec) {
      backoff.expires_after(std::chrono::milliseconds(100));
      co_await backoff.async_wait(asio::redirect_error(use_awaitable, ec));
      continue;
    }
    auto ep = sock.remote_endpoint(ec);
    const std::string address = ec ? std::string("unknown") : ep.address().to_string();
    const std::string remote = ec ? address : address + ":" + std::to_string(ep.port());
    std::uint64_t serial = 0;
    {
      std::lock_guard lock(st->mu);
      serial = st->next_session++;
    }
    std::vector<std::function<void()>> victims;
    const bool admitted = st->admit(serial, address, sock.native_handle(), victims);
    for (auto& v : victims) v();
    if (!admitted) {
      refuse(sock, st->tls != nullptr,
             "aqsd has too many HTTP connections (" + std::to_string(st->options.max_connections) + "): retry later");
      continue;
    }
    if (st->tls) {
      auto s = std::make_shared<session<beast::ssl_stream<beast::tcp_stream>>>(
          beast::ssl_stream<beast::tcp_stream>(beast::tcp_stream(std::move(sock)), *st->tls), st, address, remote, serial);
      s->start();
    } else {
      auto s = std::make_shared<session<beast::tcp_stream>>(beast::tcp_stream(std::move(sock)), st, address, remote, serial);
      s->start();
    }
  }
}

std::pair<std::string, std::string> split_host_port(const std::string& text) {
  const auto colon = text.rfind(':');
  if (colon == std::string::npos || colon + 1 == text.size() || colon == 0) {
    throw http_error("--http expects HOST:PORT, got '" + text + "'");
  }
  std::string host = text.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  return {host, text.substr(colon + 1)};
}

}  // namespace

http_server::http_server(asio::io_context& io, http_options options, daemon::controller& ctl)
    : state_(std::make_shared<state>(io, std::move(options), ctl)) {}

http_server::~http_server() { stop(); }

namespace {

asio::ip::tcp::endpoint checked_endpoint(const http_options& o, asio::io_context& io) {
  if (o.cert_file.has_value() != o.key_file.has_value()) {
    throw http_error("--http-cert and --http-key go together");
  }
  auto [host, port] = split_host_port(o.listen);
  asio::ip::tcp::resolver resolver(io);
  boost::system::error_code ec;
  auto results = resolver.resolve(host, port, asio::ip::tcp::resolver::passive | asio::ip::tcp::resolver::numeric_service, ec);
  if (ec || results.empty()) throw http_error("cannot resolve --http " + o.listen + ": " + ec.message());
  const auto ep = results.begin()->endpoint();
  if (!o.cert_file && !o.insecure && !ep.address().is_loopback()) {
    throw http_error("--http " + o.listen +
                     " is not a loopback address: give --http-cert and --http-key (TLS), or --http-insecure "
                     "to send tokens in clear on purpose");
  }
  return ep;
}

}  // namespace

void validate(const http_options& o) {
  asio::io_context io;
  (void)checked_endpoint(o, io);
}

void http_server::start() {
  auto& st = *state_;
  const auto& o = st.options;
  const auto ep = checked_endpoint(o, st.io);
  boost::system::error_code ec;
  if (o.cert_file) {
    auto ctx = std::make_unique<ssl::context>(ssl::context::tls_server);
    ctx->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 | ssl::context::no_sslv3 |
                     ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1 | ssl::context::single_dh_use);
    ctx->use_certificate_chain_file(o.cert_file->string(), ec);
    if (ec) throw http_error("cannot read the certificate " + o.cert_file->string() + ": " + ec.message());
    ctx->use_private_key_file(o.key_file->string(), ssl::context::pem, ec);
    if (ec) throw http_error("cannot read the private key " + o.key_file->string() + ": " + ec.message());
    st.tls = std::move(ctx);
  }
  auto acc = std::make_unique<asio::ip::tcp::acceptor>(st.io);
  acc->open(ep.protocol(), ec);
  if (!ec) acc->set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acc->bind(ep, ec);
  if (!ec) acc->listen(asio::socket_base::max_listen_connections, ec);
  if (ec) throw http_error("cannot listen on " + o.listen + " (--http): " + ec.message());
  st.port = acc->local_endpoint().port();
  st.acceptor = std::move(acc);
  st.ctl.on_change([weak = std::weak_ptr<state>(state_)](const daemon::job_change& ch) {
    if (auto s = weak.lock()) s->publish(ch);
  });
  st.ctl.telemetry().on_values(
      [weak = std::weak_ptr<state>(state_)](std::int64_t job, const std::vector<std::pair<std::string, daemon::value_point>>& kept) {
        if (auto s = weak.lock()) s->publish_values(job, kept);
      });
  asio::co_spawn(st.io, accept_loop(state_), asio::detached);
  asio::co_spawn(st.sampler_strand, sampler(state_), asio::detached);
}

void http_server::stop() {
  auto& st = *state_;
  std::vector<std::function<void()>> closers;
  {
    std::lock_guard lock(st.mu);
    if (st.stopped) return;
    st.stopped = true;
    for (auto& [serial, c] : st.conns) {
      if (c.close) closers.push_back(c.close);
    }
  }
  asio::post(st.io, [s = state_] {
    boost::system::error_code ec;
    if (s->acceptor) s->acceptor->close(ec);
  });
  asio::post(st.sampler_strand, [s = state_] {
    s->sampler_wait.cancel();
    s->sampler_limit.cancel();
  });
  for (auto& c : closers) c();
}

unsigned short http_server::port() const noexcept { return state_->port; }
bool http_server::tls() const noexcept { return state_->tls != nullptr; }

}  // namespace aqs::http
