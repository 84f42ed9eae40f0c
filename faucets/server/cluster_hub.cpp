// cluster_hub: the clusters' TLS links, their handshake, reports, pings.
#include "server/cluster_hub.hpp"

#include <algorithm>
#include <chrono>
#include <limits>
#include <optional>
#include <utility>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <pqxx/except>

#include "cluster_link/tls.hpp"
#include "cluster_link/word_table.hpp"
#include "logging/log.hpp"
#include "protocol/auth.hpp"
#include "server/listener.hpp"

namespace aqs::faucets {

namespace asio = boost::asio;
using nlohmann::json;

namespace {

// PostgreSQL's messages run over several lines; a log line takes the first.
std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

double steady_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

std::map<std::string, std::string> load_cluster_keys(const std::filesystem::path& file) {
  std::map<std::string, std::string> out;
  for (const auto& row : parse_word_table(read_text_file(file, "cluster table"), file.string(), 2, "CLUSTER KEYFILE")) {
    std::filesystem::path k(row[1]);
    if (k.is_relative()) k = file.parent_path() / k;
    out[row[0]] = read_key_file(k);
  }
  if (out.empty()) throw std::runtime_error("the cluster table " + file.string() + " names no cluster");
  return out;
}

cluster_hub::cluster_hub(asio::io_context& io, hub_options options) : io_(io), options_(std::move(options)) {
  for (const auto& [name, key] : options_.cluster_keys) clusters_[name].name = name;
}

cluster_hub::~cluster_hub() = default;

void cluster_hub::start() {
  tls_ = server_tls(options_.cert, options_.key);
  acceptor_ = listen_on(io_, options_.listen, "--listen");
  port_ = acceptor_->local_endpoint().port();
  const auto& L = options_.limits;
  asio::co_spawn(io_,
                 accept_loop(*acceptor_, accept_caps{conns_, L.cluster_max_connections, L.cluster_max_per_address,
                                                     "clusters' port", "cluster link"},
                             [this](asio::ip::tcp::socket sock, conn_slot slot) {
                               asio::co_spawn(io_, session(std::move(sock), std::move(slot)), asio::detached);
                             }),
                 asio::detached);
  asio::co_spawn(io_, pinger(), asio::detached);
}

void cluster_hub::stop() {
  asio::post(io_, [this] {
    stopped_ = true;
    boost::system::error_code ec;
    if (acceptor_) acceptor_->close(ec);
    for (auto& [name, c] : clusters_) {
      if (c.channel) c.channel->close();
    }
  });
}

std::vector<std::string> cluster_hub::names() const {
  std::vector<std::string> out;
  for (const auto& [name, c] : clusters_) out.push_back(name);
  return out;
}

bool cluster_hub::connected(const std::string& cluster) const {
  const auto it = clusters_.find(cluster);
  return it != clusters_.end() && it->second.channel != nullptr;
}

bool cluster_hub::send(const std::string& cluster, json message) {
  const auto it = clusters_.find(cluster);
  if (it == clusters_.end() || !it->second.channel) return false;
  it->second.channel->send(std::move(message));
  return true;
}

bool cluster_hub::all_reported() const {
  return std::all_of(clusters_.begin(), clusters_.end(), [](const auto& kv) { return kv.second.report.has_value(); });
}

void cluster_hub::note_placed(const std::string& cluster, std::int64_t procs) {
  if (auto it = clusters_.find(cluster); it != clusters_.end()) {
    it->second.placed_pending += 1;
    it->second.placed_procs += procs;
  }
}

asio::awaitable<void> cluster_hub::session(asio::ip::tcp::socket raw, conn_slot slot) {
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
  entry* joined = nullptr;
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
    entry& c = clusters_[name];
    c.last_heard = std::chrono::steady_clock::now();
    if (c.channel && !c.channel->closed()) {
      logging::warn("cluster '{}' connected again from {}: the old link is closed", name, remote);
      c.channel->close();
    }
    c.name = name;
    c.channel = ch;
    joined = &c;
    ch->send(json{{"type", "welcome"}, {"policy", options_.policy}});
    logging::info("cluster '{}' connected from {}", name, remote);
    up(c);
    while (!stopped_) {
      const json m = co_await ch->read();
      if (c.channel != ch) break;  // replaced by a newer link
      try {
        on_message(c, m);
      } catch (const link_error& e) {
        logging::warn("cluster '{}': {}", name, e.what());
      }
    }
  } catch (const pqxx::failure& e) {
    // The store failed (PostgreSQL restarting): what the cluster said may be
    // lost, so the link is closed; the cluster connects again and reports
    // every job anew (follow).
    logging::warn("cluster {}: the store failed ({}); closing the link, it reports again when back",
                  joined ? "'" + joined->name + "'" : remote, first_line(e.what()));
  } catch (const std::exception& e) {
    if (joined == nullptr) logging::warn("cluster link from {} ended before it was accepted: {}", remote, e.what());
  }
  dog.reset();
  if (ch) ch->close();
  if (joined != nullptr && joined->channel == ch) down(*joined);
}

void cluster_hub::on_message(entry& c, const json& m) {
  const std::string type = type_of(m);
  c.last_heard = std::chrono::steady_clock::now();
  if (type == "report") {
    c.report = parse_report(m);
    c.placed_pending = 0;
    c.placed_procs = 0;
    listener_->capacity_changed();
  } else if (type == "synced") {
    c.synced = true;
    listener_->capacity_changed();
  } else if (desk_ && (type == "job_view_reply" ||
                       (type == "estimate_reply" && m.contains("qid") && m["qid"].is_number_integer() &&
                        m["qid"].get<std::int64_t>() >= k_desk_qid_base))) {
    desk_(c.name, type, m);
  } else if (type == "forwarded" || type == "refused" || type == "estimate_reply" || type == "start" ||
             type == "job_update" || type == "outputs") {
    listener_->job_message(c.name, type, m);
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

void cluster_hub::up(entry& c) {
  c.ever_seen = true;
  c.synced = false;
  c.lost_at = {};
  listener_->cluster_up(c.name);
}

void cluster_hub::down(entry& c) {
  c.channel.reset();
  c.synced = false;
  c.lost_at = std::chrono::steady_clock::now();
  logging::warn("cluster '{}' is unreachable; its queued jobs go elsewhere after {} s", c.name,
                options_.lost_after.count());
  listener_->cluster_down(c.name);
}

void cluster_hub::check_lost() {
  const auto now = std::chrono::steady_clock::now();
  for (auto& [name, c] : clusters_) {
    if (c.channel || c.lost_at == std::chrono::steady_clock::time_point{}) continue;
    if (now - c.lost_at < options_.lost_after) continue;
    c.lost_at = {};  // once per loss
    try {
      listener_->cluster_lost(name);
    } catch (const std::exception& e) {
      logging::warn("cluster '{}': cannot place its queued jobs elsewhere: {}", name, first_line(e.what()));
    }
  }
}

asio::awaitable<void> cluster_hub::pinger() {
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
    check_lost();
    t.expires_after(std::chrono::seconds(1));
    boost::system::error_code ignored;
    co_await t.async_wait(asio::redirect_error(asio::use_awaitable, ignored));
  }
}

std::vector<cluster_view> cluster_hub::views() const {
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
      if (r.price > 0) v.price = r.price;
      v.datasets = r.datasets;
    }
    v.latency_s = c.latency_s;
    out.push_back(std::move(v));
  }
  return out;
}

json cluster_hub::clusters_json() const {
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
  return out;
}

}  // namespace aqs::faucets
