// aqsd: the AQS scheduler daemon. Reads its configuration (aqsd_options),
// prepares the state directory and the database (a private PostgreSQL unless
// --db is given), assembles the parts (store, controller, socket server,
// HTTP front, Faucets uplink), recovers, and serves until SIGTERM/SIGINT or a
// root `shutdown` request.
#include <chrono>
#include <csignal>
#include <cstdio>
#include <fcntl.h>
#include <filesystem>
#include <functional>
#include <memory>
#include <sys/resource.h>
#include <thread>
#include <unistd.h>
#include <variant>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <pqxx/pqxx>

#include "daemon/aqsd_options.hpp"
#include "daemon/controller.hpp"
#include "daemon/faucets_uplink.hpp"
#include "daemon_base/cpu_priority.hpp"
#include "daemon_base/server.hpp"
#include "daemon_base/service_notify.hpp"
#include "daemon_base/state_dir.hpp"
#include "http/http_server.hpp"
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

}  // namespace

int main(int argc, char** argv) {
  auto parsed = daemon::parse_aqsd_options(argc, argv);
  if (const int* code = std::get_if<int>(&parsed)) return *code;
  daemon::aqsd_options& opts = std::get<daemon::aqsd_options>(parsed);
  logging::set_program("aqsd");
  // systemd (Type=notify): taken out of the environment before any child starts.
  daemon::service_notifier service;
  if (!opts.log_level.empty()) logging::set_level(*logging::parse_level(opts.log_level));
  const unsigned threads = opts.threads;
  const std::string& listen = opts.listen;
  daemon::server_options& sopts = opts.server;
  http::http_options& hopts = opts.http;
  std::optional<daemon::uplink_options>& uplink_opts = opts.uplink;

  const daemon::state_dir dir{std::filesystem::absolute(opts.state_dir)};
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
    if (!opts.foreground) {
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
  // Before any thread (and the private PostgreSQL) starts: they inherit it.
  std::string cpu_claim;
  if (opts.nice) {
    try {
      cpu_claim = daemon::apply_cpu_nice(*opts.nice);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "aqsd: %s\n", e.what());
      report_ready(1);
      return 1;
    }
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
    if (!cpu_claim.empty()) logging::info("CPU priority: {}", cpu_claim);
    const std::string key = dir.load_or_create_key();
    std::unique_ptr<store::pg_server> pg;
    std::string conninfo = opts.db;
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
    daemon::controller_options copts = opts.controller;
    copts.cluster_key = key;
    copts.revoked_tokens_file = dir.revoked_tokens_file();
    copts.accounting.conninfo = conninfo;  // accounts and usage beside the jobs
    if (copts.partitions.configured) logging::info("partitions: {}", copts.partitions.names());
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
    // A stall of the event loop is logged with its cause (a node agent
    // fences its jobs when its heartbeats go unanswered): the scheduling
    // strand, and the io threads alone (the sessions' handlers).
    const daemon::loop_watch::options watch{.threshold = opts.stall_warning};
    ctl.watch_strand(watch);
    daemon::loop_watch::options io_watch_options = watch;
    io_watch_options.own_lateness = false;  // the strand's watch says it
    daemon::loop_watch io_watch("the io threads", io.get_executor(), io_watch_options);
    io_watch.start();
    ctl.recover();

    sopts.unix_socket = opts.socket.empty() ? dir.socket() : std::filesystem::path(opts.socket);
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
    const std::string faucets_server = uplink_opts ? uplink_opts->server + " as cluster '" + uplink_opts->cluster + "'" : "";
    if (uplink_opts && uplink_opts->stage_root.empty()) uplink_opts->stage_root = dir.root / "faucets-stage";
    if (uplink_opts) uplink = std::make_unique<daemon::faucets_uplink>(io, ctl, std::move(*uplink_opts));
    ctl.start();
    if (uplink) {
      uplink->start();
      logging::info("joining the Faucets server {}", faucets_server);
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
        auto fresh = daemon::reread_partitions(opts);
        if (auto* p = std::get_if<core::site_config>(&fresh)) {
          ctl.reload_partitions(std::move(*p));
        } else {
          logging::warn("SIGHUP: partitions not reloaded, keeping those in use: {}", std::get<std::string>(fresh));
        }
        on_hangup();
      });
    };
    on_hangup();
    logging::info("serving on {}{} with the {} policy (policy of {} threads)", sopts.unix_socket->string(),
                listen.empty() ? "" : " and " + listen.substr(0, listen.rfind(':')) + ":" + std::to_string(srv->tcp_port()),
                copts.policy, threads);
    report_ready(0);
    service.ready(io, "serving on " + sopts.unix_socket->string());
    std::vector<std::thread> pool;
    for (unsigned i = 1; i < threads; ++i) pool.emplace_back([&] { io.run(); });
    io.run();
    for (auto& t : pool) t.join();
    io_watch.stop();
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
    if (ready_fd < 0 || opts.foreground) std::fprintf(stderr, "aqsd: %s\n", e.what());
    report_ready(1);
    return 1;
  }
  return rc;
}
