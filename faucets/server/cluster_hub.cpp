// cluster_hub: the clusters' side of faucetsd: a TLS listener, the
// challenge each cluster answers with its key, the reports it sends, the
// round trip and bandwidth to it.
#include <utility>

#include <chrono>
#include <limits>
#include <optional>

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/steady_timer.hpp>

#include <pqxx/except>

#include "logging/log.hpp"
#include "protocol/auth.hpp"
#include "server/faucets_server.hpp"

namespace aqs::faucets {

namespace {

// PostgreSQL's messages run over several lines; a log line takes the first.
std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

}  // namespace

namespace asio = boost::asio;
using nlohmann::json;

namespace {
double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}
double steady_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

asio::awaitable<void> faucets_server::accept_clusters() {
  const auto& L = options_.limits;
  asio::steady_timer backoff(io_);
  while (!stopped_) {
    boost::system::error_code ec;
    auto sock = co_await clusters_acceptor_->async_accept(asio::redirect_error(asio::use_awaitable, ec));
    if (ec) {
      if (stopped_ || ec == asio::error::operation_aborted) co_return;
      // Out of descriptors (EMFILE) and the like: wait rather than spin.
      if (const auto n = cluster_accept_errors_.due()) {
        logging::warn("clusters' port: cannot accept a connection ({}, {} time(s)); trying again every {} ms",
                      ec.message(), n, k_accept_backoff.count());
      }
      backoff.expires_after(k_accept_backoff);
      co_await backoff.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      continue;
    }
    boost::system::error_code rec;
    const auto ep = sock.remote_endpoint(rec);
    const std::string address = rec ? std::string("?") : ep.address().to_string();
    // Until it proves a cluster's key, a peer counts against its address.
    if (const auto why =
            admit(*cluster_conns_, address, L.cluster_max_connections, L.cluster_max_per_address, "clusters' port")) {
      if (const auto n = cluster_refusals_.due()) logging::warn("cluster link: {} connection(s) refused: {}", n, *why);
      boost::system::error_code ignore;
      sock.close(ignore);
      continue;
    }
    conn_slot slot(cluster_conns_, address);
    asio::co_spawn(io_, cluster_session(std::move(sock), std::move(slot)), asio::detached);
  }
}

asio::awaitable<void> faucets_server::cluster_session(asio::ip::tcp::socket raw, conn_slot slot) {
  std::string remote = "?";
  {
    boost::system::error_code ec;
    const auto ep = raw.remote_endpoint(ec);
    if (!ec) remote = ep.address().to_string() + ":" + std::to_string(ep.port());
  }
  // The first byte, the handshake, then the hello, each within the deadline;
  // no TLS state (some 80 KiB) for a peer that sends nothing.
  std::optional<watchdog> dog;
  {
    dog.emplace(raw);
    dog->arm(options_.limits.handshake_timeout);
    boost::system::error_code ec;
    co_await raw.async_wait(asio::ip::tcp::socket::wait_read, asio::redirect_error(asio::use_awaitable, ec));
    if (ec || dog->fired()) co_return;
  }
  auto sock = std::make_shared<tls_socket>(std::move(raw), *tls_);
  dog.emplace(sock->next_layer());
  dog->arm(options_.limits.handshake_timeout);
  std::shared_ptr<link_channel> ch;
  cluster_entry* entry = nullptr;
  try {
    co_await sock->async_handshake(asio::ssl::stream_base::server, asio::use_awaitable);
    ch = std::make_shared<link_channel>(std::move(*sock));
    dog.emplace(ch->socket().next_layer());
    dog->arm(options_.limits.handshake_timeout);
    const std::string nonce = protocol::make_nonce();
    ch->send(json{{"type", "challenge"}, {"nonce", nonce}});
    // Read before the key is proven: a small frame only.
    const json hello = co_await ch->read(options_.limits.max_hello_frame);
    dog->disarm();
    const auto refuse = [&](const std::string& why) {
      logging::warn("cluster link from {} refused: {}", remote, why);
      ch->send(json{{"type", "error"}, {"message", why}});
    };
    if (type_of(hello) != "hello") {
      refuse("expected hello");
      throw link_error("no hello");
    }
    const std::string name = string_field(hello, "cluster", 128);
    const auto key = options_.cluster_keys.find(name);
    const auto auth = opt_string_field(hello, "auth", 128).value_or("");
    if (key == options_.cluster_keys.end()) {
      refuse("unknown cluster '" + name + "'");
      throw link_error("unknown cluster");
    }
    if (!protocol::verify_auth(key->second, nonce, auth)) {
      refuse("cluster '" + name + "' did not prove its key");
      throw link_error("bad key");
    }
    // Proven: no longer one of its address's handshakes.
    slot.rekey("cluster " + name, std::numeric_limits<std::size_t>::max());
    cluster_entry& c = clusters_[name];
    c.last_heard = std::chrono::steady_clock::now();
    if (c.channel && !c.channel->closed()) {
      logging::warn("cluster '{}' connected again from {}: the old link is closed", name, remote);
      c.channel->close();
    }
    c.name = name;
    c.channel = ch;
    entry = &c;
    ch->send(json{{"type", "welcome"}, {"policy", options_.policy}});
    logging::info("cluster '{}' connected from {}", name, remote);
    cluster_up(c);
    while (!stopped_) {
      const json m = co_await ch->read();
      if (c.channel != ch) break;  // replaced by a newer link
      try {
        on_cluster_message(c, m);
      } catch (const link_error& e) {
        logging::warn("cluster '{}': {}", name, e.what());
      }
    }
  } catch (const pqxx::failure& e) {
    // The store failed (PostgreSQL restarting): what the cluster said may be
    // lost, so the link is closed; the cluster connects again and reports
    // every job anew (follow).
    logging::warn("cluster {}: the store failed ({}); closing the link, it reports again when back",
                  entry ? "'" + entry->name + "'" : remote, first_line(e.what()));
  } catch (const std::exception& e) {
    if (entry == nullptr) logging::warn("cluster link from {} ended before it was accepted: {}", remote, e.what());
  }
  dog.reset();
  if (ch) ch->close();
  if (entry != nullptr && entry->channel == ch) cluster_down(*entry);
}

void faucets_server::on_cluster_message(cluster_entry& c, const json& m) {
  const std::string type = type_of(m);
  c.last_heard = std::chrono::steady_clock::now();
  if (type == "report") {
    c.report = parse_report(m);
    c.placed_pending = 0;
    c.placed_procs = 0;
    wake_router();
  } else if (type == "forwarded") {
    on_forwarded(c, int_field(m, "fid", 1, std::int64_t{1} << 53), int_field(m, "job_id", 1, std::int64_t{1} << 53));
  } else if (type == "refused") {
    on_refused(c, int_field(m, "fid", 1, std::int64_t{1} << 53), opt_string_field(m, "error", 4096).value_or("refused"));
  } else if (type == "estimate_reply") {
    const auto qid = int_field(m, "qid", 0, std::int64_t{1} << 53);
    const auto it = m.find("start_in_s");
    const double s = it == m.end() || it->is_null() ? -1.0 : number_field(m, "start_in_s", 0, 1e12);
    if (auto e = estimates_.find(qid); e != estimates_.end() && e->second.first == c.name) {
      e->second.second = s;
      answer_wake_.cancel();
    }
  } else if (type == "start") {
    on_start(c, int_field(m, "fid", 1, std::int64_t{1} << 53), int_field(m, "job_id", 1, std::int64_t{1} << 53));
  } else if (type == "synced") {
    c.synced = true;
    wake_router();
  } else if (type == "job_update") {
    on_update(c, parse_job_update(m));
  } else if (type == "pong") {
    const double sent = number_field(m, "t", 0, 1e12);
    const double rtt = std::max(0.0, steady_s() - sent);
    const auto bytes = opt_int_field(m, "bytes", 0, std::int64_t{1} << 40).value_or(0);
    if (bytes > 0) {
      // A padded ping: the pad's time beyond the bare round trip.
      const double extra = rtt - c.latency_s;
      if (extra > 0) c.bandwidth_bps = static_cast<double>(bytes) / extra;
    } else {
      c.latency_s = rtt;
    }
  } else {
    logging::debug("cluster '{}': ignoring '{}'", c.name, type);
  }
}

void faucets_server::cluster_up(cluster_entry& c) {
  c.ever_seen = true;
  c.synced = false;
  c.lost_at = {};
  // Jobs placed there before it went away and sent elsewhere (or ended)
  // since: they must not run here too. Those still waiting for a cluster
  // keep their copy there: the cluster reports it and on_copy adopts it.
  for (const auto& a : store_.abandoned(c.name)) {
    const auto j = store_.job(a.job_id);
    const auto local = j ? options_.users.local_user(j->owner, c.name) : std::nullopt;
    const bool waiting = j && !is_final_state(j->state) && !j->cluster && !forwards_.contains(j->id);
    if (a.local_id && local && !waiting) {
      c.channel->send(json{{"type", "cancel"}, {"fid", a.job_id}, {"job_id", *a.local_id}, {"local_user", *local}});
      logging::info("job {}: its copy {}:{} is cancelled (the job was sent elsewhere while '{}' was away)", a.job_id,
                    c.name, *a.local_id, c.name);
    }
    store_.forget_abandoned(a.job_id, c.name);
  }
  // Every job placed there and not finished: the cluster reports each, and
  // (after the cancels above) lets them run.
  json follow = json::array();
  for (const auto& j : store_.live_jobs()) {
    if (j.cluster == c.name && j.local_id) follow.push_back(json{{"fid", j.id}, {"job_id", *j.local_id}});
  }
  c.channel->send(json{{"type", "follow"}, {"jobs", follow}});
  wake_router();
}

void faucets_server::cluster_down(cluster_entry& c) {
  c.channel.reset();
  c.synced = false;
  c.lost_at = std::chrono::steady_clock::now();
  logging::warn("cluster '{}' is unreachable; its queued jobs go elsewhere after {} s", c.name,
                options_.cluster_timeout.count());
  try {
    for (const auto& j : store_.live_jobs()) {
      if (j.cluster == c.name && j.state != "PENDING" && j.state != "UNKNOWN") {
        store_.set_state(j.id, "UNKNOWN", "unknown", "cluster " + c.name + " is unreachable");
      }
    }
  } catch (const std::exception& e) {
    // Shown as they were; the cluster reports them when it is back.
    logging::warn("cluster '{}': cannot mark its running jobs unknown: {}", c.name, first_line(e.what()));
  }
  // Answers it will never give.
  for (auto& [fid, w] : forwards_) {
    if (w.cluster == c.name && !w.local_id && !w.refusal) w.lost = true;
  }
  answer_wake_.cancel();
}

asio::awaitable<void> faucets_server::pinger() {
  asio::steady_timer t(io_);
  int round = 0;
  while (!stopped_) {
    for (auto& [name, c] : clusters_) {
      if (!c.channel) continue;
      if (std::chrono::steady_clock::now() - c.last_heard > options_.silence_limit) {
        logging::warn("cluster '{}': silent for {} ms; closing its link", name, options_.silence_limit.count());
        c.channel->close();
        continue;
      }
      json ping{{"type", "ping"}, {"t", steady_s()}};
      // Every tenth round, a 256 KiB pad measures the bandwidth.
      if (round % 10 == 1) ping["pad"] = std::string(std::size_t{256} << 10, 'x');
      c.channel->send(std::move(ping));
    }
    ++round;
    try {
      check_lost_clusters();
    } catch (const std::exception& e) {
      logging::warn("checking for lost clusters: {} (tried again in a second)", first_line(e.what()));
    }
    t.expires_after(std::chrono::seconds(1));
    {
      boost::system::error_code ignored;
      co_await t.async_wait(asio::redirect_error(asio::use_awaitable, ignored));
    }
  }
}

std::vector<cluster_view> faucets_server::views() const {
  std::vector<cluster_view> out;
  for (const auto& [name, c] : clusters_) {
    cluster_view v;
    v.name = name;
    v.up = c.channel != nullptr && c.report.has_value() && c.synced;
    if (c.report) {
      const auto& r = *c.report;
      v.procs_total = r.procs_total;
      v.procs_free = std::max<std::int64_t>(0, r.procs_free - c.placed_procs);
      v.gpus_total = r.gpus_total;
      v.gpus_free = r.gpus_free;
      v.shrinkable = r.shrinkable;
      v.pending_jobs = r.pending_jobs + c.placed_pending;
      v.pending_procs = r.pending_procs + c.placed_procs;
      v.pending_by_partition = r.pending_by_partition;
      v.max_job_procs = r.max_job_procs;
      v.max_job_gpus = r.max_job_gpus;
      v.speed = r.speed;
      v.datasets = r.datasets;
    }
    v.latency_s = c.latency_s;
    out.push_back(std::move(v));
  }
  return out;
}

json faucets_server::clusters_json() const {
  json out = json::array();
  for (const auto& [name, c] : clusters_) {
    json o{{"name", name},
           {"state", c.channel ? "UP" : (c.ever_seen ? "UNREACHABLE" : "NEVER_SEEN")},
           {"latency_ms", c.latency_s * 1000.0},
           {"bandwidth_mbps", c.bandwidth_bps * 8 / 1e6}};
    if (c.report) {
      o["report"] = to_json(*c.report);
      o["report"].erase("type");
    }
    out.push_back(std::move(o));
  }
  (void)unix_now;
  return out;
}

}  // namespace aqs::faucets
