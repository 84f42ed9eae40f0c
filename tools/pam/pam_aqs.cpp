// pam_aqs: users reach a compute node only through the queue (issue 31).
// A PAM account module for sshd on the nodes, like Slurm's pam_slurm_adopt:
// root, and a user with a running job on this node, are let in; the
// connection's process is then moved into that job's cgroups (the newest
// job's, when the user has several) and tagged with its AQS_JOB_ID, so the
// session is limited, accounted and ended with the job. Anyone else is
// refused with one line ("no running job of yours on node3").
//
// What runs here is read from the node agents' spools, which only root can
// read (sshd's account stage runs as root): each agent's spool holds the
// records of the jobs it runs for its cluster (DIR/cluster names the
// cluster, DIR/cluster-ID/job-N.step a job: its step process, that
// process's start time, the job's process group). A record counts only
// while its step process is the one it names (pids are reused) and the
// job's process group is alive and owned by the user.
//
// Options (in the PAM line): spool=DIR (an agent's spool, or a directory of
// them such as the default /var/spool/aqs, which holds node-NAME for each), cgroup_root=DIR (default
// /sys/fs/cgroup), nocgroup (let in without moving the process), debug.
#include <security/pam_ext.h>
#include <security/pam_modules.h>
#include <syslog.h>

#include <sys/stat.h>
#include <unistd.h>

#include <pwd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

struct options {
  fs::path spool = "/var/spool/aqs";
  fs::path cgroup_root = "/sys/fs/cgroup";
  bool cgroups = true;
  bool debug = false;
};

options parse(int argc, const char** argv) {
  options o;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("spool=", 0) == 0) o.spool = a.substr(6);
    else if (a.rfind("cgroup_root=", 0) == 0) o.cgroup_root = a.substr(12);
    else if (a == "nocgroup") o.cgroups = false;
    else if (a == "debug") o.debug = true;
  }
  return o;
}

struct running_job {
  long long id = 0;
  pid_t pgid = 0;
  long long started_ms = 0;
};

// Field 22 of /proc/PID/stat: the process's start, in clock ticks since boot.
unsigned long long start_ticks(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(in, line);
  const auto close = line.rfind(')');
  if (close == std::string::npos || close + 2 > line.size()) return 0;
  std::istringstream rest(line.substr(close + 2));
  std::string field;
  for (int i = 3; i < 22 && rest >> field; ++i) {
  }
  unsigned long long ticks = 0;
  rest >> ticks;
  return ticks;
}

std::optional<uid_t> owner(pid_t pid) {
  struct stat st {};
  if (::stat(("/proc/" + std::to_string(pid)).c_str(), &st) != 0) return std::nullopt;
  return st.st_uid;
}

bool is_cluster_id(const std::string& s) {
  if (s.size() != 32) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

// The running jobs of `uid` in the agent spool o.spool or in those below it.
std::vector<running_job> jobs_of(const options& o, uid_t uid) {
  std::vector<running_job> found;
  std::vector<fs::path> spools{o.spool};
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(o.spool, ec)) {
    if (e.is_directory(ec) && !e.is_symlink(ec)) spools.push_back(e.path());
  }
  for (const auto& agent : spools) {
    std::ifstream cluster_file(agent / "cluster");
    std::string cluster;
    if (!(cluster_file >> cluster) || !is_cluster_id(cluster)) continue;
    std::error_code ec2;
    for (const auto& rec : fs::directory_iterator(agent / ("cluster-" + cluster), ec2)) {
      const std::string name = rec.path().filename().string();
      if (name.rfind("job-", 0) != 0 || rec.path().extension() != ".step") continue;
      running_job j;
      try {
        j.id = std::stoll(rec.path().stem().string().substr(4));
      } catch (const std::exception&) {
        continue;
      }
      std::ifstream in(rec.path());
      long long step = 0, pgid = 0, started = 0;
      unsigned long long ticks = 0;
      if (!(in >> step >> ticks >> pgid >> started) || step <= 0 || pgid <= 0) continue;
      if (start_ticks(static_cast<pid_t>(step)) != ticks) continue;  // the step is gone (pid reused)
      const auto who = owner(static_cast<pid_t>(pgid));
      if (!who || *who != uid) continue;
      j.pgid = static_cast<pid_t>(pgid);
      j.started_ms = started;
      found.push_back(j);
    }
  }
  return found;
}

// Moves `pid` into every cgroup `of` is in (v1: one line per hierarchy,
// "ID:controllers:/path", mounted at ROOT/controllers; v2: "0::/path" at
// ROOT itself, or ROOT/unified in the hybrid layout). The number of
// hierarchies joined, or -1 with `why` when one could not be.
int join_cgroups(const options& o, pid_t of, pid_t pid, std::string& why) {
  std::ifstream in("/proc/" + std::to_string(of) + "/cgroup");
  std::string line;
  int joined = 0;
  while (std::getline(in, line)) {
    const auto a = line.find(':');
    const auto b = a == std::string::npos ? std::string::npos : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    std::string controllers = line.substr(a + 1, b - a - 1);
    const std::string path = line.substr(b + 1);
    if (path.empty() || path == "/" || path.find("..") != std::string::npos) continue;
    fs::path dir;
    if (controllers.empty()) {
      dir = fs::exists(o.cgroup_root / "cgroup.controllers") ? o.cgroup_root : o.cgroup_root / "unified";
    } else {
      if (controllers.rfind("name=", 0) == 0) controllers = controllers.substr(5);
      dir = o.cgroup_root / controllers;
    }
    const fs::path procs = dir / path.substr(1) / "cgroup.procs";
    std::ofstream out(procs);
    out << pid << '\n';
    out.flush();
    if (!out) {
      why = "cannot join " + procs.string() + ": " + std::strerror(errno);
      return -1;
    }
    ++joined;
  }
  return joined;
}

std::string host_name() {
  char h[256] = {};
  if (::gethostname(h, sizeof h - 1) != 0) return "this node";
  return h;
}

int decide(pam_handle_t* pamh, int argc, const char** argv) {
  const options o = parse(argc, argv);
  const char* user = nullptr;
  if (pam_get_user(pamh, &user, nullptr) != PAM_SUCCESS || user == nullptr) return PAM_USER_UNKNOWN;
  const passwd* pw = ::getpwnam(user);
  if (pw == nullptr) return PAM_USER_UNKNOWN;
  if (pw->pw_uid == 0) return PAM_SUCCESS;  // root always gets in, outside any job
  const auto jobs = jobs_of(o, pw->pw_uid);
  if (jobs.empty()) {
    const std::string line = "no running job of yours on " + host_name();
    pam_error(pamh, "%s", line.c_str());
    pam_syslog(pamh, LOG_NOTICE, "refused %s: %s", user, line.c_str());
    return PAM_PERM_DENIED;
  }
  // The newest job: as pam_slurm_adopt picks one when there are several.
  const running_job* pick = &jobs.front();
  for (const auto& j : jobs) {
    if (j.started_ms > pick->started_ms || (j.started_ms == pick->started_ms && j.id > pick->id)) pick = &j;
  }
  const std::string tag = "AQS_JOB_ID=" + std::to_string(pick->id);
  pam_putenv(pamh, tag.c_str());
  const std::string slurm = "SLURM_JOB_ID=" + std::to_string(pick->id);
  pam_putenv(pamh, slurm.c_str());
  if (o.cgroups) {
    std::string why;
    const int joined = join_cgroups(o, pick->pgid, ::getpid(), why);
    if (joined < 0) {
      // Let in but not contained would be outside the queue: refuse.
      pam_error(pamh, "cannot place you in job %lld: %s", pick->id, why.c_str());
      pam_syslog(pamh, LOG_ERR, "%s: job %lld: %s", user, pick->id, why.c_str());
      return PAM_SESSION_ERR;
    }
    if (o.debug) pam_syslog(pamh, LOG_DEBUG, "%s: adopted into job %lld (%d cgroups)", user, pick->id, joined);
  }
  pam_syslog(pamh, LOG_INFO, "let %s in: job %lld runs here", user, pick->id);
  return PAM_SUCCESS;
}

}  // namespace

extern "C" {

PAM_EXTERN int pam_sm_acct_mgmt(pam_handle_t* pamh, int, int argc, const char** argv) {
  try {
    return decide(pamh, argc, argv);
  } catch (...) {
    return PAM_SYSTEM_ERR;
  }
}

// The session stage needs nothing more (the account stage placed the
// process); present so that the module may also be listed as a session
// module without failing the stack.
PAM_EXTERN int pam_sm_open_session(pam_handle_t*, int, int, const char**) { return PAM_SUCCESS; }
PAM_EXTERN int pam_sm_close_session(pam_handle_t*, int, int, const char**) { return PAM_SUCCESS; }

}  // extern "C"
