// Interactive aqs-salloc (issue 33) over a pseudo-terminal, against a real
// aqsd and aqs-node: the user's shell gets the allocation's variables, srun
// typed into it runs in the allocation, Ctrl-C ends only the step, and the
// allocation ends with the shell, or when salloc is killed (aqsd's rule for
// an interactive job that lost its client). Another user cannot run steps
// in it.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <regex>
#include <string>

#include "e2e.hpp"
#include "run_users.hpp"

namespace {

fs::path slurm_dir() { return fs::path(AQS_SLURM_BIN_DIR); }

// Slurm's names (srun -> aqs-srun, ...) in a directory of the cluster's,
// as an installation with -DAQS_INSTALL_SLURM_NAMES=ON has them.
fs::path slurm_names(const test::cluster& c) {
  const fs::path bin = c.dir() / "slurm-names";
  fs::create_directories(bin);
  for (const char* n : {"srun", "salloc", "squeue", "sstat"}) {
    if (!fs::exists(fs::symlink_status(bin / n))) fs::create_symlink(slurm_dir() / (std::string("aqs-") + n), bin / n);
  }
  fs::permissions(bin, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec | fs::perms::others_read |
                           fs::perms::others_exec);
  return bin;
}

// aqs-salloc ARGS on a pseudo-terminal, as user u, with a shell of /bin/sh.
class pty_session {
public:
  pty_session(const test::cluster& c, const test::test_user& u, std::vector<std::string> args) {
    args.insert(args.begin(), (slurm_dir() / "aqs-salloc").string());
    const std::string path = slurm_names(c).string() + ":/usr/local/bin:/usr/bin:/bin";
    pid_ = ::forkpty(&master_, nullptr, nullptr, nullptr);
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      if (::setgroups(0, nullptr) != 0 || ::setgid(u.gid) != 0 || ::setuid(u.uid) != 0 || ::chdir(u.home.c_str()) != 0) _exit(120);
      ::clearenv();
      ::setenv("AQS_SOCKET", c.socket().c_str(), 1);
      ::setenv("PATH", path.c_str(), 1);
      ::setenv("SHELL", "/bin/sh", 1);
      ::setenv("HOME", u.home.c_str(), 1);
      ::setenv("PS1", "$ ", 1);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      _exit(127);
    }
    ::fcntl(master_, F_SETFL, ::fcntl(master_, F_GETFL) | O_NONBLOCK);
  }
  ~pty_session() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (master_ >= 0) ::close(master_);
  }
  pid_t pid() const { return pid_; }
  void type(const std::string& s) { REQUIRE(::write(master_, s.data(), s.size()) == static_cast<ssize_t>(s.size())); }
  // Reads until `re` matches what came since the last match; its text.
  // Waits for salloc's "Granted job allocation N": N.
  std::int64_t granted() {
    const std::string line = expect("salloc: Granted job allocation ([0-9]+)\r?\n");
    std::smatch m;
    REQUIRE(std::regex_search(line, m, std::regex("allocation ([0-9]+)")));
    return std::stoll(m[1]);
  }
  std::string expect(const std::string& re, std::chrono::seconds limit = 90s) {
    const auto until = std::chrono::steady_clock::now() + limit;
    std::smatch m;
    while (true) {
      if (std::regex_search(seen_, m, std::regex(re))) {
        const std::string upto = seen_.substr(0, static_cast<std::size_t>(m.position(0) + m.length(0)));
        seen_.erase(0, upto.size());
        return upto;
      }
      if (std::chrono::steady_clock::now() > until) {
        FAIL("no match for /" << re << "/ in:\n" << all_);
      }
      pollfd p{master_, POLLIN, 0};
      if (::poll(&p, 1, 200) > 0) {
        char buf[4096];
        const ssize_t n = ::read(master_, buf, sizeof buf);
        if (n > 0) {
          seen_.append(buf, static_cast<std::size_t>(n));
          all_.append(buf, static_cast<std::size_t>(n));
        }
      }
    }
  }
  // salloc's exit status (waits).
  int wait_exit(std::chrono::seconds limit = 60s) {
    const auto until = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < until) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      // Keep draining the terminal, or a full one blocks salloc.
      pollfd p{master_, POLLIN, 0};
      if (::poll(&p, 1, 100) > 0) {
        char buf[4096];
        const ssize_t n = ::read(master_, buf, sizeof buf);
        if (n > 0) all_.append(buf, static_cast<std::size_t>(n));
      }
    }
    FAIL("salloc did not exit:\n" << all_);
    return -1;
  }
  const std::string& all() const { return all_; }

private:
  int master_ = -1;
  pid_t pid_ = -1;
  std::string seen_, all_;
};

test::cluster::options two_nodes(const test::test_database& db) { return test::nodes_of(db, 2, 2); }

}  // namespace

TEST_CASE("salloc without a command gives a shell whose srun runs in the allocation, which ends with the shell") {
  test::test_database db;
  test::cluster c(two_nodes(db));
  test::users().ensure("aqs-slurm-sc");
  test::users().ensure("aqs-slurm-sd");
  const test::test_user u = c.user("aqs-slurm-sc");
  const test::test_user other = c.user("aqs-slurm-sd");

  fs::remove("/tmp/aqs-slurm-pwned");
  pty_session s(c, u, {"-n", "4", "-N", "2"});
  const std::int64_t id = s.granted();
  const std::string ids = std::to_string(id);
  s.expect("salloc: Nodes node\\[0-1\\] are ready for job\r?\n");
  s.expect("\\$ ");
  CHECK(c.job(id)->state == job_state::running);
  CHECK(c.job(id)->name == "interactive");

  // The shell has the allocation's variables, not a task's.
  s.type("echo \"V=$SLURM_JOB_ID/$SLURM_JOBID/$SLURM_NTASKS/$SLURM_JOB_NODELIST/${SLURM_PROCID:-none}/$((6*7))\"\n");
  s.expect("V=" + ids + "/" + ids + "/4/node\\[0-1\\]/none/42\r?\n");
  // srun typed into it: a step of the allocation's 4 tasks on its 2 nodes.
  s.type("srun sh -c 'echo task $SLURM_PROCID of $AQS_JOB_ID on node $SLURM_NODEID' | sort; echo \"rc=$((0+$?))\"\n");
  const std::string tasks = s.expect("rc=[0-9]+\r?\n", 120s);
  INFO(tasks);
  for (int t = 0; t < 4; ++t) CHECK(tasks.find("task " + std::to_string(t) + " of " + ids + " on node") != std::string::npos);
  CHECK(tasks.find("on node 0") != std::string::npos);
  CHECK(tasks.find("on node 1") != std::string::npos);
  CHECK(tasks.find("rc=0") != std::string::npos);
  // A step's exit status is srun's; its input is the terminal's.
  s.type("srun -n 1 sh -c 'exit 5'; echo \"step=$((0+$?))\"\n");
  s.expect("step=5\r?\n", 120s);
  s.type("echo hello-$((1+1)) | srun -n 1 cat\n");
  s.expect("hello-2\r?\n", 120s);
  // The working directory comes along.
  s.type("mkdir -p sub && cd sub && srun -n 1 pwd; cd ..\n");
  s.expect(u.home.string() + "/sub\r?\n", 120s);

  // Ctrl-C ends the running step, not the allocation.
  s.type("srun -n 1 sleep 300; echo \"int=$((0+$?))\"\n");
  std::this_thread::sleep_for(3s);
  s.type("\x03");
  const std::string interrupted = s.expect("int=[0-9]+\r?\n", 120s);
  CHECK(interrupted.find("int=0") == std::string::npos);
  s.expect("\\$ ");
  CHECK(c.job(id)->state == job_state::running);

  // Another user cannot run steps in it: not through the socket's
  // directory (0700), and not even with it opened up: the holder checks.
  s.type("echo \"S=$AQS_SALLOC_SOCKET=\"\n");
  const std::string sock_line = s.expect("S=/[^=]+=\r?\n");
  std::smatch m;
  REQUIRE(std::regex_search(sock_line, m, std::regex("S=(/[^=]+)=")));
  const fs::path sock = m[1].str();
  std::map<std::string, std::string> env{{"AQS_SOCKET", c.socket()}, {"AQS_SALLOC_SOCKET", sock.string()},
                                         {"PATH", slurm_dir().string() + ":/usr/bin:/bin"}};
  auto r = test::run({(slurm_dir() / "aqs-srun").string(), "touch", "/tmp/aqs-slurm-pwned"}, env, other.uid,
                     other.gid, other.home.string());
  CHECK(r.status == 1);
  CHECK(r.err.find("srun: error: cannot reach salloc's allocation at " + sock.string()) == 0);
  CHECK(r.err.find("Permission denied") != std::string::npos);
  ::chmod(sock.parent_path().c_str(), 0755);
  ::chmod(sock.c_str(), 0777);
  r = test::run({(slurm_dir() / "aqs-srun").string(), "touch", "/tmp/aqs-slurm-pwned"}, env, other.uid, other.gid,
                other.home.string());
  CHECK(r.status == 1);
  CHECK(r.err == "srun: error: salloc's allocation refused this step: denied\n");
  CHECK_FALSE(fs::exists("/tmp/aqs-slurm-pwned"));
  ::chmod(sock.parent_path().c_str(), 0700);

  // The shell ends: salloc gives the allocation back, with the shell's code.
  s.type("exit 0\n");
  CHECK(s.wait_exit() == 0);
  INFO(s.all());
  CHECK(s.all().find("salloc: Relinquishing job allocation " + ids + "\r\n") != std::string::npos);
  const auto done = c.wait_state(id, {job_state::completed, job_state::failed, job_state::cancelled}, 60s);
  CHECK(done.state == job_state::completed);
  CHECK_FALSE(fs::exists(sock));
}

TEST_CASE("salloc's allocation ends when salloc is killed or hung up, with the shell's failing code, and Ctrl-C takes back a waiting request") {
  test::test_database db;
  test::cluster c(two_nodes(db));
  test::users().ensure("aqs-slurm-sc");
  const test::test_user u = c.user("aqs-slurm-sc");

  {
    pty_session s(c, u, {"-n", "2"});
    const std::int64_t id = s.granted();
    s.expect("\\$ ");
    s.type("exit 3\n");
    CHECK(s.wait_exit() == 3);
    const auto done = c.wait_state(id, {job_state::completed, job_state::failed, job_state::cancelled}, 60s);
    CHECK(done.state == job_state::failed);
    CHECK(done.exit_code == 3);
  }
  {
    pty_session s(c, u, {"-n", "2"});
    const std::int64_t id = s.granted();
    s.expect("\\$ ");
    // SIGKILL: salloc cannot give the allocation back; aqsd sees its
    // interactive job's client gone and cancels it.
    ::kill(s.pid(), SIGKILL);
    const auto done = c.wait_state(id, {job_state::completed, job_state::failed, job_state::cancelled}, 60s);
    CHECK(done.state == job_state::cancelled);
  }
  {
    // A hangup: the shell is hung up and the allocation given back
    // (salloc's status 0, as Slurm's for a shell ended by SIGHUP).
    pty_session s(c, u, {"-n", "4"});
    const std::int64_t id = s.granted();
    s.expect("\\$ ");
    // Meanwhile another salloc waits (the cluster's 4 processors are
    // taken), and Ctrl-C takes its request back.
    pty_session w(c, u, {"-n", "2"});
    const std::string pending = w.expect("salloc: job ([0-9]+) queued and waiting for resources\r?\n");
    std::smatch m;
    REQUIRE(std::regex_search(pending, m, std::regex("job ([0-9]+) queued")));
    const std::int64_t waiting = std::stoll(m[1]);
    w.type("\x03");
    w.expect("salloc: Job allocation " + std::to_string(waiting) + " has been revoked.\r?\n");
    CHECK(w.wait_exit() == 1);
    CHECK(c.wait_state(waiting, {job_state::cancelled}, 60s).state == job_state::cancelled);

    ::kill(s.pid(), SIGHUP);
    CHECK(s.wait_exit() == 0);
    CHECK(s.all().find("salloc: Relinquishing job allocation " + std::to_string(id)) != std::string::npos);
    CHECK(c.wait_state(id, {job_state::completed, job_state::failed, job_state::cancelled}, 60s).state ==
          job_state::completed);
  }
}
