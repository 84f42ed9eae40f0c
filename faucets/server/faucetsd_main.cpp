// faucetsd: the Faucets server. Users submit to it; it places each job on
// the cluster its broker policy picks among the AQS clusters connected to
// it over TLS, follows it to its end, and sends a lost cluster's queued jobs
// elsewhere. Runs in the foreground (a service manager keeps it).
#include <csignal>
#include <sys/resource.h>
#include <cstdio>
#include <fstream>
#include <sstream>

#include <CLI/CLI.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <pqxx/pqxx>

#include "broker/broker.hpp"
#include "daemon/unix_user.hpp"
#include "daemon/permissions.hpp"
#include "daemon/server.hpp"
#include "daemon/service_notify.hpp"
#include "daemon/state_dir.hpp"
#include "link/word_table.hpp"
#include "logging/log.hpp"
#include "protocol/replies.hpp"
#include "server/faucets_server.hpp"
#include "store/pg_server.hpp"
#include "store/pg_supervisor.hpp"

using namespace aqs;

namespace {

// faucetsd's Unix socket: users get and revoke their bearer tokens there,
// where the kernel vouches for who they are (ftoken --socket PATH).
class token_desk final : public daemon::dispatcher {
public:
  explicit token_desk(const daemon::token_authority& tokens, std::int64_t lifespan)
      : tokens_(const_cast<daemon::token_authority&>(tokens)), lifespan_(lifespan) {}
  void on_open(const std::shared_ptr<daemon::connection>&) override {}
  void on_close(const std::shared_ptr<daemon::connection>&) override {}
  std::optional<std::string> tcp_key(protocol::peer_role, std::optional<std::int64_t>) override { return std::nullopt; }
  void on_message(const std::shared_ptr<daemon::connection>& c, protocol::message m) override {
    const auto& p = c->peer();
    const auto now_us = std::chrono::duration_cast<std::chrono::microseconds>(
                            std::chrono::system_clock::now().time_since_epoch()).count();
    if (const auto* t = std::get_if<protocol::issue_token>(&m)) {
      if (!daemon::may_get_token(p)) {
        c->send(protocol::error{t->id, protocol::error_code::permission_denied, "tokens are issued over the Unix socket"});
        return;
      }
      const auto uid = static_cast<std::int64_t>(*p.uid);
      protocol::token_reply r;
      r.user = daemon::user_name_of(uid);
      r.uid = uid;
      auto [token, claims] = tokens_.issue(uid, r.user, t->lifespan_s.value_or(lifespan_), now_us);
      r.token = std::move(token);
      r.token_id = claims.id;
      r.expires_at = claims.expires_at;
      logging::info("token {} issued to {} (uid {})", claims.id, r.user, uid);
      c->send(protocol::make_ok(t->id, r));
      return;
    }
    if (const auto* t = std::get_if<protocol::revoke_token>(&m)) {
      if (!daemon::may_get_token(p)) {
        c->send(protocol::error{t->id, protocol::error_code::permission_denied, "tokens are revoked over the Unix socket"});
        return;
      }
      const auto uid = static_cast<std::int64_t>(*p.uid);
      if (t->all) {
        tokens_.revoke_all(uid, now_us);
      } else {
        tokens_.revoke(uid == 0 ? std::nullopt : std::optional<std::int64_t>(uid), *t->token_id, now_us);
      }
      c->send(protocol::ok{t->id, {}});
      return;
    }
    if (const auto id = protocol::id_of(m)) {
      c->send(protocol::error{*id, protocol::error_code::bad_request,
                              "faucetsd's socket only issues tokens; submit through its HTTP API (fsub --faucets URL)"});
    }
  }

private:
  daemon::token_authority& tokens_;
  std::int64_t lifespan_;
};

// "NAME KEYFILE" per line; relative key files are relative to the table.
std::map<std::string, std::string> load_clusters(const std::filesystem::path& file) {
  std::map<std::string, std::string> out;
  for (const auto& row : faucets::parse_word_table(faucets::read_text_file(file, "cluster table"), file.string(), 2,
                                                   "CLUSTER KEYFILE")) {
    std::filesystem::path k(row[1]);
    if (k.is_relative()) k = file.parent_path() / k;
    out[row[0]] = faucets::read_key_file(k);
  }
  if (out.empty()) throw std::runtime_error("the cluster table " + file.string() + " names no cluster");
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"faucetsd: the Faucets server in front of several AQS clusters"};
  std::string state_dir_text, db, listen = "0.0.0.0:7878", http, cert, key, clusters_file, users_file, socket_path;
  std::string policy = "earliest-start", log_level;
  double cluster_timeout_s = 60;
  std::uint64_t seed = 0;
  bool foreground = false, http_plain = false;
  std::int64_t token_lifespan = daemon::token_authority::k_default_lifespan_s;
  faucets::server_limits limits;
  app.add_option("--state-dir", state_dir_text, "holds the token key, the socket and the private database")->required();
  app.add_option("--db", db, "PostgreSQL connection string (default: a private server under --state-dir)");
  app.add_option("--listen", listen, "HOST:PORT where clusters connect over TLS (default 0.0.0.0:7878; port 0: any)");
  app.add_option("--cert", cert, "the server's TLS certificate chain (PEM)")->required()->check(CLI::ExistingFile);
  app.add_option("--key", key, "the server's TLS private key (PEM)")->required()->check(CLI::ExistingFile);
  app.add_option("--clusters", clusters_file, "the clusters that may connect: \"NAME KEYFILE\" per line")
      ->required()
      ->check(CLI::ExistingFile);
  app.add_option("--users", users_file, "who runs as whom where: \"SERVER_USER CLUSTER LOCAL_USER\" per line")
      ->required()
      ->check(CLI::ExistingFile);
  app.add_option("--http", http, "HOST:PORT of the users' HTTP API (HTTPS with --cert/--key)");
  app.add_flag("--http-plain", http_plain, "plain HTTP for --http (refused unless on loopback)");
  app.add_option("--socket", socket_path, "Unix socket where users get tokens (default STATE_DIR/faucetsd.sock)");
  app.add_option("--policy", policy, "broker policy: " + [] {
    std::string names;
    for (const auto n : faucets::broker_names()) names += (names.empty() ? "" : ", ") + std::string(n);
    return names;
  }() + " (default earliest-start)");
  app.add_option("--cluster-timeout", cluster_timeout_s,
                 "seconds a cluster may be unreachable before its queued jobs go elsewhere (default 60)")
      ->check(CLI::Range(1.0, 86400.0));
  app.add_option("--seed", seed, "seed of the random policy (default: from the clock)");
  app.add_option("--token-lifespan", token_lifespan, "seconds a token lasts unless it asks (default 3600)");
  // Limits (docs/security.md "Limits: faucetsd"): what one peer, address or
  // user may hold on each port, declared once in conn_limits.cpp.
  std::vector<core::setting> settings = faucets::server_limit_settings(limits);
  for (auto& l : settings) app.add_option(std::string(l.flag), l.typed, core::setting_help(l));
  app.add_flag("--foreground", foreground, "accepted for symmetry with aqsd: faucetsd always stays attached");
  app.add_option("--log-level", log_level, "debug, info, warning or error (default info, or $AQS_LOG_LEVEL)");
  CLI11_PARSE(app, argc, argv);
  if (const auto why = core::apply_typed_flags(settings)) {
    std::fprintf(stderr, "faucetsd: %s\n", why->c_str());
    return 2;
  }
  logging::set_program("faucetsd");
  daemon::service_notifier service;  // systemd (Type=notify), out of the children's environment
  try {
    faucets::make_broker(policy);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "faucetsd: %s\n", e.what());
    return 2;
  }
  if (!log_level.empty()) {
    const auto l = logging::parse_level(log_level);
    if (!l) {
      std::fprintf(stderr, "faucetsd: --log-level must be debug, info, warning or error\n");
      return 2;
    }
    logging::set_level(*l);
  }
  ::signal(SIGPIPE, SIG_IGN);
  int rc = 0;
  try {
    const daemon::state_dir dir{std::filesystem::absolute(state_dir_text)};
    dir.prepare();
    faucets::server_options o;
    o.listen = listen;
    o.cert = cert;
    o.key = key;
    if (!http.empty()) o.http = http;
    o.http_tls = !http_plain;
    o.cluster_keys = load_clusters(clusters_file);
    o.users = faucets::user_map::load(users_file);
    o.policy = policy;
    o.seed = seed;
    o.cluster_timeout = std::chrono::seconds(static_cast<long>(cluster_timeout_s + 0.5));
    o.token_key = dir.load_or_create_key();
    o.revoked_tokens = dir.revoked_tokens_file();
    limits.max_bodies_in_flight = std::max(limits.max_bodies_in_flight, limits.max_job_body);
    // The caps together must fit in the descriptors this process may open,
    // or a flood would use them up (and with them the store's and the log's).
    if (rlimit nofile{}; ::getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur != RLIM_INFINITY) {
      if (const auto note = limits.fit_descriptors(nofile.rlim_cur)) logging::warn("{}", *note);
    }
    o.limits = limits;

    std::unique_ptr<store::pg_server> pg;
    std::string conninfo = db;
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
    token_desk desk(srv.tokens(), token_lifespan);
    daemon::server_options sopts;
    sopts.unix_socket = socket_path.empty() ? dir.root / "faucetsd.sock" : std::filesystem::path(socket_path);
    sopts.max_connections = limits.socket_max_connections;
    sopts.max_connections_per_user = limits.socket_max_per_user;
    sopts.handshake_timeout = limits.handshake_timeout;
    daemon::server unix_front(io, sopts, desk);
    unix_front.start();
    srv.start();
    const auto colon = listen.rfind(':');
    daemon::state_dir::write_file(dir.root / "faucetsd.addr",
                                  listen.substr(0, colon) + ":" + std::to_string(srv.cluster_port()) + "\n", 0644);
    if (o.http) {
      const auto hc = http.rfind(':');
      daemon::state_dir::write_file(dir.root / "faucetsd.http",
                                    std::string(o.http_tls ? "https://" : "http://") + http.substr(0, hc) + ":" +
                                        std::to_string(srv.http_port()) + "\n",
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
    logging::info("Faucets server: clusters on {}:{}{}, policy {}, {} clusters known", listen.substr(0, colon),
                  srv.cluster_port(), o.http ? ", users on " + http.substr(0, http.rfind(':')) + ":" + std::to_string(srv.http_port()) : "",
                  policy, o.cluster_keys.size());
    service.ready(io, "serving");
    io.run();
    service.stopping();
    if (supervisor) supervisor->stop();
    if (pg) pg->stop();
    logging::info("stopped");
  } catch (const std::exception& e) {
    logging::error("cannot start: {}", e.what());
    std::fprintf(stderr, "faucetsd: %s\n", e.what());
    rc = 1;
  }
  return rc;
}
