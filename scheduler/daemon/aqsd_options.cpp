// aqsd_options: aqsd's flags and aqs.conf read into one struct (aqsd_options.hpp).
#include "daemon/aqsd_options.hpp"

#include "protocol/staged_files.hpp"

#include <CLI/CLI.hpp>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "core/settings.hpp"
#include "core/strategy.hpp"
#include "cluster_link/word_table.hpp"
#include "logging/log.hpp"

namespace aqs::daemon {

namespace {

// Where the partitions are declared unless --config names another file.
constexpr const char* k_default_config = "/etc/aqs/aqs.conf";

// The listening ports' limits (docs/security.md, "Limits: aqsd's ports and
// HTTP"): each one a flag and a Key=Value line of aqs.conf (core/settings),
// declared once here. A flag given on the command line wins over the file.
std::vector<core::setting> port_settings(server_options& s, http::http_options& h) {
  return {
      core::count_setting("MaxConnections", "--max-connections", s.max_connections,
        "connections to the socket and --listen in all (root and node agents always get in)"),
      core::count_setting("MaxConnectionsPerUser", "--max-connections-per-user", s.max_connections_per_user,
        "connections one local user may hold at once (root and node agents are not limited); also the HTTP "
        "requests one token's user may have under way"),
      core::count_setting("MaxHandshakes", "--max-handshakes", s.max_handshakes,
        "TCP connections (--listen) not yet authenticated, in all"),
      core::count_setting("MaxHandshakesPerAddress", "--max-handshakes-per-address", s.max_handshakes_per_address,
        "TCP connections (--listen) not yet authenticated, from one address"),
      core::seconds_setting("HelloTimeout", "--hello-timeout", s.handshake_timeout, "seconds a new connection has to complete hello"),
      core::seconds_setting("FrameTimeout", "--frame-timeout", s.frame_timeout, "seconds a begun message has to arrive whole"),
      core::seconds_setting("IdleTimeout", "--idle-timeout", s.idle_timeout,
        "seconds a client connection with nothing outstanding may stay silent (0: never closed)", 0),
      core::count_setting("HttpMaxConnections", "--http-max-connections", h.max_connections, "HTTP connections in all"),
      core::count_setting("HttpMaxAnonymousConnections", "--http-max-anonymous-connections", h.max_anonymous_connections,
        "HTTP connections without a valid token yet, in all (past it the oldest such one is closed)"),
      core::count_setting("HttpMaxConnectionsPerAddress", "--http-max-connections-per-address", h.max_connections_per_address,
        "HTTP connections without a valid token yet from one address (past it its oldest such one is closed)"),
      core::count_setting("HttpMaxConnectionsPerUser", "--http-max-connections-per-user", h.max_connections_per_user,
        "HTTP connections one token's user may hold (more: 429)"),
      core::bytes_setting("HttpMaxSubmitBody", "--http-max-submit-body", h.max_submit_body,
        "bytes of a POST /api/v1/jobs body (the script and its JSON)"),
      core::bytes_setting("HttpMaxBody", "--http-max-body", h.max_body, "bytes of any other request's body"),
      core::bytes_setting("HttpMaxBodyBytes", "--http-max-body-bytes", h.max_body_bytes_in_flight,
        "bytes of request bodies held at once, in all (more: 503)"),
      core::bytes_setting("HttpMaxBodyBytesPerUser", "--http-max-body-bytes-per-user", h.max_body_bytes_per_user,
        "bytes of request bodies one user may have held at once (more: 503)"),
      core::bytes_setting("HttpMaxHeader", "--http-max-header", h.max_header, "bytes of a request's head"),
      core::seconds_setting("HttpHeadTimeout", "--http-head-timeout", h.head_timeout,
        "seconds a request head has from its first byte (a new connection: from connecting)"),
      core::seconds_setting("HttpBodyTimeout", "--http-body-timeout", h.body_timeout, "seconds a request body has from its head"),
      core::seconds_setting("HttpKeepaliveTimeout", "--http-keepalive-timeout", h.keepalive_timeout,
        "seconds an idle keep-alive HTTP connection is kept"),
      core::seconds_setting("HttpWriteTimeout", "--http-write-timeout", h.write_timeout, "seconds a client has to take an answer"),
      core::seconds_setting("HttpHandshakeTimeout", "--http-handshake-timeout", h.handshake_timeout, "seconds for the TLS handshake"),
  };
}

// This cluster's terms at a Faucets server (its bids): a flag and an
// aqs.conf line each, read at start.
std::vector<core::setting> faucets_settings(double& speed, double& rate) {
  return {
      core::number_setting("FaucetsSpeed", "--faucets-speed", speed,
        "per-processor speed score reported to the Faucets server", 0.001, 1000.0),
      core::number_setting("FaucetsRate", "--faucets-rate", rate,
        "credits per processor-second this cluster asks of the Faucets server's other owners, scaled by its load",
        0.0, 1e6),
  };
}

// Reads and parses aqs.conf into `out` (the partitions) and the lines of
// `table`'s settings (the ports' limits and the per-user caps) where they
// point; a null `table` only takes the limit lines out (as on SIGHUP: the
// limits are read at start only). The one-line error, or "" when it was read.
// The accounting keys (job_accounting.hpp) go to `acc` (read at start only,
// as the limits are: null on SIGHUP, when they are only taken out).
std::string load_config(const std::string& path, core::site_config& out, std::vector<core::setting>* table,
                        accounting_options* acc = nullptr) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return path + ": cannot read: " + std::strerror(errno);
  std::ostringstream text;
  text << in.rdbuf();
  try {
    server_options s_unused;
    http::http_options h_unused;
    user_limits u_unused;
    std::vector<core::setting> unused;
    double speed_unused = 1, rate_unused = 1;
    if (table == nullptr) {
      unused = port_settings(s_unused, h_unused);
      for (auto& u : user_limit_settings(u_unused)) unused.push_back(std::move(u));
      for (auto& f : faucets_settings(speed_unused, rate_unused)) unused.push_back(std::move(f));
    }
    accounting_options acc_unused;
    const std::string rest = take_accounting_lines(text.str(), path, acc != nullptr ? *acc : acc_unused);
    out = core::parse_config(core::take_setting_lines(rest, path, table != nullptr ? *table : unused, table != nullptr),
                             path);
  } catch (const core::config_error& e) {
    return e.what();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

std::chrono::milliseconds ms(double seconds) { return std::chrono::milliseconds(static_cast<long>(seconds * 1000)); }

// A one-line error and exit 2.
int refuse(const std::string& why) {
  std::fprintf(stderr, "aqsd: %s\n", why.c_str());
  return 2;
}

}  // namespace

std::variant<aqsd_options, int> parse_aqsd_options(int argc, char** argv) {
  aqsd_options o;
  CLI::App app{"aqsd: the AQS scheduler daemon", "aqsd"};
  std::string policy = "equipartition";
  double heartbeat_timeout_s = 10, resize_timeout_s = 30, resize_claim_timeout_s = 300, kill_grace_s = 10;
  o.threads = std::max(2u, std::thread::hardware_concurrency());
  std::string config_file;
  user_limits limits;
  std::vector<core::setting> settings = port_settings(o.server, o.http);
  for (auto& u : user_limit_settings(limits)) settings.push_back(std::move(u));
  double faucets_speed = 1.0, faucets_rate = 1.0;
  for (auto& f : faucets_settings(faucets_speed, faucets_rate)) settings.push_back(std::move(f));
  std::string http_cert, http_key;
  double token_lifespan_s = static_cast<double>(token_authority::k_default_lifespan_s);
  app.add_option("--state-dir", o.state_dir, "holds the cluster key, the socket, the log and the private database")
      ->required();
  app.add_option("--db", o.db, "PostgreSQL connection string (default: a private server under --state-dir)");
  app.add_option("--socket", o.socket, "the Unix socket for local users (default STATE_DIR/aqsd.sock)");
  app.add_option("--listen", o.listen, "HOST:PORT for node agents and remote clients over TCP (port 0: any)");
  app.add_option("--policy", policy, "scheduling strategy: " + [] {
    std::string s;
    for (const auto& n : core::strategy_names()) s += (s.empty() ? "" : ", ") + n;
    return s;
  }());
  app.add_option("--config", config_file,
                 "the partitions (default /etc/aqs/aqs.conf if it exists; without one: one partition of all nodes)");
  app.add_flag("--foreground", o.foreground, "stay attached, log to stderr");
  app.add_option("--heartbeat-timeout", heartbeat_timeout_s, "seconds of silence before a node goes DOWN")
      ->check(CLI::Range(0.2, 86400.0));
  app.add_option("--resize-timeout", resize_timeout_s, "seconds an adaptive job has to apply a new map")
      ->check(CLI::Range(0.1, 86400.0));
  app.add_option("--resize-claim-timeout", resize_claim_timeout_s,
                 "seconds an adaptive job has to acknowledge a map it began to apply; then it is killed (FAILED)")
      ->check(CLI::Range(0.1, 86400.0));
  app.add_option("--kill-grace", kill_grace_s, "seconds between SIGTERM and SIGKILL when a job is cancelled")
      ->check(CLI::Range(0.0, 3600.0));
  double stall_warning_s = 2;
  app.add_option("--stall-warning", stall_warning_s,
                 "log a stall of the event loop longer than this many seconds, with what held it (0: off)")
      ->check(CLI::Range(0.0, 3600.0));
  app.add_option("--nice", o.nice,
                 "aqsd's nice value, and its session's scheduling autogroup's when it leads one (as detached, or "
                 "started with setsid): its share of the CPU against jobs on the same machine (default: as started)")
      ->check(CLI::Range(-20, 19));
  app.add_option("--threads", o.threads, "threads serving connections")->check(CLI::Range(1u, 256u));
  // The limits (ports and per user): a flag wins over its aqs.conf line.
  for (auto& l : settings) app.add_option(std::string(l.flag), l.typed, core::setting_help(l));
  app.add_option("--http", o.http.listen,
                 "HOST:PORT for the REST API, event stream and /metrics (off by default; port 0: any)");
  app.add_option("--http-cert", http_cert, "TLS certificate chain (PEM) for --http")->check(CLI::ExistingFile);
  app.add_option("--http-key", http_key, "TLS private key (PEM) for --http")->check(CLI::ExistingFile);
  app.add_flag("--http-insecure", o.http.insecure,
               "allow plain HTTP on an address other than loopback (tokens then cross the network in clear)");
  app.add_flag("--http-public", o.http.public_read,
               "serve the read-only views (jobs, nodes, processor map, events, metrics) without a token");
  app.add_option("--token-lifespan", token_lifespan_s, "seconds an ftoken token lasts unless it asks (default 3600)")
      ->check(CLI::Range(1.0, static_cast<double>(protocol::k_max_token_lifespan_s)));
  std::string faucets_server, faucets_name, faucets_ca, faucets_key, faucets_users, faucets_datasets;
  app.add_option("--faucets-server", faucets_server, "HOST:PORT of a Faucets server (faucetsd) to join over TLS");
  app.add_option("--faucets-name", faucets_name, "this cluster's name at the Faucets server");
  app.add_option("--faucets-ca", faucets_ca, "CA certificate (PEM) that verifies the Faucets server")
      ->check(CLI::ExistingFile);
  app.add_option("--faucets-key", faucets_key, "this cluster's key file, as the Faucets server's table names it")
      ->check(CLI::ExistingFile);
  app.add_option("--faucets-users", faucets_users,
                 "which Faucets users may run here as whom: \"SERVER_USER LOCAL_USER\" per line")
      ->check(CLI::ExistingFile);
  app.add_option("--faucets-datasets", faucets_datasets, "data sets this cluster holds, comma-separated");
  std::string faucets_stage_dir;
  std::size_t faucets_stage_max = protocol::k_default_stage_max_bytes;
  app.add_option("--faucets-stage-dir", faucets_stage_dir,
                 "where forwarded jobs' staged files get a directory each (default STATE_DIR/faucets-stage)");
  app.add_option("--faucets-stage-max-bytes", faucets_stage_max,
                 "the most a forwarded job may stage in, or send back, in bytes (default " +
                     std::to_string(protocol::k_default_stage_max_bytes) + ")")
      ->check(CLI::Range(std::size_t{0}, protocol::k_max_stage_bytes));
  app.add_option("--log-level", o.log_level, "debug, info, warning or error (default info, or $AQS_LOG_LEVEL)")
      ->check(CLI::IsMember({"debug", "info", "warning", "error"}));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    std::fprintf(stderr, "aqsd: %s (see aqsd --help)\n", e.what());
    return 2;
  }
  if (const auto why = core::apply_typed_flags(settings)) return refuse(*why);
  try {
    (void)core::make_strategy(policy);
  } catch (const std::exception& e) {
    return refuse(e.what());
  }

  // The partitions: a file that cannot be read or parsed stops aqsd here,
  // with the file and line, before anything starts.
  core::site_config partitions = core::implicit_config();
  o.config_named = !config_file.empty();
  o.config_path = config_file.empty() ? std::string(k_default_config) : config_file;
  {
    std::error_code ec;
    if (o.config_named || std::filesystem::exists(o.config_path, ec)) {
      if (const std::string why = load_config(o.config_path, partitions, &settings, &o.controller.accounting);
          !why.empty()) {
        return refuse(why);
      }
    }
  }
  o.http.max_requests_per_user = o.server.max_connections_per_user;

  if (!o.http.listen.empty()) {
    try {
      if (!http_cert.empty()) o.http.cert_file = http_cert;
      if (!http_key.empty()) o.http.key_file = http_key;
      http::validate(o.http);
    } catch (const std::exception& e) {
      return refuse(e.what());
    }
  } else if (!http_cert.empty() || !http_key.empty() || o.http.insecure || o.http.public_read) {
    return refuse("--http-cert, --http-key, --http-insecure and --http-public need --http HOST:PORT");
  }

  if (!faucets_server.empty()) {
    if (faucets_name.empty() || faucets_ca.empty() || faucets_key.empty() || faucets_users.empty()) {
      return refuse("--faucets-server needs --faucets-name, --faucets-ca, --faucets-key and --faucets-users");
    }
    try {
      uplink_options u;
      u.server = faucets_server;
      u.cluster = faucets_name;
      u.ca = faucets_ca;
      u.key = faucets::read_key_file(faucets_key);
      u.users = faucets_user_table::load(faucets_users);
      u.speed = faucets_speed;
      u.rate = faucets_rate;
      if (!faucets_stage_dir.empty()) u.stage_root = std::filesystem::absolute(faucets_stage_dir);
      u.stage_max_bytes = faucets_stage_max;
      std::stringstream ds(faucets_datasets);
      for (std::string d; std::getline(ds, d, ',');) {
        if (!d.empty()) u.datasets.push_back(d);
      }
      o.uplink = std::move(u);
    } catch (const std::exception& e) {
      return refuse(e.what());
    }
  } else if (!faucets_name.empty() || !faucets_ca.empty() || !faucets_key.empty() || !faucets_users.empty() ||
             !faucets_stage_dir.empty()) {
    return refuse("--faucets-name, --faucets-ca, --faucets-key and --faucets-users need --faucets-server");
  }

  o.stall_warning = ms(stall_warning_s);
  controller_options& c = o.controller;
  c.policy = policy;
  c.heartbeat_timeout = ms(heartbeat_timeout_s);
  c.resize_timeout = ms(resize_timeout_s);
  c.resize_claim_timeout = ms(resize_claim_timeout_s);
  c.kill_grace = std::chrono::seconds(static_cast<long>(kill_grace_s + 0.5));
  c.token_lifespan_s = static_cast<std::int64_t>(token_lifespan_s);
  c.partitions = std::move(partitions);
  c.limits = limits;
  c.faucets_gate = o.uplink.has_value();
  return o;
}

std::variant<core::site_config, std::string> reread_partitions(const aqsd_options& o) {
  core::site_config fresh = core::implicit_config();
  std::error_code missing;
  if (o.config_named || std::filesystem::exists(o.config_path, missing)) {
    if (std::string why = load_config(o.config_path, fresh, nullptr); !why.empty()) return why;
  }
  return fresh;
}

}  // namespace aqs::daemon
