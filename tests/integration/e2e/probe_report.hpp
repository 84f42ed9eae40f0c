// probe_report: what a job running the MPI probe printed: the cpus and
// hosts the agent gave it ("cpus 0,1,0" and "hosts a*2,b*1" lines from its
// script or the probe's rank 0) and where each rank ran ("rank R host H cpus LIST").
#pragma once

#include <cstdio>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace aqs::test {

struct probe_report {
  std::vector<std::string> cpus;   // AQS_CPUS, one per processor
  std::vector<std::string> hosts;  // AQS_HOSTS expanded, one per processor
  std::map<int, std::pair<std::string, std::string>> ranks;  // rank -> (host, cpus)
};

inline std::vector<std::string> split_list(const std::string& s, char sep = ',') {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string part; std::getline(ss, part, sep);) out.push_back(part);
  return out;
}

inline probe_report read_probe_report(const std::string& text) {
  probe_report r;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("cpus ", 0) == 0) r.cpus = split_list(line.substr(5));
    if (line.rfind("hosts ", 0) == 0) {
      // "host0*4,host1*2": runs of one host. The whole placement, like
      // "cpus": a second report of it (the script's and the probe's own)
      // replaces the first.
      r.hosts.clear();
      for (const auto& part : split_list(line.substr(6))) {
        const auto star = part.find('*');
        const int n = star == std::string::npos ? 1 : std::stoi(part.substr(star + 1));
        for (int i = 0; i < n; ++i) r.hosts.push_back(part.substr(0, star));
      }
    }
    int rank = -1;
    char host[256] = {}, list[256] = {};
    if (std::sscanf(line.c_str(), "rank %d host %255s cpus %255s", &rank, host, list) == 3) r.ranks[rank] = {host, list};
  }
  return r;
}

}  // namespace aqs::test
