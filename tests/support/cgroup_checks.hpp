// cgroup_checks: what the containment tests (cgroups, cgroup_steps) share:
// whether jobs can be contained in cgroups here, the live processes of a
// uid (what a job may have left behind), and a throwaway user of a cluster.
// Test code only.
#pragma once

#include <dirent.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "aqs_cluster.hpp"
#include "file_text.hpp"
#include "run_users.hpp"

namespace aqs::test {

// Why jobs cannot be contained in cgroups here, or "" when they can: it
// needs root and a cgroup hierarchy the agent can use (v1 memory, cpuset,
// freezer and pids controllers, or a v2 mount with them).
inline std::string cgroups_unavailable() {
  namespace fs = std::filesystem;
  if (::geteuid() != 0) return "not root";
  const bool v1 = fs::exists("/sys/fs/cgroup/memory/memory.limit_in_bytes") &&
                  fs::exists("/sys/fs/cgroup/cpuset/cpuset.cpus") && fs::exists("/sys/fs/cgroup/freezer/tasks");
  const std::string v2 = slurp("/sys/fs/cgroup/cgroup.controllers");
  const bool v2ok = v2.find("memory") != std::string::npos && v2.find("cpuset") != std::string::npos;
  if (!v1 && !v2ok) return "no cgroup v1 memory/cpuset/freezer controllers and no cgroup v2 with memory and cpuset";
  return {};
}

// The throwaway user `name` of cluster c (made for this run if new, removed
// at exit).
inline test_user run_user(cluster& c, const std::string& name) {
  users().ensure(name);
  return c.user(name);
}

// Every live process (zombies excluded) of uid, with its command line.
inline std::vector<std::string> processes_of(uid_t uid) {
  std::vector<std::string> out;
  DIR* d = ::opendir("/proc");
  if (d == nullptr) return out;
  while (const dirent* e = ::readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    const std::string base = std::string("/proc/") + e->d_name;
    std::istringstream status(slurp(base + "/status"));
    bool mine = false, zombie = false;
    for (std::string line; std::getline(status, line);) {
      if (line.rfind("State:", 0) == 0) zombie = line.find('Z') != std::string::npos;
      if (line.rfind("Uid:", 0) == 0) {
        std::istringstream f(line.substr(4));
        long real = -1;
        f >> real;
        mine = real == static_cast<long>(uid);
      }
    }
    if (!mine || zombie) continue;
    std::string cmd = slurp(base + "/cmdline");
    std::replace(cmd.begin(), cmd.end(), '\0', ' ');
    out.push_back(std::string(e->d_name) + ": " + cmd);
  }
  ::closedir(d);
  return out;
}

// The throwaway user `name` of cluster c, required to have no process yet
// (so that whatever is left after a job is the job's).
inline test_user idle_user(cluster& c, const std::string& name) {
  test_user u = run_user(c, name);
  REQUIRE(processes_of(u.uid).empty());
  return u;
}

// The v1 `controller` cgroup (memory, cpuset, ...) of job `id` on cluster
// c's `node` (node0 by default): under this process's cgroup of that controller, which the
// agents inherit, and the cluster id (the agent's spool names it). Empty
// when /sys/fs/cgroup/CONTROLLER has no `probe` file (no v1 there).
inline std::filesystem::path v1_job_cgroup(const cluster& c, const std::string& controller, const std::string& probe,
                                           std::int64_t id, const std::string& node = "node0") {
  namespace fs = std::filesystem;
  std::string cluster_id;
  for (const auto& e : fs::directory_iterator(c.dir() / ("spool-" + node))) {
    const std::string n = e.path().filename().string();
    if (n.rfind("cluster-", 0) == 0) cluster_id = n.substr(8);
  }
  const fs::path root = fs::path("/sys/fs/cgroup") / controller;
  if (!fs::exists(root / probe)) return {};
  std::istringstream in(slurp("/proc/self/cgroup"));
  const std::string tag = ":" + controller + ":";
  std::string own;
  for (std::string line; std::getline(in, line);) {
    const auto a = line.find(tag);
    if (a != std::string::npos) own = line.substr(a + tag.size());
  }
  fs::path p = root;
  if (own.size() > 1) p /= own.substr(1);
  return p / "aqs" / cluster_id / node / ("job_" + std::to_string(id));
}

// The lines of v, each ended by a newline (for messages).
inline std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += x + "\n";
  return s;
}

// Checks that a second after its job ended, uid has no process left (what
// the job left behind is the message).
inline void check_nothing_left(uid_t uid) {
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const auto left = processes_of(uid);
  CHECK_MESSAGE(left.empty(), "left behind:\n" << joined(left));
}

}  // namespace aqs::test
