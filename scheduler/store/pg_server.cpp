// pg_server: initdb, start, readiness and shutdown of a private PostgreSQL.
#include "store/pg_server.hpp"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <memory>
#include <grp.h>
#include <libpq-fe.h>
#include <pwd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace aqs::store {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace {

// Who the server runs as: ourselves, or `postgres` when we are root.
struct identity {
  bool switch_user = false;
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;
};

identity server_identity() {
  identity id;
  if (geteuid() != 0) return id;
  passwd* pw = getpwnam("postgres");
  if (pw == nullptr) {
    throw pg_server_error("running as root, but there is no 'postgres' user to run PostgreSQL as "
                          "(install the postgresql package)");
  }
  id.switch_user = true;
  id.uid = pw->pw_uid;
  id.gid = pw->pw_gid;
  int n = 64;
  id.groups.resize(static_cast<std::size_t>(n));
  while (getgrouplist(pw->pw_name, pw->pw_gid, id.groups.data(), &n) == -1) {
    id.groups.resize(static_cast<std::size_t>(n));
  }
  id.groups.resize(static_cast<std::size_t>(n));
  return id;
}

std::string tail_of(const fs::path& file, std::size_t max_lines = 5) {
  std::ifstream in(file);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    lines.push_back(line);
    if (lines.size() > max_lines) lines.erase(lines.begin());
  }
  std::string out;
  for (auto& l : lines) out += (out.empty() ? "" : " | ") + l;
  return out;
}

// Starts argv as the server identity with stdout/stderr appended to log.
// Everything the child needs is prepared before fork: after fork in a
// threaded process only async-signal-safe calls are allowed.
pid_t spawn(const std::vector<std::string>& args, const fs::path& log, const fs::path& cwd,
            const identity& id, bool new_session) {
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  int log_fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (log_fd < 0) throw pg_server_error("cannot open " + log.string() + ": " + std::strerror(errno));
  if (id.switch_user && ::fchown(log_fd, id.uid, id.gid) != 0) {
    ::close(log_fd);
    throw pg_server_error("cannot chown " + log.string() + ": " + std::strerror(errno));
  }
  int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  std::string cwd_s = cwd.string();
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(log_fd);
    ::close(null_fd);
    throw pg_server_error(std::string("fork failed: ") + std::strerror(errno));
  }
  if (pid == 0) {
    auto fail = [&](const char* what) {  // fd 2 is the log by then
      const char* err = std::strerror(errno);
      (void)!::write(2, what, std::strlen(what));
      (void)!::write(2, ": ", 2);
      (void)!::write(2, err, std::strlen(err));
      (void)!::write(2, "\n", 1);
      ::_exit(127);
    };
    if (new_session) ::setsid();
    ::dup2(null_fd, 0);
    ::dup2(log_fd, 1);
    ::dup2(log_fd, 2);
    // The server must not inherit aqsd's sockets (Asio's are not
    // close-on-exec): it would keep clients' connections open.
    ::close_range(3, ~0U, 0);
    // Reset what the parent may have changed (a daemon ignores SIGPIPE).
    ::signal(SIGPIPE, SIG_DFL);
    ::signal(SIGINT, SIG_DFL);
    ::signal(SIGTERM, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    if (id.switch_user) {
      if (::setgroups(id.groups.size(), id.groups.data()) != 0) fail("setgroups");
      if (::setgid(id.gid) != 0) fail("setgid");
      if (::setuid(id.uid) != 0) fail("setuid");
    }
    if (::chdir(cwd_s.c_str()) != 0) fail("chdir");
    ::execv(argv[0], argv.data());
    fail(argv[0]);
  }
  ::close(log_fd);
  ::close(null_fd);
  return pid;
}

bool process_alive(pid_t pid) {
  return pid > 0 && (::kill(pid, 0) == 0 || errno == EPERM);
}

// Reaps our child if it has exited; returns true if it is gone.
bool reap(pid_t child, int* status = nullptr) {
  int st = 0;
  pid_t r = ::waitpid(child, &st, WNOHANG);
  if (r == child) {
    if (status) *status = st;
    return true;
  }
  return r < 0 && errno == ECHILD && !process_alive(child);
}

// libpq's messages end in a newline and may span lines: one line for errors.
std::string one_line(std::string text) {
  for (char& c : text) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  while (!text.empty() && text.back() == ' ') text.pop_back();
  return text;
}

}  // namespace

std::string describe_wait_status(int st) {
  if (WIFEXITED(st)) return "exited with status " + std::to_string(WEXITSTATUS(st));
  if (WIFSIGNALED(st)) return std::string("killed by signal ") + strsignal(WTERMSIG(st));
  return "stopped";
}

std::optional<int> pg_server::reap_exited() {
  if (child_ <= 0) return std::nullopt;
  int st = 0;
  const pid_t r = ::waitpid(child_, &st, WNOHANG);
  if (r == child_) {
    child_ = 0;
    return st;
  }
  return std::nullopt;
}

std::string conninfo_quote(std::string_view value) {
  std::string out = "'";
  for (char c : value) {
    if (c == '\'' || c == '\\') out += '\\';
    out += c;
  }
  return out + "'";
}

fs::path find_pg_bindir() {
  if (const char* env = std::getenv("AQS_PG_BINDIR"); env != nullptr && *env != '\0') {
    fs::path p(env);
    if (!fs::exists(p / "postgres")) {
      throw pg_server_error("AQS_PG_BINDIR=" + p.string() + " holds no 'postgres' binary");
    }
    return p;
  }
  fs::path best;
  int best_version = -1;
  std::error_code ec;
  for (auto& entry : fs::directory_iterator("/usr/lib/postgresql", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || !std::all_of(name.begin(), name.end(), ::isdigit)) continue;
    if (!fs::exists(entry.path() / "bin" / "initdb")) continue;
    int v = std::stoi(name);
    if (v > best_version) {
      best_version = v;
      best = entry.path() / "bin";
    }
  }
  if (best.empty()) {
    throw pg_server_error("PostgreSQL server binaries not found in /usr/lib/postgresql/*/bin "
                          "(install the postgresql package or set AQS_PG_BINDIR)");
  }
  return best;
}

pg_server::pg_server(pg_server_options options) : options_(std::move(options)) {
  if (options_.dir.empty()) throw pg_server_error("pg_server: no directory given");
  options_.dir = fs::absolute(options_.dir).lexically_normal();
  // The socket path must fit sockaddr_un (108 bytes with the terminator).
  auto socket_path = (options_.dir / (".s.PGSQL." + std::to_string(options_.port))).string();
  if (socket_path.size() > 107) {
    throw pg_server_error("the directory path is too long for a Unix socket: " + socket_path);
  }
}

pg_server::~pg_server() {
  if (!options_.stop_on_destroy) return;
  try {
    stop();
  } catch (...) {
    // A destructor cannot report; stop() already tried SIGKILL.
  }
}

std::string pg_server::connection_string(std::string_view dbname) const {
  return "host=" + conninfo_quote(options_.dir.string()) + " port=" + std::to_string(options_.port) +
         " user=postgres dbname=" + conninfo_quote(dbname);
}

std::string pg_server::ensure_database(std::string_view name) const {
  const std::string info = connection_string("postgres");
  std::unique_ptr<PGconn, decltype(&PQfinish)> conn(PQconnectdb(info.c_str()), &PQfinish);
  if (!conn || PQstatus(conn.get()) != CONNECTION_OK) {
    throw std::runtime_error("cannot reach the private PostgreSQL: " +
                             one_line(conn ? PQerrorMessage(conn.get()) : "out of memory"));
  }
  const std::string db(name);
  const char* params[] = {db.c_str()};
  using result_ptr = std::unique_ptr<PGresult, decltype(&PQclear)>;
  result_ptr found(PQexecParams(conn.get(), "SELECT 1 FROM pg_database WHERE datname = $1", 1, nullptr, params,
                                nullptr, nullptr, 0),
                   &PQclear);
  if (PQresultStatus(found.get()) != PGRES_TUPLES_OK) {
    throw std::runtime_error("cannot look up database " + db + ": " + one_line(PQerrorMessage(conn.get())));
  }
  if (PQntuples(found.get()) == 0) {
    std::unique_ptr<char, decltype(&PQfreemem)> quoted(PQescapeIdentifier(conn.get(), db.data(), db.size()),
                                                       &PQfreemem);
    if (!quoted) throw std::runtime_error("cannot quote database name " + db);
    result_ptr created(PQexec(conn.get(), (std::string("CREATE DATABASE ") + quoted.get()).c_str()), &PQclear);
    if (PQresultStatus(created.get()) != PGRES_COMMAND_OK) {
      throw std::runtime_error("cannot create database " + db + ": " + one_line(PQerrorMessage(conn.get())));
    }
  }
  return connection_string(name);
}

bool pg_server::ready() const {
  std::string info = connection_string("postgres") + " connect_timeout=2";
  return PQping(info.c_str()) == PQPING_OK;
}

pid_t pg_server::running_pid() const {
  std::ifstream in(data_dir() / "postmaster.pid");
  long pid = 0;
  if (!(in >> pid) || pid <= 0 || !process_alive(static_cast<pid_t>(pid))) return 0;
  // After a host crash the pid in a stale postmaster.pid may belong to any
  // process by now: only a postgres serving this very data directory counts.
  std::ifstream cmd("/proc/" + std::to_string(pid) + "/cmdline", std::ios::binary);
  std::vector<std::string> args;
  for (std::string a; std::getline(cmd, a, '\0');) args.push_back(a);
  const std::string data = data_dir().string();
  const bool is_postgres = !args.empty() && fs::path(args[0]).filename() == "postgres";
  const bool serves_ours = std::find(args.begin(), args.end(), data) != args.end();
  return is_postgres && serves_ours ? static_cast<pid_t>(pid) : 0;
}

void pg_server::init_cluster() {
  const identity id = server_identity();
  std::error_code ec;
  fs::create_directories(options_.dir, ec);
  if (ec) throw pg_server_error("cannot create " + options_.dir.string() + ": " + ec.message());
  if (id.switch_user && ::chown(options_.dir.c_str(), id.uid, id.gid) != 0) {
    throw pg_server_error("cannot chown " + options_.dir.string() + ": " + std::strerror(errno));
  }
  ::chmod(options_.dir.c_str(), 0700);
  if (fs::exists(data_dir() / "PG_VERSION")) return;
  // A data directory without PG_VERSION is an initdb that was interrupted.
  fs::remove_all(data_dir(), ec);
  const fs::path bindir = find_pg_bindir();
  std::vector<std::string> args = {(bindir / "initdb").string(), "-D", data_dir().string(),
                                   "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-locale"};
  if (!options_.durable) args.push_back("--no-sync");
  const fs::path log = options_.dir / "initdb.log";
  pid_t pid = spawn(args, log, options_.dir, id, false);
  int st = 0;
  while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    throw pg_server_error("initdb " + describe_wait_status(st) + " (see " + log.string() + "): " + tail_of(log));
  }
}

void pg_server::start(const std::atomic<bool>* cancel) {
  if (running_pid() != 0 && ready()) return;  // adopt the server already running here
  init_cluster();
  const identity id = server_identity();
  const fs::path bindir = find_pg_bindir();
  std::vector<std::string> args = {(bindir / "postgres").string(),
                                   "-D", data_dir().string(),
                                   "-k", options_.dir.string(),
                                   "-p", std::to_string(options_.port),
                                   "-c", "listen_addresses=",
                                   "-c", "unix_socket_permissions=0700"};
  if (!options_.durable) {
    args.insert(args.end(), {"-c", "fsync=off", "-c", "full_page_writes=off"});
  }
  child_ = spawn(args, log_file(), options_.dir, id, true);
  const auto deadline = std::chrono::steady_clock::now() + options_.start_timeout;
  while (!ready()) {
    int st = 0;
    if (reap(child_, &st)) {
      child_ = 0;
      throw pg_server_error("PostgreSQL " + describe_wait_status(st) + " while starting (see " +
                            log_file().string() + "): " + tail_of(log_file()));
    }
    if (cancel && *cancel) throw pg_server_error("PostgreSQL start abandoned: we are stopping");
    if (std::chrono::steady_clock::now() > deadline) {
      stop();
      throw pg_server_error("PostgreSQL did not accept connections within " +
                            std::to_string(options_.start_timeout.count()) + " ms (see " +
                            log_file().string() + "): " + tail_of(log_file()));
    }
    std::this_thread::sleep_for(20ms);
  }
}

void pg_server::stop() { shut_down(SIGINT); }

void pg_server::crash() { shut_down(SIGQUIT); }

void pg_server::shut_down(int first_signal) {
  pid_t pid = running_pid();
  if (pid == 0) pid = child_;
  if (pid == 0 || (pid != child_ && !process_alive(pid))) {
    child_ = 0;
    return;
  }
  auto gone = [&] { return pid == child_ ? reap(pid) : !process_alive(pid); };
  auto wait_gone = [&](std::chrono::milliseconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (!gone()) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(10ms);
    }
    return true;
  };
  // SIGINT: fast shutdown (roll back sessions, checkpoint, exit). SIGQUIT:
  // immediate shutdown, crash recovery at the next start. Then SIGKILL.
  ::kill(pid, first_signal);
  bool stopped = wait_gone(options_.stop_timeout);
  if (!stopped && first_signal != SIGQUIT) {
    ::kill(pid, SIGQUIT);
    stopped = wait_gone(5s);
  }
  if (!stopped) {
    ::kill(pid, SIGKILL);
    stopped = wait_gone(5s);
  }
  child_ = 0;
  if (!stopped) throw pg_server_error("PostgreSQL (pid " + std::to_string(pid) + ") would not stop");
}

}  // namespace aqs::store
