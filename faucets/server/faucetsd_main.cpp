// faucetsd: the Faucets server. Users submit to it; it places each job on
// the cluster its broker policy picks among the AQS clusters connected to
// it over TLS, follows it to its end, and sends a lost cluster's queued jobs
// elsewhere. Runs in the foreground (a service manager keeps it), or with
// --daemon detaches itself and keeps a pid file. This file only reads the
// configuration and assembles the parts (faucets_server.hpp); run as
// `faucetsd --broker-plugin-host ...` it is the host of one shared-library
// broker plugin (plugin_host.hpp).
#include <climits>
#include <csignal>
#include <cstdio>
#include <fcntl.h>
#include <fstream>
#include <functional>
#include <memory>
#include <set>
#include <string_view>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>

#include "broker/broker.hpp"
#include "broker/plugin_host.hpp"
#include "daemon_base/server.hpp"
#include "daemon_base/service_notify.hpp"
#include "daemon_base/state_dir.hpp"
#include "logging/log.hpp"
#include "protocol/staged_files.hpp"
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
  std::string plugin_dir, job_plugins, pid_file, log_file;
  double cluster_timeout_s = 60, plugin_timeout_s = 5;
  std::size_t stage_max_bytes = protocol::k_default_stage_max_bytes;
  std::uint64_t seed = 0;
  bool foreground = false, http_plain = false, daemonize = false;
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
  app.add_option("--policy", c.policy,
                 "broker policy: " + names + ", or plugin:NAME from --plugin-dir (default earliest-start)");
  app.add_option("--plugin-dir", c.plugin_dir,
                 "the directory of broker plugins (NAME: a program, NAME.so: a library); the only place they are looked up");
  app.add_option("--allow-job-plugins", c.job_plugins,
                 "NAME,...: the plugins a submission may choose for its own job (fsub -M --broker NAME)");
  app.add_option("--plugin-timeout", c.plugin_timeout_s,
                 "seconds a broker plugin may take for one job before it is killed and the default decides (default 5)")
      ->check(CLI::Range(0.1, 300.0));
  app.add_option("--cluster-timeout", c.cluster_timeout_s,
                 "seconds a cluster may be unreachable before its queued jobs go elsewhere (default 60)")
      ->check(CLI::Range(1.0, 86400.0));
  app.add_option("--stage-max-bytes", c.stage_max_bytes,
                 "the most a job may stage in with fsub -M --stage-in, and bring back, in bytes (default " +
                     std::to_string(protocol::k_default_stage_max_bytes) + ")")
      ->check(CLI::Range(std::size_t{0}, protocol::k_max_stage_bytes));
  app.add_option("--seed", c.seed, "seed of the random policy (default: from the clock)");
  app.add_option("--token-lifespan", c.token_lifespan, "seconds a token lasts unless it asks (default 3600)");
  // Limits (docs/security.md "Limits: faucetsd"): what one peer, address or
  // user may hold on each port, declared once in conn_limits.cpp.
  settings = faucets::server_limit_settings(c.limits);
  for (auto& l : settings) app.add_option(std::string(l.flag), l.typed, core::setting_help(l));
  app.add_flag("--foreground", c.foreground, "stay attached (the default; for symmetry with aqsd)");
  app.add_flag("--daemon", c.daemonize,
               "detach from the terminal once serving (log to --log-file); exits 1 with the reason if it cannot start");
  app.add_option("--pid-file", c.pid_file, "where the pid is kept while running (default STATE_DIR/faucetsd.pid)");
  app.add_option("--log-file", c.log_file, "the log with --daemon (default STATE_DIR/faucetsd.log)");
  app.add_option("--log-level", c.log_level, "debug, info, warning or error (default info, or $AQS_LOG_LEVEL)");
}

// Why the flags cannot work (one line), or nullopt; sets the log level.
// The plugins named in --allow-job-plugins.
std::set<std::string> job_plugin_names(const std::string& list) {
  std::set<std::string> out;
  std::size_t at = 0;
  while (at <= list.size()) {
    const std::size_t comma = std::min(list.find(',', at), list.size());
    std::string n = list.substr(at, comma - at);
    if (const auto p = faucets::plugin_name_of(n)) n = *p;
    if (!n.empty()) out.insert(n);
    at = comma + 1;
  }
  return out;
}

std::filesystem::path self_exe() {
  char buf[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return {};
  return std::string(buf, static_cast<std::size_t>(n));
}

faucets::plugin_options plugin_options_of(const config& c) {
  faucets::plugin_options p;
  if (!c.plugin_dir.empty()) p.dir = std::filesystem::absolute(c.plugin_dir);
  p.limits.time_limit = std::chrono::milliseconds(static_cast<long>(c.plugin_timeout_s * 1000 + 0.5));
  p.library_host = self_exe();
  return p;
}

// The pid file and the log: flags or the state directory's defaults.
std::filesystem::path pid_file_of(const config& c) {
  return std::filesystem::absolute(c.pid_file.empty() ? std::filesystem::path(c.state_dir) / "faucetsd.pid" : std::filesystem::path(c.pid_file));
}

// Why another faucetsd holds `pid_file`, or nullopt (absent, stale, or a pid
// that now names some other program).
std::optional<std::string> live_owner(const std::filesystem::path& pid_file) {
  std::ifstream in(pid_file);
  long pid = 0;
  if (!(in >> pid) || pid <= 1 || pid == ::getpid()) return std::nullopt;
  if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno != EPERM) return std::nullopt;
  std::ifstream comm("/proc/" + std::to_string(pid) + "/comm");
  std::string name;
  std::getline(comm, name);
  if (name != "faucetsd") return std::nullopt;
  return "faucetsd is already running as pid " + std::to_string(pid) + " (" + pid_file.string() + ")";
}

std::optional<std::string> check(const config& c) {
  if (const auto plugin = faucets::plugin_name_of(c.policy)) {
    if (c.plugin_dir.empty()) return "--policy " + c.policy + " needs --plugin-dir DIR (where plugins are looked up)";
  } else {
    try {
      faucets::make_broker(c.policy);
    } catch (const std::exception& e) {
      return e.what();
    }
  }
  const auto allowed = job_plugin_names(c.job_plugins);
  if (!allowed.empty() && c.plugin_dir.empty()) return "--allow-job-plugins needs --plugin-dir DIR";
  if (!c.plugin_dir.empty()) {
    // Every plugin named is found and safe now, not at the first job.
    const faucets::plugin_host host(plugin_options_of(c));
    std::vector<std::string> names(allowed.begin(), allowed.end());
    if (const auto plugin = faucets::plugin_name_of(c.policy)) names.insert(names.begin(), *plugin);
    for (const auto& n : names) {
      try {
        host.check(n);
      } catch (const std::exception& e) {
        return e.what();
      }
    }
  }
  if (c.daemonize && c.foreground) return "--daemon and --foreground contradict each other: give one";
  if (const auto why = live_owner(pid_file_of(c))) return why;
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
  if (!c.plugin_dir.empty()) o.plugins = std::make_shared<const faucets::plugin_host>(plugin_options_of(c));
  o.job_plugins = job_plugin_names(c.job_plugins);
  o.cluster_timeout = std::chrono::seconds(static_cast<long>(c.cluster_timeout_s + 0.5));
  o.stage_max_bytes = c.stage_max_bytes;
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

// The pid file, removed at exit while it still names this process.
class pid_file_guard {
public:
  explicit pid_file_guard(std::filesystem::path p) : path_(std::move(p)) {
    if (const auto why = live_owner(path_)) throw std::runtime_error(*why);
    daemon::state_dir::write_file(path_, std::to_string(::getpid()) + "\n", 0644);  // atomically: a temporary file renamed
  }
  ~pid_file_guard() {
    std::ifstream in(path_);
    long pid = 0;
    if (in >> pid && pid == ::getpid()) {
      std::error_code ec;
      std::filesystem::remove(path_, ec);
    }
  }
  pid_file_guard(const pid_file_guard&) = delete;
  pid_file_guard& operator=(const pid_file_guard&) = delete;

private:
  std::filesystem::path path_;
};

// --daemon: the parent waits on this pipe for "0" (serving) or "1why" and
// exits with it; the child is detached by a second fork after setsid (never
// a session leader: it cannot get a terminal again).
struct detach_result {
  int ready_fd = -1;
};

[[noreturn]] void wait_for_child(int fd, const std::filesystem::path& log_file) {
  std::string got;
  char buf[512];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) != 0;) {
    if (n < 0) {
      if (errno == EINTR) continue;
      break;
    }
    got.append(buf, static_cast<std::size_t>(n));
  }
  if (!got.empty() && got[0] == '0') ::_exit(0);
  if (got.size() > 1) {
    std::fprintf(stderr, "faucetsd: %s\n", got.substr(1).c_str());
  } else {
    std::fprintf(stderr, "faucetsd: exited while starting (see %s)\n", log_file.c_str());
  }
  ::_exit(1);
}

int detach(const std::filesystem::path& log_file) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("cannot make a pipe");
  const pid_t first = ::fork();
  if (first < 0) throw std::runtime_error("cannot fork");
  if (first > 0) {
    ::close(fds[1]);
    ::waitpid(first, nullptr, 0);
    wait_for_child(fds[0], log_file);
  }
  ::close(fds[0]);
  ::setsid();
  const pid_t second = ::fork();
  if (second < 0) ::_exit(1);
  if (second > 0) ::_exit(0);
  ::umask(022);
  if (::chdir("/") != 0) {
    // Cannot happen in practice; the paths are absolute anyway.
  }
  const int log_fd = ::open(log_file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
  if (log_fd < 0) {
    const std::string why = "1cannot open the log " + log_file.string();
    (void)!::write(fds[1], why.data(), why.size());
    ::_exit(1);
  }
  const int null_fd = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  ::dup2(null_fd, STDIN_FILENO);
  ::dup2(log_fd, STDOUT_FILENO);
  ::dup2(log_fd, STDERR_FILENO);
  ::close(null_fd);
  ::close(log_fd);
  return fds[1];
}

// Every path made absolute: a daemon runs in /.
void absolutize(config& c) {
  for (std::string* p : {&c.state_dir, &c.cert, &c.key, &c.clusters_file, &c.users_file, &c.socket_path, &c.plugin_dir,
                         &c.pid_file, &c.log_file}) {
    if (!p->empty()) *p = std::filesystem::absolute(*p).string();
  }
}

void run(config& c, daemon::service_notifier& service, const std::function<void()>& serving) {
  const daemon::state_dir dir{std::filesystem::absolute(c.state_dir)};
  dir.prepare();
  const pid_file_guard pid_file(pid_file_of(c));
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
  serving();
  service.ready(io, "serving");
  io.run();
  service.stopping();
  if (supervisor) supervisor->stop();
  if (pg) pg->stop();
  logging::info("stopped");
}

}  // namespace

int main(int argc, char** argv) {
  // A child of faucetsd's that hosts one library plugin (plugin_host.hpp).
  if (argc >= 2 && std::string_view(argv[1]) == "--broker-plugin-host") return faucets::run_library_host(argc, argv);
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
  int ready_fd = -1;
  if (c.daemonize) {
    absolutize(c);
    const std::filesystem::path log_file = c.log_file.empty() ? std::filesystem::path(c.state_dir) / "faucetsd.log" : std::filesystem::path(c.log_file);
    try {
      std::filesystem::create_directories(c.state_dir);
      ready_fd = detach(log_file);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "faucetsd: %s\n", e.what());
      return 1;
    }
  }
  auto report = [&](const std::string& what) {
    if (ready_fd < 0) return;
    (void)!::write(ready_fd, what.data(), what.size());
    ::close(ready_fd);
    ready_fd = -1;
  };
  ::signal(SIGPIPE, SIG_IGN);
  try {
    run(c, service, [&] { report("0"); });
  } catch (const std::exception& e) {
    logging::error("cannot start: {}", e.what());
    if (ready_fd >= 0) {
      const std::string why = e.what();  // PostgreSQL's run over several lines: the first, the log has all
      report("1" + why.substr(0, why.find('\n')));
    } else if (!c.daemonize) {
      std::fprintf(stderr, "faucetsd: %s\n", e.what());
    }
    return 1;
  }
  return 0;
}
