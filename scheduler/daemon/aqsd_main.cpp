// aqsd: the AQS scheduler daemon. Parses its options, prepares the state
// directory and the database (a private PostgreSQL unless --db is given),
// recovers, and serves until SIGTERM/SIGINT or a root `shutdown` request.
#include <CLI/CLI.hpp>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <optional>
#include <string_view>
#include <variant>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <cstdio>
#include <fcntl.h>
#include <sys/resource.h>
#include <memory>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <fmt/format.h>
#include <pqxx/pqxx>

#include "core/partition.hpp"
#include "core/strategy.hpp"
#include "daemon/controller.hpp"
#include "daemon/faucets_uplink.hpp"
#include "daemon/server.hpp"
#include "daemon/service_notify.hpp"
#include "daemon/state_dir.hpp"
#include "http/http_server.hpp"
#include "core/settings.hpp"
#include "link/word_table.hpp"
#include "logging/log.hpp"
#include "store/migrations.hpp"
#include "store/pg_job_store.hpp"
#include "store/pg_server.hpp"
#include "store/pg_supervisor.hpp"

namespace {

using namespace aqs;

// How long one store operation keeps trying to reach a database that went
// away before it gives up: a submission is then answered "unavailable"
// (clients retry with their token) instead of hanging; the write pipeline
// retries on its own until the database is back.
constexpr std::chrono::milliseconds k_store_patience{3000};
// Where the partitions are declared unless --config names another file.
constexpr const char* k_default_config = "/etc/aqs/aqs.conf";

// The listening ports' limits (docs/security.md, "Limits: aqsd's ports and
// HTTP"): each one a flag and a Key=Value line of aqs.conf (core/settings),
// declared once here. A flag given on the command line wins over the file.
std::vector<core::setting> port_settings(daemon::server_options& s, http::http_options& h) {
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

// Detaches from the terminal: the parent exits once the child reports
// through the pipe that it serves (or why it could not start).
int daemonize_or_exit(int& ready_fd) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return -1;
  const pid_t pid = ::fork();
  if (pid < 0) return -1;
  if (pid > 0) {
    ::close(fds[1]);
    char status = 1;
    const ssize_t n = ::read(fds[0], &status, 1);
    ::_exit(n == 1 && status == 0 ? 0 : 1);
  }
  ::close(fds[0]);
  ::setsid();
  ready_fd = fds[1];
  return 0;
}

// Reads and parses aqs.conf into `out` (the partitions) and the lines of
// `table`'s settings (the ports' limits and the per-user caps) where they
// point; a null `table` only takes the limit lines out (as on SIGHUP: the
// limits are read at start only). The one-line error, or "" when it was read.
std::string load_config(const std::string& path, core::site_config& out, std::vector<core::setting>* table) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return path + ": cannot read: " + std::strerror(errno);
  std::ostringstream text;
  text << in.rdbuf();
  try {
    daemon::server_options s_unused;
    http::http_options h_unused;
    daemon::user_limits u_unused;
    std::vector<core::setting> unused;
    if (table == nullptr) {
      unused = port_settings(s_unused, h_unused);
      for (auto& u : daemon::user_limit_settings(u_unused)) unused.push_back(std::move(u));
    }
    out = core::parse_config(core::take_setting_lines(text.str(), path, table != nullptr ? *table : unused,
                                                      table != nullptr),
                             path);
  } catch (const core::config_error& e) {
    return e.what();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"aqsd: the AQS scheduler daemon", "aqsd"};
  std::string state_dir_text, db, socket_path, listen, policy = "equipartition";
  bool foreground = false;
  double heartbeat_timeout_s = 10, resize_timeout_s = 30, resize_claim_timeout_s = 300, kill_grace_s = 10;
  unsigned threads = std::max(2u, std::thread::hardware_concurrency());
  std::string log_level;
  std::string config_file;
  http::http_options hopts;
  daemon::server_options sopts;
  daemon::user_limits limits;
  std::vector<core::setting> settings = port_settings(sopts, hopts);
  for (auto& u : daemon::user_limit_settings(limits)) settings.push_back(std::move(u));
  std::string http_cert, http_key;
  double token_lifespan_s = static_cast<double>(daemon::token_authority::k_default_lifespan_s);
  app.add_option("--state-dir", state_dir_text, "holds the cluster key, the socket, the log and the private database")
      ->required();
  app.add_option("--db", db, "PostgreSQL connection string (default: a private server under --state-dir)");
  app.add_option("--socket", socket_path, "the Unix socket for local users (default STATE_DIR/aqsd.sock)");
  app.add_option("--listen", listen, "HOST:PORT for node agents and remote clients over TCP (port 0: any)");
  app.add_option("--policy", policy, "scheduling strategy: " + [] {
    std::string s;
    for (const auto& n : core::strategy_names()) s += (s.empty() ? "" : ", ") + n;
    return s;
  }());
  app.add_option("--config", config_file,
                 "the partitions (default /etc/aqs/aqs.conf if it exists; without one: one partition of all nodes)");
  app.add_flag("--foreground", foreground, "stay attached, log to stderr");
  app.add_option("--heartbeat-timeout", heartbeat_timeout_s, "seconds of silence before a node goes DOWN")
      ->check(CLI::Range(0.2, 86400.0));
  app.add_option("--resize-timeout", resize_timeout_s, "seconds an adaptive job has to apply a new map")
      ->check(CLI::Range(0.1, 86400.0));
  app.add_option("--resize-claim-timeout", resize_claim_timeout_s,
                 "seconds an adaptive job has to acknowledge a map it began to apply; then it is killed (FAILED)")
      ->check(CLI::Range(0.1, 86400.0));
  app.add_option("--kill-grace", kill_grace_s, "seconds between SIGTERM and SIGKILL when a job is cancelled")
      ->check(CLI::Range(0.0, 3600.0));
  app.add_option("--threads", threads, "threads serving connections")->check(CLI::Range(1u, 256u));
  // The limits (ports and per user): a flag wins over its aqs.conf line.
  for (auto& l : settings) app.add_option(std::string(l.flag), l.typed, core::setting_help(l));
  app.add_option("--http", hopts.listen,
                 "HOST:PORT for the REST API, event stream and /metrics (off by default; port 0: any)");
  app.add_option("--http-cert", http_cert, "TLS certificate chain (PEM) for --http")->check(CLI::ExistingFile);
  app.add_option("--http-key", http_key, "TLS private key (PEM) for --http")->check(CLI::ExistingFile);
  app.add_flag("--http-insecure", hopts.insecure,
               "allow plain HTTP on an address other than loopback (tokens then cross the network in clear)");
  app.add_flag("--http-public", hopts.public_read,
               "serve the read-only views (jobs, nodes, processor map, events, metrics) without a token");
  app.add_option("--token-lifespan", token_lifespan_s, "seconds an ftoken token lasts unless it asks (default 3600)")
      ->check(CLI::Range(1.0, static_cast<double>(protocol::k_max_token_lifespan_s)));
  std::string faucets_server, faucets_name, faucets_ca, faucets_key, faucets_users, faucets_datasets;
  double faucets_speed = 1.0;
  app.add_option("--faucets-server", faucets_server, "HOST:PORT of a Faucets server (faucetsd) to join over TLS");
  app.add_option("--faucets-name", faucets_name, "this cluster's name at the Faucets server");
  app.add_option("--faucets-ca", faucets_ca, "CA certificate (PEM) that verifies the Faucets server")
      ->check(CLI::ExistingFile);
  app.add_option("--faucets-key", faucets_key, "this cluster's key file, as the Faucets server's table names it")
      ->check(CLI::ExistingFile);
  app.add_option("--faucets-users", faucets_users,
                 "which Faucets users may run here as whom: \"SERVER_USER LOCAL_USER\" per line")
      ->check(CLI::ExistingFile);
  app.add_option("--faucets-speed", faucets_speed, "per-processor speed score reported to the server (default 1.0)")
      ->check(CLI::Range(0.001, 1000.0));
  app.add_option("--faucets-datasets", faucets_datasets, "data sets this cluster holds, comma-separated");
  app.add_option("--log-level", log_level, "debug, info, warning or error (default info, or $AQS_LOG_LEVEL)")
      ->check(CLI::IsMember({"debug", "info", "warning", "error"}));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    std::fprintf(stderr, "aqsd: %s (see aqsd --help)\n", e.what());
    return 2;
  }
  if (const auto why = core::apply_typed_flags(settings)) {
    std::fprintf(stderr, "aqsd: %s\n", why->c_str());
    return 2;
  }
  logging::set_program("aqsd");
  // systemd (Type=notify): taken out of the environment before any child starts.
  daemon::service_notifier service;
  if (!log_level.empty()) logging::set_level(*logging::parse_level(log_level));
  try {
    (void)core::make_strategy(policy);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "aqsd: %s\n", e.what());
    return 2;
  }

  // The partitions: a file that cannot be read or parsed stops aqsd here,
  // with the file and line, before anything starts.
  core::site_config partitions = core::implicit_config();
  const std::string config_path = config_file.empty() ? std::string(k_default_config) : config_file;
  {
    std::error_code ec;
    if (!config_file.empty() || std::filesystem::exists(config_path, ec)) {
      if (const std::string why = load_config(config_path, partitions, &settings); !why.empty()) {
        std::fprintf(stderr, "aqsd: %s\n", why.c_str());
        return 2;
      }
    }
  }
  hopts.max_requests_per_user = sopts.max_connections_per_user;

  if (!hopts.listen.empty()) {
    try {
      if (!http_cert.empty()) hopts.cert_file = http_cert;
      if (!http_key.empty()) hopts.key_file = http_key;
      http::validate(hopts);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "aqsd: %s\n", e.what());
      return 2;
    }
  } else if (!http_cert.empty() || !http_key.empty() || hopts.insecure || hopts.public_read) {
    std::fprintf(stderr, "aqsd: --http-cert, --http-key, --http-insecure and --http-public need --http HOST:PORT\n");
    return 2;
  }

  std::optional<daemon::uplink_options> uplink_opts;
  if (!faucets_server.empty()) {
    if (faucets_name.empty() || faucets_ca.empty() || faucets_key.empty() || faucets_users.empty()) {
      std::fprintf(stderr, "aqsd: --faucets-server needs --faucets-name, --faucets-ca, --faucets-key and --faucets-users\n");
      return 2;
    }
    try {
      daemon::uplink_options u;
      u.server = faucets_server;
      u.cluster = faucets_name;
      u.ca = faucets_ca;
      u.key = faucets::read_key_file(faucets_key);
      u.users = daemon::faucets_user_table::load(faucets_users);
      u.speed = faucets_speed;
      std::stringstream ds(faucets_datasets);
      for (std::string d; std::getline(ds, d, ',');) {
        if (!d.empty()) u.datasets.push_back(d);
      }
      uplink_opts = std::move(u);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "aqsd: %s\n", e.what());
      return 2;
    }
  } else if (!faucets_name.empty() || !faucets_ca.empty() || !faucets_key.empty() || !faucets_users.empty()) {
    std::fprintf(stderr, "aqsd: --faucets-name, --faucets-ca, --faucets-key and --faucets-users need --faucets-server\n");
    return 2;
  }

  const daemon::state_dir dir{std::filesystem::absolute(state_dir_text)};
  int ready_fd = -1;
  auto report_ready = [&](char status) {
    if (ready_fd >= 0) {
      (void)!::write(ready_fd, &status, 1);
      ::close(ready_fd);
      ready_fd = -1;
    }
  };
  try {
    dir.prepare();
    if (!foreground) {
      if (daemonize_or_exit(ready_fd) != 0) throw std::runtime_error("cannot detach from the terminal");
      const int log_fd = ::open(dir.log_file().c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
      const int null_fd = ::open("/dev/null", O_RDWR | O_CLOEXEC);
      if (log_fd >= 0) {
        ::dup2(log_fd, STDOUT_FILENO);
        ::dup2(log_fd, STDERR_FILENO);
        ::close(log_fd);
      }
      if (null_fd >= 0) {
        ::dup2(null_fd, STDIN_FILENO);
        ::close(null_fd);
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "aqsd: %s\n", e.what());
    return 1;
  }
  ::signal(SIGPIPE, SIG_IGN);
  // Thousands of connections need descriptors: take what the hard limit
  // allows (per-user limits, not EMFILE, are what keeps one user in check).
  if (rlimit nofile{}; ::getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
    nofile.rlim_cur = nofile.rlim_max;
    (void)::setrlimit(RLIMIT_NOFILE, &nofile);
  }

  int rc = 0;
  try {
    const std::string key = dir.load_or_create_key();
    std::unique_ptr<store::pg_server> pg;
    std::string conninfo = db;
    if (conninfo.empty()) {
      pg = std::make_unique<store::pg_server>(store::pg_server_options{.dir = dir.postgres_dir()});
      pg->start();
      conninfo = pg->ensure_database("aqs");
      logging::info("private PostgreSQL running in {}", dir.postgres_dir().string());
    }
    {
      pqxx::connection c(conninfo);
      const int v = store::apply_migrations(c);
      logging::info("job database at schema version {}", v);
    }
    store::pg_job_store_options store_options;
    store_options.conninfo = conninfo;
    store_options.reconnect_timeout = k_store_patience;
    store::pg_job_store store(store_options);
    // The private server is our child: reaped and started again if it dies.
    std::unique_ptr<store::pg_supervisor> supervisor;
    if (pg) supervisor = std::make_unique<store::pg_supervisor>(*pg, [](const std::string& line) { logging::info("{}", line); });

    boost::asio::io_context io(static_cast<int>(threads));
    std::unique_ptr<daemon::server> srv;
    daemon::controller_options copts;
    copts.policy = policy;
    copts.cluster_key = key;
    copts.heartbeat_timeout = std::chrono::milliseconds(static_cast<long>(heartbeat_timeout_s * 1000));
    copts.resize_timeout = std::chrono::milliseconds(static_cast<long>(resize_timeout_s * 1000));
    copts.resize_claim_timeout = std::chrono::milliseconds(static_cast<long>(resize_claim_timeout_s * 1000));
    copts.kill_grace = std::chrono::seconds(static_cast<long>(kill_grace_s + 0.5));
    copts.revoked_tokens_file = dir.revoked_tokens_file();
    copts.token_lifespan_s = static_cast<std::int64_t>(token_lifespan_s);
    copts.partitions = partitions;
    copts.limits = limits;
    copts.faucets_gate = uplink_opts.has_value();
    if (partitions.configured) logging::info("partitions: {}", partitions.names());
    std::unique_ptr<http::http_server> web;
    std::unique_ptr<daemon::faucets_uplink> uplink;
    auto stop = [&] {
      boost::asio::post(io, [&] {
        if (srv) srv->stop();
        if (web) web->stop();
        if (uplink) uplink->stop();
        io.stop();
      });
    };
    daemon::controller ctl(io, store, copts, stop);
    ctl.recover();

    sopts.unix_socket = socket_path.empty() ? dir.socket() : std::filesystem::path(socket_path);
    if (!listen.empty()) sopts.tcp_listen = listen;
    sopts.cluster_key = key;
    srv = std::make_unique<daemon::server>(io, sopts, ctl);
    srv->start();
    daemon::state_dir::write_file(dir.pid_file(), std::to_string(::getpid()) + "\n", 0644);
    if (!listen.empty()) {
      const auto colon = listen.rfind(':');
      daemon::state_dir::write_file(dir.addr_file(), listen.substr(0, colon) + ":" + std::to_string(srv->tcp_port()) + "\n",
                                    0644);
    }
    if (!hopts.listen.empty()) {
      web = std::make_unique<http::http_server>(io, hopts, ctl);
      web->start();
      const auto colon = hopts.listen.rfind(':');
      daemon::state_dir::write_file(dir.http_addr_file(),
                                    hopts.listen.substr(0, colon) + ":" + std::to_string(web->port()) + "\n", 0644);
      logging::info("HTTP API on {}://{}:{}{}", web->tls() ? "https" : "http", hopts.listen.substr(0, colon), web->port(),
                    hopts.public_read ? " (read-only views public)" : "");
    }
    if (uplink_opts) uplink = std::make_unique<daemon::faucets_uplink>(io, ctl, std::move(*uplink_opts));
    ctl.start();
    if (uplink) {
      uplink->start();
      logging::info("joining the Faucets server {} as cluster '{}'", faucets_server, faucets_name);
    }
    boost::asio::signal_set signals(io, SIGINT, SIGTERM);
    signals.async_wait([&](boost::system::error_code ec, int sig) {
      if (ec) return;
      logging::info("signal {}: stopping (jobs keep running under their agents)", sig);
      stop();
    });
    // SIGHUP: the partitions file read again; one that cannot be read or
    // parsed is logged and the partitions in use are kept.
    boost::asio::signal_set hangups(io, SIGHUP);
    std::function<void()> on_hangup = [&] {
      hangups.async_wait([&](boost::system::error_code ec, int) {
        if (ec) return;
        core::site_config fresh = core::implicit_config();
        std::error_code missing;
        std::string why;
        // The per-user limits are read at start only (the ledger counts
        // against them): a restart takes new ones.
        if (!config_file.empty() || std::filesystem::exists(config_path, missing)) {
          why = load_config(config_path, fresh, nullptr);
        }
        if (why.empty()) {
          ctl.reload_partitions(std::move(fresh));
        } else {
          logging::warn("SIGHUP: partitions not reloaded, keeping those in use: {}", why);
        }
        on_hangup();
      });
    };
    on_hangup();
    logging::info("serving on {}{} with the {} policy (policy of {} threads)", sopts.unix_socket->string(),
                listen.empty() ? "" : " and " + listen.substr(0, listen.rfind(':')) + ":" + std::to_string(srv->tcp_port()),
                policy, threads);
    report_ready(0);
    service.ready(io, "serving on " + sopts.unix_socket->string());
    std::vector<std::thread> pool;
    for (unsigned i = 1; i < threads; ++i) pool.emplace_back([&] { io.run(); });
    io.run();
    for (auto& t : pool) t.join();
    service.stopping();
    // Order matters: the controller's pools and the store's committers call
    // into the controller and the io_context, so they stop first.
    ctl.stop();
    uplink.reset();
    web.reset();
    srv.reset();
    if (supervisor) supervisor->stop();
    if (pg) {
      try {
        pg->stop();
      } catch (const std::exception& e) {
        logging::warn("cannot stop the private PostgreSQL: {}", e.what());
        rc = 1;
      }
    }
    if (ctl.failed()) rc = 1;
    std::error_code ec;
    std::filesystem::remove(dir.pid_file(), ec);
    logging::info("stopped");
  } catch (const std::exception& e) {
    logging::error("cannot start: {}", e.what());
    if (ready_fd < 0 || foreground) std::fprintf(stderr, "aqsd: %s\n", e.what());
    report_ready(1);
    return 1;
  }
  return rc;
}
