// user_api: the users' HTTP API of faucetsd (docs/faucets.md): bearer
// tokens faucetsd issued (ftoken on its Unix socket), each request acting
// as the token's user; root sees and cancels every job. TLS with --http-cert,
// plain HTTP only on loopback. And the overview page at /.
#include <algorithm>
#include <utility>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/http.hpp>

#include <pqxx/except>

#include "logging/log.hpp"
#include "protocol/json_limits.hpp"
#include "protocol/messages.hpp"
#include "server/faucets_server.hpp"
#include "daemon/token_authority.hpp"

namespace aqs::faucets {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using nlohmann::json;
using request_t = bhttp::request<bhttp::string_body>;
using response_t = bhttp::response<bhttp::string_body>;

namespace {

response_t reply(unsigned status, const json& body) {
  response_t res{static_cast<bhttp::status>(status), 11};
  res.set(bhttp::field::server, "faucetsd");
  res.set(bhttp::field::content_type, "application/json");
  res.set(bhttp::field::cache_control, "no-store");
  res.body() = body.dump() + "\n";
  if (status == 401) res.set(bhttp::field::www_authenticate, "Bearer realm=\"faucetsd\"");
  res.prepare_payload();
  return res;
}

response_t error(unsigned status, const std::string& message) { return reply(status, json{{"error", message}}); }

constexpr const char* k_overview = R"html(<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Faucets</title>
<style>body{font:14px system-ui,sans-serif;margin:2em}table{border-collapse:collapse;margin-bottom:2em}
td,th{border-bottom:1px solid #ddd;padding:4px 10px;text-align:left}th{background:#f4f4f4}
.UP{color:#080}.UNREACHABLE{color:#b00}</style></head><body>
<h1>Faucets server</h1>
<p><label>Token <input id="token" size="60" placeholder="ftoken --socket .../faucetsd.sock"></label>
<button id="go">Show</button> <span id="msg"></span></p>
<h2>Clusters</h2><table id="clusters"><thead><tr><th>cluster</th><th>state</th><th>processors free/total</th>
<th>shrinkable</th><th>queued</th><th>speed</th><th>latency ms</th><th>bandwidth Mbit/s</th></tr></thead><tbody></tbody></table>
<h2>Jobs</h2><table id="jobs"><thead><tr><th>id</th><th>global id</th><th>cluster</th><th>user</th><th>name</th>
<th>state</th><th>processors</th><th>submitted</th></tr></thead><tbody></tbody></table>
<script>
const $ = (s) => document.querySelector(s);
const cell = (tr, text, cls) => { const td = tr.insertCell(); td.textContent = text ?? ''; if (cls) td.className = cls; };
async function get(path) {
  const r = await fetch(path, {headers: {Authorization: 'Bearer ' + $('#token').value.trim()}});
  const body = await r.json();
  if (!r.ok) throw new Error(body.error || r.statusText);
  return body;
}
async function refresh() {
  try {
    const [c, j] = await Promise.all([get('/api/v1/clusters'), get('/api/v1/jobs?all=1')]);
    const cb = $('#clusters tbody'); cb.replaceChildren();
    for (const x of c.clusters) {
      const tr = cb.insertRow(); const r = x.report || {};
      cell(tr, x.name); cell(tr, x.state, x.state);
      cell(tr, r.procs_total === undefined ? '' : r.procs_free + '/' + r.procs_total);
      cell(tr, r.shrinkable); cell(tr, r.pending_jobs); cell(tr, r.speed);
      cell(tr, x.latency_ms.toFixed(2)); cell(tr, x.bandwidth_mbps.toFixed(0));
    }
    const jb = $('#jobs tbody'); jb.replaceChildren();
    for (const x of j.jobs) {
      const tr = jb.insertRow();
      cell(tr, x.id); cell(tr, x.gid); cell(tr, x.cluster); cell(tr, x.user); cell(tr, x.name);
      cell(tr, x.state); cell(tr, x.nprocs); cell(tr, x.submit_time);
    }
    $('#msg').textContent = '';
  } catch (e) { $('#msg').textContent = e.message; }
}
$('#go').onclick = () => { localStorage.faucetsToken = $('#token').value; refresh(); };
$('#token').value = localStorage.faucetsToken || '';
setInterval(refresh, 2000); refresh();
</script></body></html>
)html";

std::optional<std::int64_t> number_of(std::string_view s) {
  if (s.empty() || s.size() > 15) return std::nullopt;
  std::int64_t n = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    n = n * 10 + (c - '0');
  }
  return n;
}

std::map<std::string, std::string> query_of(std::string_view q) {
  std::map<std::string, std::string> out;
  while (!q.empty()) {
    const auto amp = q.find('&');
    const std::string_view part = q.substr(0, amp);
    const auto eq = part.find('=');
    out[std::string(part.substr(0, eq))] = eq == std::string_view::npos ? "" : std::string(part.substr(eq + 1));
    if (amp == std::string_view::npos) break;
    q.remove_prefix(amp + 1);
  }
  return out;
}

}  // namespace

// One request: who asks (the token), then the route.
static response_t handle_request(faucets_server& srv, const request_t& req) {
  const std::string target(req.target());
  const auto qmark = target.find('?');
  const std::string path = target.substr(0, qmark);
  const auto query = query_of(qmark == std::string::npos ? std::string_view{} : std::string_view(target).substr(qmark + 1));
  if (path == "/" && req.method() == bhttp::verb::get) {
    response_t res{bhttp::status::ok, 11};
    res.set(bhttp::field::content_type, "text/html; charset=utf-8");
    res.set("Content-Security-Policy", "default-src 'self'; script-src 'unsafe-inline' 'self'; style-src 'unsafe-inline'");
    res.body() = k_overview;
    res.prepare_payload();
    return res;
  }
  // Every /api/v1 route needs a token.
  const auto auth = req.find(bhttp::field::authorization);
  if (auth == req.end()) return error(401, "no bearer token (get one with ftoken --socket FAUCETSD_SOCKET)");
  const std::string value(auth->value());
  if (value.rfind("Bearer ", 0) != 0) return error(401, "the Authorization header must be \"Bearer TOKEN\"");
  const auto now_us = std::chrono::duration_cast<std::chrono::microseconds>(
                          std::chrono::system_clock::now().time_since_epoch()).count();
  const auto verdict = srv.tokens().verify(std::string_view(value).substr(7), now_us);
  if (const auto* why = std::get_if<std::string>(&verdict)) return error(401, "token refused: " + *why);
  const auto& who = std::get<daemon::token_claims>(verdict);
  const bool admin = who.uid == 0;

  if (path == "/api/v1/clusters" && req.method() == bhttp::verb::get) {
    return reply(200, json{{"clusters", srv.clusters_json()}, {"policy", srv.policy()}});
  }
  if (path == "/api/v1/jobs" && req.method() == bhttp::verb::get) {
    const bool all = query.contains("all") && query.at("all") != "0";
    std::optional<std::string> cluster;
    if (query.contains("cluster") && !query.at("cluster").empty() && query.at("cluster") != "all") {
      cluster = query.at("cluster");
    }
    json jobs = json::array();
    for (const auto& j : srv.store().jobs(admin ? std::nullopt : std::optional<std::string>(who.user), all, cluster, 10000)) {
      jobs.push_back(to_json(j));
    }
    return reply(200, json{{"jobs", jobs}});
  }
  if (path == "/api/v1/jobs" && req.method() == bhttp::verb::post) {
    json body;
    try {
      body = protocol::parse_json_bounded(req.body());
    } catch (const std::exception& e) {
      return error(400, std::string("the body is not JSON: ") + e.what());
    }
    if (!body.is_object() || !body.contains("job") || !body["job"].is_object()) {
      return error(400, "the body must be {\"cluster\": \"auto\"|NAME, \"job\": {...}}");
    }
    const std::string cluster = body.value("cluster", std::string("auto"));
    json submit{{"type", "submit"}, {"id", 1}, {"job", body["job"]}};
    if (body.contains("datasets")) submit["datasets"] = body["datasets"];
    std::string why;
    const std::int64_t id = srv.submit(who.user, cluster, std::move(submit), &why);
    if (id == 0) return error(400, why);
    return reply(201, json{{"id", id}, {"gid", nullptr}, {"cluster", nullptr}, {"state", "PENDING"}});
  }
  constexpr std::string_view jobs_prefix = "/api/v1/jobs/";
  if (path.rfind(jobs_prefix, 0) == 0) {
    std::string_view rest = std::string_view(path).substr(jobs_prefix.size());
    const auto slash = rest.find('/');
    const auto id = number_of(rest.substr(0, slash));
    const std::string_view what = slash == std::string_view::npos ? std::string_view{} : rest.substr(slash + 1);
    if (!id) return error(404, "no such route: " + path);
    const auto j = srv.store().job(*id);
    // Someone else's job is as absent as a missing one.
    if (!j || (!admin && j->owner != who.user)) return error(404, "no job " + std::to_string(*id));
    if (what.empty() && req.method() == bhttp::verb::get) return reply(200, to_json(*j));
    if (what == "history" && req.method() == bhttp::verb::get) {
      json events = json::array();
      for (const auto& e : srv.store().history(*id)) {
        events.push_back(json{{"time", e.time}, {"event", e.event}, {"detail", e.detail}});
      }
      return reply(200, json{{"job", to_json(*j)}, {"events", events}});
    }
    if (what == "cancel" && req.method() == bhttp::verb::post) {
      if (auto why = srv.cancel(*j)) return error(409, *why);
      logging::info("job {} cancelled by {}", *id, who.user);
      return reply(200, json{{"id", *id}, {"state", "CANCELLED"}});
    }
  }
  return error(404, "no such route: " + std::string(req.method_string()) + " " + path);
}

namespace {

// Decides from a request's head alone, before any of its body is read:
// who asks (the token) for every /api/v1 route, the user's connection cap,
// and how large a body the route takes. An answer here ends the connection.
std::optional<response_t> preflight(faucets_server& srv, const bhttp::request_parser<bhttp::string_body>& parser,
                                    conn_slot& slot, std::size_t* body_limit) {
  const auto& L = srv.limits();
  const auto& h = parser.get();
  const std::string target(h.target());
  const std::string path = target.substr(0, target.find('?'));
  *body_limit = L.max_other_body;
  if (path == "/") return std::nullopt;
  if (path.rfind("/api/v1/", 0) != 0) return error(404, "no such route: " + std::string(h.method_string()) + " " + path);
  const auto auth = h.find(bhttp::field::authorization);
  if (auth == h.end()) return error(401, "no bearer token (get one with ftoken --socket FAUCETSD_SOCKET)");
  const std::string value(auth->value());
  if (value.rfind("Bearer ", 0) != 0) return error(401, "the Authorization header must be \"Bearer TOKEN\"");
  const auto now_us = std::chrono::duration_cast<std::chrono::microseconds>(
                          std::chrono::system_clock::now().time_since_epoch()).count();
  const auto verdict = srv.tokens().verify(std::string_view(value).substr(7), now_us);
  if (const auto* why = std::get_if<std::string>(&verdict)) return error(401, "token refused: " + *why);
  const auto& who = std::get<daemon::token_claims>(verdict);
  if (!slot.rekey("user " + who.user, L.http_max_per_user)) {
    logging::warn("HTTP: user {} already holds {} connections (at most {}): one more refused", who.user,
                  L.http_max_per_user, L.http_max_per_user);
    return error(429, "user " + who.user + " already holds " + std::to_string(L.http_max_per_user) +
                          " connections to faucetsd (at most that many): close some and retry");
  }
  if (path == "/api/v1/jobs" && h.method() == bhttp::verb::post) *body_limit = L.max_job_body;
  return std::nullopt;
}

}  // namespace

template <class Stream>
asio::awaitable<void> faucets_server::user_session(Stream& stream, conn_slot& slot, watchdog& dog) {
  const auto& L = options_.limits;
  // Big enough for a whole head; a body streams through it.
  beast::flat_buffer buf(L.max_head + 4096);
  for (;;) {
    bhttp::request_parser<bhttp::string_body> parser;
    parser.header_limit(static_cast<std::uint32_t>(L.max_head));
    // The route's own limit is set once the head is read (preflight); a
    // declared length over the largest any route takes fails the head.
    parser.body_limit(std::max(L.max_job_body, L.max_other_body));
    boost::system::error_code ec;
    // From the connection's start (or the previous answer) to the end of
    // the head: a peer that sends nothing, or dribbles, is closed.
    dog.arm(L.head_timeout);
    co_await bhttp::async_read_header(stream, buf, parser, asio::redirect_error(asio::use_awaitable, ec));
    if (ec) {
      if (ec == bhttp::error::header_limit || ec == bhttp::error::body_limit) {
        auto res = ec == bhttp::error::header_limit
                       ? error(431, "the request's head is over " + std::to_string(L.max_head) + " bytes")
                       : error(413, "the body is over " + std::to_string(std::max(L.max_job_body, L.max_other_body)) +
                                        " bytes, the most any route takes");
        res.keep_alive(false);
        dog.arm(L.body_timeout);
        co_await bhttp::async_write(stream, res, asio::redirect_error(asio::use_awaitable, ec));
      }
      co_return;
    }
    std::size_t limit = 0;
    std::optional<body_reservation> reserved;
    std::optional<response_t> early = preflight(*this, parser, slot, &limit);
    if (!early && !parser.is_done()) {
      const auto declared = parser.content_length();
      if (declared && *declared > limit) {
        early = error(413, "the body is " + std::to_string(*declared) + " bytes; this route takes at most " +
                               std::to_string(limit));
      } else {
        reserved = body_reservation::take(bodies_, declared ? static_cast<std::size_t>(*declared) : limit);
        if (!reserved) {
          logging::warn("HTTP: {} bytes of request bodies are being read already: a body from {} waits", bodies_->in_use,
                        slot.key());
          early = error(503, "faucetsd is reading too many request bodies at once; try again");
        }
      }
    }
    if (early) {
      // The body (if any) stays unread: the connection ends with the answer.
      early->keep_alive(false);
      dog.arm(L.body_timeout);
      co_await bhttp::async_write(stream, *early, asio::redirect_error(asio::use_awaitable, ec));
      co_return;
    }
    if (!parser.is_done()) {
      parser.body_limit(limit);
      if (beast::iequals(parser.get()[bhttp::field::expect], "100-continue")) {
        bhttp::response<bhttp::empty_body> cont{bhttp::status::continue_, 11};
        co_await bhttp::async_write(stream, cont, asio::redirect_error(asio::use_awaitable, ec));
        if (ec) co_return;
      }
      dog.arm(L.body_timeout);
      co_await bhttp::async_read(stream, buf, parser, asio::redirect_error(asio::use_awaitable, ec));
      if (ec) {
        if (ec == bhttp::error::body_limit) {
          auto res = error(413, "the body is over " + std::to_string(limit) + " bytes, the most this route takes");
          res.keep_alive(false);
          co_await bhttp::async_write(stream, res, asio::redirect_error(asio::use_awaitable, ec));
        }
        co_return;
      }
    }
    dog.disarm();
    reserved.reset();
    request_t req = parser.release();
    response_t res;
    try {
      res = handle_request(*this, req);
    } catch (const pqxx::broken_connection& e) {
      // Nothing was changed: the request may be sent again.
      logging::warn("HTTP {} {}: the store is unavailable: {}", std::string(req.method_string()),
                    std::string(req.target()), e.what());
      res = error(503, "the Faucets server's database is unavailable for a moment; try again");
    } catch (const std::exception& e) {
      logging::error("HTTP {} {}: {}", std::string(req.method_string()), std::string(req.target()), e.what());
      res = error(500, std::string("internal error: ") + e.what());
    }
    res.keep_alive(req.keep_alive());
    // A peer that does not read its answer is closed too.
    dog.arm(L.body_timeout);
    co_await bhttp::async_write(stream, res, asio::redirect_error(asio::use_awaitable, ec));
    if (ec || !req.keep_alive()) co_return;
  }
}

asio::awaitable<void> faucets_server::accept_users() {
  const auto& L = options_.limits;
  asio::steady_timer backoff(io_);
  while (!stopped_) {
    boost::system::error_code ec;
    auto sock = co_await users_acceptor_->async_accept(asio::redirect_error(asio::use_awaitable, ec));
    if (ec) {
      if (stopped_ || ec == asio::error::operation_aborted) co_return;
      // Out of descriptors (EMFILE) and the like: the listening socket stays
      // readable, so trying again at once would spin. Wait instead.
      if (const auto n = http_accept_errors_.due()) {
        logging::warn("users' port: cannot accept a connection ({}, {} time(s)); trying again every {} ms", ec.message(),
                      n, k_accept_backoff.count());
      }
      backoff.expires_after(k_accept_backoff);
      co_await backoff.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      continue;
    }
    boost::system::error_code rec;
    const auto ep = sock.remote_endpoint(rec);
    const std::string address = rec ? std::string("?") : ep.address().to_string();
    if (const auto why = admit(*http_conns_, address, L.http_max_connections, L.http_max_per_address, "users' port")) {
      if (const auto n = http_refusals_.due()) logging::warn("HTTP: {} connection(s) refused: {}", n, *why);
      boost::system::error_code ignore;
      sock.close(ignore);
      continue;
    }
    conn_slot slot(http_conns_, address);
    if (http_tls_) {
      asio::co_spawn(
          io_,
          [this, s = std::move(sock), slot = std::move(slot)]() mutable -> asio::awaitable<void> {
            boost::system::error_code hec;
            {
              // No TLS state (some 80 KiB) for a peer that sends nothing.
              watchdog first(s);
              first.arm(options_.limits.handshake_timeout);
              co_await s.async_wait(asio::ip::tcp::socket::wait_read, asio::redirect_error(asio::use_awaitable, hec));
              if (hec || first.fired()) co_return;
            }
            asio::ssl::stream<asio::ip::tcp::socket> tls(std::move(s), *http_tls_);
            watchdog dog(tls.next_layer());
            dog.arm(options_.limits.handshake_timeout);
            co_await tls.async_handshake(asio::ssl::stream_base::server, asio::redirect_error(asio::use_awaitable, hec));
            if (hec) co_return;
            co_await user_session(tls, slot, dog);
            if (!tls.next_layer().is_open()) co_return;
            dog.arm(options_.limits.handshake_timeout);
            co_await tls.async_shutdown(asio::redirect_error(asio::use_awaitable, hec));
          },
          asio::detached);
    } else {
      asio::co_spawn(
          io_,
          [this, s = std::move(sock), slot = std::move(slot)]() mutable -> asio::awaitable<void> {
            watchdog dog(s);
            co_await user_session(s, slot, dog);
            boost::system::error_code ignore;
            s.shutdown(asio::ip::tcp::socket::shutdown_both, ignore);
          },
          asio::detached);
    }
  }
}

}  // namespace aqs::faucets
