// Integration tests of job_process with real processes: files, environment,
// pinning, exit status, killing a whole process tree, start errors, and
// running as another user when we are root.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <fcntl.h>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include "job_process.hpp"
#include "temp_dir.hpp"
#include "file_text.hpp"

namespace fs = std::filesystem;
using namespace aqs::node;

namespace {

// Jobs running as another user (nobody) write here.
struct temp_dir : aqs::test::temp_dir {
  fs::path path;
  temp_dir() : aqs::test::temp_dir("aqs-node-test", 0777), path(aqs::test::temp_dir::path()) {}
};

using aqs::test::slurp;

exit_status wait_for(pid_t pid) {
  int st = 0;
  REQUIRE(::waitpid(pid, &st, 0) == pid);
  return decode_wait_status(st);
}

launch_spec shell(const temp_dir& d, const std::string& cmd) {
  launch_spec s;
  s.argv = {"/bin/sh", "-c", cmd};
  s.workdir = d.path.string();
  s.env = {"PATH=/usr/bin:/bin", "AQS_JOB_ID=42"};
  s.stdout_path = (d.path / "out.txt").string();
  return s;
}

// Reaps every exited child, including orphans handed to us as subreaper.
void reap_all() {
  while (::waitpid(-1, nullptr, WNOHANG) > 0) {
  }
}

}  // namespace

TEST_CASE("a job runs in its working directory with exactly its environment and output files") {
  temp_dir d;
  auto spec = shell(d, "echo job=$AQS_JOB_ID; pwd; env | sort; echo oops >&2");
  spec.stderr_path = (d.path / "err.txt").string();
  auto st = wait_for(launch(spec));
  CHECK(st.exit_code == 0);
  CHECK_FALSE(st.signaled());
  const std::string out = slurp(d.path / "out.txt");
  CHECK(out.find("job=42\n" + d.path.string() + "\n") == 0);
  CHECK(out.find("AQS_JOB_ID=42\n") != std::string::npos);
  CHECK(out.find("HOME=") == std::string::npos);  // nothing of the agent's environment leaks
  CHECK(slurp(d.path / "err.txt") == "oops\n");
}

TEST_CASE("a job inherits no file descriptor of the agent beyond stdin, stdout and stderr") {
  temp_dir d;
  // Descriptors the agent holds without close-on-exec, like Asio's sockets.
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  const int extra = ::open("/dev/null", O_RDONLY);
  REQUIRE(extra >= 0);
  auto spec = shell(d, "ls /proc/self/fd");  // ls's own directory fd shows up too
  CHECK(wait_for(launch(spec)).exit_code == 0);
  ::close(fds[0]);
  ::close(fds[1]);
  ::close(extra);
  std::istringstream listed(slurp(d.path / "out.txt"));
  std::vector<int> open_fds;
  for (int fd; listed >> fd;) open_fds.push_back(fd);
  // 0, 1, 2 and the one ls opened to read /proc/self/fd.
  CHECK(open_fds.size() == 4);
  CHECK(std::count_if(open_fds.begin(), open_fds.end(), [](int fd) { return fd > 2; }) == 1);
}

TEST_CASE("stdout and stderr share the output file when no error file is given, appending") {
  temp_dir d;
  auto spec = shell(d, "echo one; echo two >&2");
  CHECK(wait_for(launch(spec)).exit_code == 0);
  CHECK(wait_for(launch(spec)).exit_code == 0);
  CHECK(slurp(d.path / "out.txt") == "one\ntwo\none\ntwo\n");
}

TEST_CASE("a job is pinned to its processors") {
  temp_dir d;
  const unsigned ncpu = std::thread::hardware_concurrency();
  auto spec = shell(d, "grep Cpus_allowed_list /proc/self/status");
  spec.cpus = {0};
  CHECK(wait_for(launch(spec)).exit_code == 0);
  CHECK(slurp(d.path / "out.txt").find("Cpus_allowed_list:\t0\n") != std::string::npos);
  if (ncpu >= 2) {
    fs::remove(d.path / "out.txt");
    spec.cpus = {1};
    CHECK(wait_for(launch(spec)).exit_code == 0);
    CHECK(slurp(d.path / "out.txt").find("Cpus_allowed_list:\t1\n") != std::string::npos);
  }
}

TEST_CASE("exit codes and killing signals are decoded the shell's way") {
  temp_dir d;
  auto st = wait_for(launch(shell(d, "exit 3")));
  CHECK(st.exit_code == 3);
  CHECK(st.shell_code() == 3);
  st = wait_for(launch(shell(d, "kill -TERM $$")));
  CHECK(st.term_signal == SIGTERM);
  CHECK(st.shell_code() == 128 + SIGTERM);
}

TEST_CASE("signalling a job reaches every process of its tree, also background children") {
  temp_dir d;
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);  // as aqs-node does: orphans come back to us
  // The main process waits on two background sleeps that would outlive it.
  auto spec = shell(d, "sleep 300 & sleep 300 & echo started; wait");
  const pid_t pgid = launch(spec);
  for (int i = 0; i < 200 && slurp(d.path / "out.txt").empty(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  CHECK(job_alive(pgid));
  CHECK(signal_job(pgid, 0, SIGTERM));
  auto st = wait_for(pgid);
  CHECK(st.term_signal == SIGTERM);
  for (int i = 0; i < 300 && job_alive(pgid); ++i) {
    reap_all();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  CHECK_FALSE(job_alive(pgid));
  CHECK_FALSE(signal_job(pgid, 0, SIGKILL));
}

TEST_CASE("a job that cannot start says why in one line and leaves no process behind") {
  temp_dir d;
  auto spec = shell(d, "true");
  spec.workdir = (d.path / "missing").string();
  CHECK_THROWS_WITH_AS(launch(spec), doctest::Contains("cannot enter working directory"), launch_error);

  spec = shell(d, "true");
  spec.argv = {"no-such-program-aqs"};
  CHECK_THROWS_WITH_AS(launch(spec), "cannot execute no-such-program-aqs: No such file or directory", launch_error);

  spec = shell(d, "true");
  spec.stdout_path = (d.path / "no-dir" / "out.txt").string();
  CHECK_THROWS_WITH_AS(launch(spec), doctest::Contains("cannot open output file"), launch_error);

  spec = shell(d, "true");
  spec.env.push_back("NOEQUALS");
  CHECK_THROWS_AS(launch(spec), launch_error);
  spec = shell(d, "true");
  spec.argv.clear();
  CHECK_THROWS_AS(launch(spec), launch_error);

  // Every failed child was reaped: no child of ours is left.
  CHECK(::waitpid(-1, nullptr, WNOHANG) == -1);
}

TEST_CASE("as root, a job runs as its user and its files belong to that user") {
  if (::geteuid() != 0) {
    MESSAGE("not root: user switching not tested");
    return;
  }
  temp_dir d;
  auto spec = shell(d, "id -u; id -g; touch made-by-job");
  spec.uid = 65534;  // nobody
  spec.gid = 65534;
  CHECK(wait_for(launch(spec)).exit_code == 0);
  CHECK(slurp(d.path / "out.txt") == "65534\n65534\n");
  struct stat sb {};
  REQUIRE(::stat((d.path / "made-by-job").c_str(), &sb) == 0);
  CHECK(sb.st_uid == 65534);
  REQUIRE(::stat((d.path / "out.txt").c_str(), &sb) == 0);
  CHECK(sb.st_uid == 65534);

  // The user's rights apply: a directory only root may enter is refused.
  fs::create_directory(d.path / "private");
  ::chmod((d.path / "private").c_str(), 0700);
  spec.workdir = (d.path / "private").string();
  CHECK_THROWS_WITH_AS(launch(spec), doctest::Contains("Permission denied"), launch_error);
}

TEST_CASE("as root, a job's program is looked up on PATH with its user's rights: nothing leaks what the user may not see") {
  if (::geteuid() != 0) {
    MESSAGE("not root: user switching not tested");
    return;
  }
  temp_dir d;
  // A directory of root's that the job's user cannot search, holding a
  // program; a directory the user can search, holding another.
  const fs::path hidden = d.path / "hidden";
  const fs::path open = d.path / "open";
  fs::create_directories(hidden);
  fs::create_directories(open);
  for (const auto& [dir, name] : {std::pair{hidden, "secret-aqs"}, std::pair{open, "visible-aqs"}}) {
    std::ofstream(dir / name) << "#!/bin/sh\necho ran " << name << "\n";
    ::chmod((dir / name).c_str(), 0755);
  }
  ::chmod(hidden.c_str(), 0700);
  auto spec = shell(d, "true");
  spec.uid = 65534;  // nobody
  spec.gid = 65534;
  spec.env = {"PATH=" + hidden.string() + ":" + open.string() + ":/usr/bin:/bin"};

  // A program in the hidden directory is refused exactly as one that exists
  // nowhere: the error must not tell the user that the file is there.
  spec.argv = {"secret-aqs"};
  std::string hidden_error, missing_error;
  try {
    wait_for(launch(spec));
    FAIL("a program in a directory the user cannot search was run");
  } catch (const launch_error& e) {
    hidden_error = e.what();
  }
  spec.argv = {"no-such-program-aqs"};
  try {
    wait_for(launch(spec));
    FAIL("a missing program was run");
  } catch (const launch_error& e) {
    missing_error = e.what();
  }
  CHECK(hidden_error == "cannot execute secret-aqs: No such file or directory");
  CHECK(missing_error == "cannot execute no-such-program-aqs: No such file or directory");

  // The search goes on past the directory the user cannot search, as the
  // user's own shell would, and finds the program it may run.
  spec.argv = {"visible-aqs"};
  CHECK(wait_for(launch(spec)).exit_code == 0);
  CHECK(slurp(d.path / "out.txt") == "ran visible-aqs\n");
}
