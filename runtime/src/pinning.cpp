// pinning: sched_setaffinity on every task of /proc/self/task, since the
// call binds only the thread it names.
#include "pinning.hpp"

#include <dirent.h>
#include <sched.h>
#include <cstdlib>
#include <unistd.h>

namespace aqs::runtime {

bool pin_process_to(const std::vector<int>& cpus) noexcept {
  if (cpus.empty()) return false;
  cpu_set_t set;
  CPU_ZERO(&set);
  for (const int cpu : cpus) {
    if (cpu < 0 || cpu >= CPU_SETSIZE) return false;
    CPU_SET(cpu, &set);
  }
  bool ok = ::sched_setaffinity(0, sizeof set, &set) == 0;
  if (DIR* d = ::opendir("/proc/self/task")) {
    while (dirent* e = ::readdir(d)) {
      if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
      const pid_t tid = static_cast<pid_t>(std::atoi(e->d_name));
      ok = (::sched_setaffinity(tid, sizeof set, &set) == 0) && ok;
    }
    ::closedir(d);
  }
  return ok;
}

int online_cpus() noexcept {
  const long n = ::sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 1;
}

}  // namespace aqs::runtime
