// faucetsd: the Faucets server. Users submit to it; it places each job on
// the cluster its broker policy picks among the AQS clusters connected to
// it over TLS, follows it to its end, and sends a lost cluster's queued jobs
// elsewhere. Runs in the foreground (a service manager keeps it). This file
// only reads the configuration and assembles the parts (faucets_server.hpp).
#include <csignal>
#include <cstdio>
#include <sys/resource.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>

#include "broker/broker.hpp"
#include "daemon_base/server.hpp"
#include "daemon_base/service_notify.hpp"
#include "daemon_base/state_dir.hpp"
#include "logging/log.hpp"
#include "server/faucets_server.hpp"
#include "server/token_desk.hpp"
#include "store/pg_server.hpp"
#include "store/pg_supervisor.hpp"

using namespace aqs;

namespace {

// What the command line says, as given (files are read in run()).
struct config {
  std::string state_dir, db, listen = "0.0.0.0:7878", http, cert, key, clusters_file, users_file, socket_path, owners_file;
  std::string policy = "earliest-start", log_level;
  double cluster_timeout_s = 60;
  std::uint64_t seed = 0;
  bool foreground = false, http_plain = false;
  std::int64_t token_lifespan = daemon::token_authority::k_default_lifespan_s;
  faucets::server_limits limits;
};

void add_options(CLI::App& app, config& c, std::vector<core::setting>& settings) {
  app.add_option("--state-dir", c.state_dir, "holds the token key, the socket and the private database")->required();
  app.add_option("--db", c.db, "PostgreSQL connection string (default: a private server under --state-dir)");
  app.add_option("--listen", c.listen, "HOST:PORT where clusters connect over TLS (default 0.0.0.0:7878; port 0: any)");
  app.add_option("--cert", c.cert, "the server's TLS certificate chain (PEM)")->required()->check(CLI::ExistingFile);
  app.add_option("--key", c.key, "the server's TLS private key (PEM)")->required()->check(CLI::ExistingFile);
  app.add_option("--clusters", c.clusters_file, "the clusters that may connect: \"NAME KEYFILE\" per line")
      ->required()
      ->check(CLI::ExistingFile);
  app.add_option("--users", c.users_file, "who runs as whom where: \"SERVER_USER CLUSTER LOCAL_USER\" per line")
      ->required()
      ->check(CLI::ExistingFile);
  app.add_option("--owners", c.owners_file,
                 "the market's owners table: \"cluster NAME OWNER\", \"home USER CLUSTER\", \"limit OWNER CREDITS\" "
                 "per line (docs/faucets.md \"Ledger\")")
      ->check(CLI::ExistingFile);
  app.add_option("--http", c.http, "HOST:PORT of the users' HTTP API (HTTPS with --cert/--key)");
  app.add_flag("--http-plain", c.http_plain, "plain HTTP for --http (refused unless on loopback)");
  app.add_option("--socket", c.socket_path, "Unix socket where users get tokens (default STATE_DIR/faucetsd.sock)");
  std::string names;
  for (const auto n : faucets::broker_names()) names += (names.empty() ? "" : ", ") + std::string(n);
  app.add_option("--policy", c.policy, "broker policy: " + names + " (default earliest-start)");
  app.add_option("--cluster-timeout", c.cluster_timeout_s,
                 "seconds a cluster may be unreachable before its queued jobs go elsewhere (default 60)")
      ->check(CLI::Range(1.0, 86400.0));
  app.add_option("--seed", c.seed, "seed of the random policy (default: from the clock)");
  app.add_option("--token-lifespan", c.token_lifespan, "seconds a token lasts unless it asks (default 3600)");
  // Limits (docs/security.md "Limits: faucetsd"): what one peer, address or
  // user may hold on each port, declared once in conn_limits.cpp.
  settings = faucets::server_limit_settings(c.limits);
  for (auto& l : settings) app.add_option(std::string(l.flag), l.typed, core::setting_help(l));
  app.add_flag("--foreground", c.foreground, "accepted for symmetry with aqsd: faucetsd always stays attached");
  app.add_option("--log-level", c.log_level, "debug, info, warning or error (default info, or $AQS_LOG_LEVEL)");
}

// Why the flags cannot work (one line), or nullopt; sets the log level.
std::optional<std::string> check(const config& c) {
  try {
    faucets::make_broker(c.policy);
  } catch (const std::exception& e) {
    return e.what();
  }
  if (!c.log_level.empty()) {
    const auto l = logging::parse_level(c.log_level);
    if (!l) return "--log-level must be debug, info, warning or error";
    logging::set_level(*l);
  }
  return std::nullopt;
}

faucets::server_options server_options_of(config& c, const daemon::state_dir& dir) {
  faucets::server_options o;
  o.listen = c.listen;
  o.cert = c.cert;
  o.key = c.key;
  if (!c.http.empty()) o.http = c.http;
  o.http_tls = !c.http_plain;
  o.cluster_keys = faucets::load_cluster_keys(c.clusters_file);
  o.users = faucets::user_map::load(c.users_file);
  if (!c.owners_file.empty()) o.owners = faucets::owners_table::load(c.owners_file);
  o.policy = c.policy;
  o.seed = c.seed;
  o.cluster_timeout = std::chrono::seconds(static_cast<long>(c.cluster_timeout_s + 0.5));
  o.token_key = dir.load_or_create_key();
  o.revoked_tokens = dir.revoked_tokens_file();
  c.limits.max_bodies_in_flight = std::max(c.limits.max_bodies_in_flight, c.limits.max_job_body);
  // The caps together must fit in the descriptors this process may open,
  // or a flood would use them up (and with them the store's and the log's).
  if (rlimit nofile{}; ::getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur != RLIM_INFINITY) {
    if (const auto note = c.limits.fit_descriptors(nofile.rlim_cur)) logging::warn("{}", *note);
  }
  o.limits = c.limits;
  return o;
}

// "HOST:PORT" with the port the listener got (port 0 asks for any).
std::string bound(const std::string& hp, unsigned short port) { return hp.substr(0, hp.rfind(':')) + ":" + std::to_string(port); }

void run(config& c, daemon::service_notifier& service) {
  const daemon::state_dir dir{std::filesystem::absolute(c.state_dir)};
  dir.prepare();
  const faucets::server_options o = server_options_of(c, dir);
  std::unique_ptr<store::pg_server> pg;
  std::string conninfo = c.db;
  if (conninfo.empty()) {
    pg = std::make_unique<store::pg_server>(store::pg_server_options{.dir = dir.postgres_dir()});
    pg->start();
    conninfo = pg->ensure_database("faucets");
    logging::info("private PostgreSQL running in {}", dir.postgres_dir().string());
  }
  // A private PostgreSQL that dies (kill -9, OOM) is started again; the
  // store reconnects by itself.
  std::unique_ptr<store::pg_supervisor> supervisor;
  if (pg) supervisor = std::make_unique<store::pg_supervisor>(*pg, [](const std::string& line) { logging::info("{}", line); });
  faucets::faucets_store store(conninfo);
  boost::asio::io_context io(1);
  faucets::faucets_server srv(io, store, o);
  faucets::token_desk desk(srv.tokens(), c.token_lifespan);
  daemon::server_options sopts;
  sopts.unix_socket = c.socket_path.empty() ? dir.root / "faucetsd.sock" : std::filesystem::path(c.socket_path);
  sopts.max_connections = c.limits.socket_max_connections;
  sopts.max_connections_per_user = c.limits.socket_max_per_user;
  sopts.handshake_timeout = c.limits.handshake_timeout;
  daemon::server unix_front(io, sopts, desk);
  unix_front.start();
  srv.start();
  daemon::state_dir::write_file(dir.root / "faucetsd.addr", bound(c.listen, srv.cluster_port()) + "\n", 0644);
  if (o.http) {
    daemon::state_dir::write_file(dir.root / "faucetsd.http",
                                  std::string(o.http_tls ? "https://" : "http://") + bound(c.http, srv.http_port()) + "\n",
                                  0644);
  }
  daemon::state_dir::write_file(dir.pid_file().parent_path() / "faucetsd.pid", std::to_string(::getpid()) + "\n", 0644);
  boost::asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](boost::system::error_code ec, int sig) {
    if (ec) return;
    logging::info("signal {}: stopping (jobs keep running on their clusters)", sig);
    srv.stop();
    unix_front.stop();
    boost::asio::post(io, [&] { io.stop(); });
  });
  logging::info("Faucets server: clusters on {}{}, policy {}, {} clusters known", bound(c.listen, srv.cluster_port()),
                o.http ? ", users on " + bound(c.http, srv.http_port()) : "", c.policy, o.cluster_keys.size());
  service.ready(io, "serving");
  io.run();
  service.stopping();
  if (supervisor) supervisor->stop();
  if (pg) pg->stop();
  logging::info("stopped");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"faucetsd: the Faucets server in front of several AQS clusters"};
  config c;
  std::vector<core::setting> settings;
  add_options(app, c, settings);
  CLI11_PARSE(app, argc, argv);
  if (const auto why = core::apply_typed_flags(settings)) {
    std::fprintf(stderr, "faucetsd: %s\n", why->c_str());
    return 2;
  }
  logging::set_program("faucetsd");
  daemon::service_notifier service;  // systemd (Type=notify), out of the children's environment
  if (const auto why = check(c)) {
    std::fprintf(stderr, "faucetsd: %s\n", why->c_str());
    return 2;
  }
  ::signal(SIGPIPE, SIG_IGN);
  try {
    run(c, service);
  } catch (const std::exception& e) {
    logging::error("cannot start: {}", e.what());
    std::fprintf(stderr, "faucetsd: %s\n", e.what());
    return 1;
  }
  return 0;
}
