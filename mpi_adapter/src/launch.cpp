// launch: validation, hostfile/rankfile text, and the mpirun environment.
#include "aqs/mpi_adapter/launch.hpp"

#include <arpa/inet.h>
#include <cerrno>
#include <cstdio>
#include <fcntl.h>
#include <map>
#include <set>
#include <string_view>
#include <sys/stat.h>
#include <system_error>
#include <unistd.h>

namespace aqs::mpi_adapter {

namespace {

constexpr std::size_t k_max_host_name = 255;  // the DNS limit on a whole name

bool is_alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); }

bool all_of(std::string_view s, std::string_view extra) {
  for (const char c : s) {
    if (!is_alnum(c) && extra.find(c) == std::string_view::npos) return false;
  }
  return true;
}

// The text quoted in an error message: control characters and bytes beyond
// ASCII as \xNN, so that the message stays one readable line.
std::string shown(std::string_view s) {
  std::string out = "'";
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u >= 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", u);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "'";
}

std::string proc_label(std::size_t i) { return "processor " + std::to_string(i); }

// The name under which OpenMPI 4.1 files a host: without orte_keep_fqdn_hostnames
// it cuts a name at its first '.' unless the name is an IP address, so two
// hosts with the same first label would be merged into one.
std::string mpirun_name(const std::string& host) {
  in_addr addr{};
  if (::inet_pton(AF_INET, host.c_str(), &addr) == 1) return host;
  return host.substr(0, host.find('.'));
}

// `what` names the host's owner in messages ("processor 3", "spare host 1").
void check_host(const std::string& what, const std::string& host) {
  if (host.empty()) throw allocation_error(what + " has an empty host name");
  if (host.size() > k_max_host_name) {
    throw allocation_error(what + " has a host name longer than " + std::to_string(k_max_host_name) +
                           " characters");
  }
  // Whitespace and '=' split hostfile and rankfile entries; in a hostfile '#'
  // starts a comment and "user@host" drops the user; a rankfile "+n0" is a
  // relative host; mpirun refuses ':' in node names; a leading '-' would
  // reach the launch agent as an option.
  if (!all_of(host, ".-_")) {
    throw allocation_error(what + " has host name " + shown(host) +
                           " with a character mpirun cannot take (allowed: letters, digits, '.', '-', '_')");
  }
  if (!is_alnum(host.front())) {
    throw allocation_error(what + " has host name " + shown(host) + ", which must start with a letter or digit");
  }
}

// Hosts in order of first appearance with their number of ranks.
std::vector<std::pair<std::string, int>> host_counts(const std::vector<processor>& procs);
std::vector<std::pair<std::string, int>> rank_counts(const allocation& a) {
  if (a.ranks.empty()) return host_counts(a.procs);
  std::vector<processor> first;
  for (const auto& r : a.ranks) first.push_back(a.procs.at(r.front()));
  return host_counts(first);
}

// Hosts in order of first appearance with their number of processors.
std::vector<std::pair<std::string, int>> host_counts(const std::vector<processor>& procs) {
  std::vector<std::pair<std::string, int>> out;
  std::map<std::string, std::size_t> index;
  for (const auto& p : procs) {
    const auto [it, fresh] = index.try_emplace(p.host, out.size());
    if (fresh) out.emplace_back(p.host, 0);
    ++out[it->second].second;
  }
  return out;
}

bool shares_a_cpu(const std::vector<processor>& procs) {
  std::set<std::pair<std::string, int>> seen;
  for (const auto& p : procs) {
    if (!seen.emplace(p.host, p.cpu).second) return true;
  }
  return false;
}

std::string join(const std::vector<std::string>& items, char sep) {
  std::string out;
  for (const auto& s : items) {
    if (!out.empty()) out += sep;
    out += s;
  }
  return out;
}

// A fresh file with `text`: an existing file (or a link planted in its place)
// is removed first, so that the job never reads a stale or foreign file.
void write_file(const std::filesystem::path& path, const std::string& text) {
  ::unlink(path.c_str());
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) throw std::system_error(errno, std::generic_category(), "cannot create " + path.string());
  std::size_t off = 0;
  while (off < text.size()) {
    const ssize_t n = ::write(fd, text.data() + off, text.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : EIO;
      ::close(fd);
      throw std::system_error(err, std::generic_category(), "cannot write " + path.string());
    }
    off += static_cast<std::size_t>(n);
  }
  // The umask may have taken read access away; the job's user needs it.
  const bool ok = ::fchmod(fd, 0644) == 0;
  const int err = errno;
  ::close(fd);
  if (!ok) throw std::system_error(err, std::generic_category(), "cannot make " + path.string() + " readable");
}

// What rigid and adaptive jobs share, after their placement variables.
void append_common(environment& env, const allocation& a, bool remote_daemons) {
  // Ranks sharing a cpu are within their slots, so OpenMPI does not know they
  // overload it and would let them busy-poll each other to a crawl.
  if (shares_a_cpu(a.procs)) env.emplace_back("OMPI_MCA_mpi_yield_when_idle", "1");
  if (remote_daemons) {
    env.emplace_back("OMPI_MCA_plm_rsh_agent", a.launch_agent);
    // Only mpirun's node starts daemons (through the agent): with the default
    // tree spawn, daemons would call the agent from every node.
    env.emplace_back("OMPI_MCA_plm_rsh_no_tree_spawn", "1");
    // Without it each remote daemon daemonizes: its first process exits at
    // once, the node agent ends that step and kills its process group, and
    // the daemon dies too when it has not yet left the group (mpirun then
    // waits for it forever). Attached, the daemon is the step, as long as
    // it runs, and a kill of the job reaches it and its ranks.
    env.emplace_back("OMPI_MCA_orte_leave_session_attached", "1");
  }
  if (!a.tcp_interfaces.empty()) {
    const std::string list = join(a.tcp_interfaces, ',');
    env.emplace_back("OMPI_MCA_btl_tcp_if_include", list);  // MPI messages
    env.emplace_back("OMPI_MCA_oob_tcp_if_include", list);  // mpirun and its daemons
  } else if (a.adaptive && !remote_daemons) {
    // An adaptive job on one host: its spawned ranks are another MPI job,
    // which shared memory does not reach, so old and new ranks talk over
    // TCP, on the addresses each rank listed at its MPI_Init. An interface
    // gone since (a container's or a test's bridge, a VPN) fails their first
    // connection ("bind on local address ... failed") in the middle of the
    // change: the job aborts, or stalls RESIZING when a new rank is the one
    // that aborts. Loopback is always there and is all one host needs.
    env.emplace_back("OMPI_MCA_btl_tcp_if_include", "lo");
    env.emplace_back("OMPI_MCA_oob_tcp_if_include", "lo");
  }
  if (a.as_root) {
    env.emplace_back("OMPI_ALLOW_RUN_AS_ROOT", "1");
    env.emplace_back("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
  }
}

}  // namespace

std::vector<processor> make_processors(const std::vector<std::string>& hosts, const std::vector<int>& cpus) {
  if (hosts.size() != cpus.size()) {
    throw allocation_error(std::to_string(hosts.size()) + " host names for " + std::to_string(cpus.size()) +
                           " cpus: there must be one of each per processor");
  }
  std::vector<processor> out;
  out.reserve(hosts.size());
  for (std::size_t i = 0; i < hosts.size(); ++i) out.push_back(processor{hosts[i], cpus[i]});
  return out;
}

void validate_interfaces(const std::vector<std::string>& interfaces) {
  for (const auto& itf : interfaces) {
    if (itf.empty()) throw allocation_error("a tcp interface name is empty");
    if (!all_of(itf, ".-_/:")) {
      throw allocation_error("tcp interface " + shown(itf) +
                             " has a character OpenMPI cannot take (allowed: letters, digits, '.', '-', '_', '/', "
                             "':')");
    }
  }
}

void validate(const allocation& a) {
  if (a.procs.empty()) throw allocation_error("the allocation has no processors");
  std::map<std::string, std::string> by_mpirun_name;  // mpirun's name -> first host with it
  for (std::size_t i = 0; i < a.procs.size(); ++i) {
    const auto& p = a.procs[i];
    check_host(proc_label(i), p.host);
    if (p.cpu < 0) {
      throw allocation_error(proc_label(i) + " on " + p.host + " has cpu " + std::to_string(p.cpu) +
                             " (cpus are numbered from 0)");
    }
    const auto [it, fresh] = by_mpirun_name.try_emplace(mpirun_name(p.host), p.host);
    if (!fresh && it->second != p.host) {
      throw allocation_error("hosts " + shown(it->second) + " and " + shown(p.host) + " are both '" + it->first +
                             "' to mpirun, which drops what follows the first '.' of a host name");
    }
  }
  validate_interfaces(a.tcp_interfaces);
  if (!a.launch_agent.empty()) {
    // mpirun splits plm_rsh_agent at whitespace and ':' (alternatives), and
    // would look a relative path up from the job's working directory.
    if (!all_of(a.launch_agent, "/.-_+")) {
      throw allocation_error("launch agent path " + shown(a.launch_agent) +
                             " has a character mpirun cannot take (allowed: letters, digits, '/', '.', '-', '_', '+')");
    }
    if (a.launch_agent.front() != '/') {
      throw allocation_error("launch agent path " + shown(a.launch_agent) + " is not absolute");
    }
  }
  if (a.adaptive) {
    // Ranks fill the hostfile's hosts in turn (mpirun maps by slot without
    // a rankfile): a host seen again later would take ranks out of order.
    std::set<std::string> done;
    for (std::size_t i = 1; i < a.procs.size(); ++i) {
      if (a.procs[i].host == a.procs[i - 1].host) continue;
      done.insert(a.procs[i - 1].host);
      if (done.count(a.procs[i].host) != 0) {
        throw allocation_error(proc_label(i) + " is on host " + shown(a.procs[i].host) +
                               " again after another host: an adaptive job's ranks fill each host's slots in turn, "
                               "so its processors must be grouped by host");
      }
    }
  }
  if (!a.spare_hosts.empty() && !a.adaptive) {
    throw allocation_error("spare hosts are for adaptive jobs, which grow; this job is rigid");
  }
  for (std::size_t i = 0; i < a.spare_hosts.size(); ++i) {
    const std::string& h = a.spare_hosts[i];
    check_host("spare host " + std::to_string(i), h);
    const auto [it, fresh] = by_mpirun_name.try_emplace(mpirun_name(h), h);
    if (!fresh) {
      throw allocation_error("spare host " + shown(h) + (it->second == h ? " is already in the allocation" :
                             " and host " + shown(it->second) + " are both '" + it->first + "' to mpirun"));
    }
  }
  for (std::size_t i = 0; i < a.ranks.size(); ++i) {
    const auto& r = a.ranks[i];
    if (r.empty()) throw allocation_error("rank " + std::to_string(i) + " has no processor");
    for (const std::size_t k : r) {
      if (k >= a.procs.size()) throw allocation_error("rank " + std::to_string(i) + " names a processor beyond the map");
      if (a.procs[k].host != a.procs[r.front()].host) {
        throw allocation_error("rank " + std::to_string(i) + " spans hosts " + shown(a.procs[r.front()].host) +
                               " and " + shown(a.procs[k].host));
      }
    }
  }
  if (a.launch_agent.empty() && by_mpirun_name.size() > 1) {
    throw allocation_error("the allocation spans " + std::to_string(by_mpirun_name.size()) +
                           " hosts, which needs the launch agent (aqs-rsh), and no path to it was given");
  }
}

std::string hostfile_text(const allocation& a) {
  validate(a);
  std::string out;
  for (const auto& [host, n] : rank_counts(a)) out += host + " slots=" + std::to_string(n) + "\n";
  // No ranks at launch, but a daemon (mpirun's virtual machine spans every
  // host of its hostfile) for the spawns that grow the job there.
  for (const auto& host : a.spare_hosts) out += host + " slots=0\n";
  return out;
}

std::string rankfile_text(const allocation& a) {
  validate(a);
  std::string out;
  if (!a.ranks.empty()) {
    for (std::size_t i = 0; i < a.ranks.size(); ++i) {
      std::set<int> cpus;
      for (const std::size_t k : a.ranks[i]) cpus.insert(a.procs[k].cpu);
      std::string list;
      for (const int c : cpus) list += (list.empty() ? "" : ",") + std::to_string(c);
      out += "rank " + std::to_string(i) + "=" + a.procs[a.ranks[i].front()].host + " slot=" + list + "\n";
    }
    return out;
  }
  for (std::size_t i = 0; i < a.procs.size(); ++i) {
    out += "rank " + std::to_string(i) + "=" + a.procs[i].host + " slot=" + std::to_string(a.procs[i].cpu) + "\n";
  }
  return out;
}

launch_files write_launch_files(const std::filesystem::path& dir, const allocation& a) {
  const std::string hosts = hostfile_text(a);
  const std::string ranks = a.adaptive ? std::string() : rankfile_text(a);
  std::filesystem::create_directories(dir);
  // mpirun runs in the job's working directory: the paths must not depend on it.
  const auto base = std::filesystem::absolute(dir);
  launch_files files{base / "hostfile", base / "rankfile"};
  write_file(files.hostfile, hosts);
  if (a.adaptive) {
    ::unlink(files.rankfile.c_str());  // one from an earlier launch would mislead
    files.rankfile.clear();
  } else {
    write_file(files.rankfile, ranks);
  }
  return files;
}

environment adaptive_placement() {
  return {{"OMPI_MCA_hwloc_base_binding_policy", "none"}, {"OMPI_MCA_rmaps_base_oversubscribe", "1"}};
}

environment launch_environment(const allocation& a, const launch_files& files) {
  validate(a);
  if (a.adaptive) {
    // The hosts and their slots, ranks by slot in map order; the shim pins
    // each rank and spawns the ranks of processors the job gains.
    environment env = {{"OMPI_MCA_orte_default_hostfile", files.hostfile.string()}};
    for (auto& kv : adaptive_placement()) env.push_back(std::move(kv));
    append_common(env, a, host_counts(a.procs).size() + a.spare_hosts.size() > 1);
    return env;
  }
  environment env = {
      // The default hostfile is the one mpirun reads when given none: it
      // fixes the hosts and their slots (and replaces a site-wide one).
      {"OMPI_MCA_orte_default_hostfile", files.hostfile.string()},
      // A rankfile selects the rank_file mapper, which starts one rank per
      // line when -np is not given and binds it whatever binding policy is set.
      {"OMPI_MCA_rmaps_rank_file_path", files.rankfile.string()},
      // Rankfile slots are logical hwloc indices by default; ours are Linux
      // cpu numbers, which hwloc calls physical (OS) indices.
      {"OMPI_MCA_rmaps_rank_file_physical", "1"},
      // Without it a physical slot binds to the whole core holding that cpu
      // (all its hardware threads); with it, to that one cpu.
      {"OMPI_MCA_hwloc_base_use_hwthreads_as_cpus", "1"},
  };
  append_common(env, a, host_counts(a.procs).size() > 1);
  return env;
}

}  // namespace aqs::mpi_adapter
