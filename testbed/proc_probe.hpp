// proc_probe: a process seen from outside through /proc (its descriptors and
// resident memory), for the tests and benchmarks that bound what a daemon
// holds under load. Header only: part of what aqs::netns_hosts carries.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>

namespace aqs::testbed {

// The descriptors `pid` holds now (0 when it is gone).
inline int open_fds(pid_t pid) {
  int n = 0;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    ++n;
  }
  return n;
}

// Its resident memory in KiB (VmRSS), or -1 when it is gone.
inline long rss_kib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}

}  // namespace aqs::testbed
