// netns_hosts: N hosts on this machine, each a network namespace (and, for
// the processes started in it, a UTS namespace with its own host name),
// joined by a bridge on a private /24 with the root namespace at .1. All
// traffic stays between them and the root namespace. Torn down with the
// object, also when a test or benchmark fails. Needs root (ip netns, unshare).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace aqs::testbed {

class netns_hosts {
public:
  // Creates `n` hosts named host0..host<n-1>. Throws std::runtime_error (the
  // `ip` command that failed and its message, on one line) when the
  // namespaces or links cannot be made; what was made by then is removed.
  explicit netns_hosts(int n);
  ~netns_hosts();
  netns_hosts(const netns_hosts&) = delete;
  netns_hosts& operator=(const netns_hosts&) = delete;

  // Whether this process can make them (root, and `ip netns` works).
  static bool available();

  int size() const noexcept { return n_; }
  std::string root_ip() const;        // the bridge's address, in the root namespace
  std::string subnet() const;         // "10.X.Y.0/24", e.g. for OpenMPI's *_if_include
  std::string ip(int i) const;        // host i's address
  std::string name(int i) const;      // host i's host name ("host<i>")
  // argv, run on host i: in its network namespace, in a UTS namespace of its
  // own named name(i). The process keeps the pid of the returned command.
  std::vector<std::string> on_host(int i, const std::vector<std::string>& argv) const;
  // Writes an executable script at `path` that does what ssh would for these
  // hosts: `path HOST COMMAND...` runs COMMAND (words joined by spaces) with
  // /bin/sh on the host named HOST, and exits 255 for an unknown host. For
  // OpenMPI's plm_rsh_agent, so that plain mpirun spans the hosts without
  // ssh. Throws std::runtime_error when the file cannot be written.
  void write_rsh_agent(const std::filesystem::path& path) const;
  // Cuts host i off the bridge (its link, root side, down), and back.
  // Throw std::runtime_error when `ip` fails.
  void cut(int i);
  void restore(int i);

private:
  void tear_down() noexcept;
  std::string ns(int i) const;
  std::string veth(int i) const;
  int n_ = 0;
  int id_ = 0;
  std::string bridge_;
  std::string prefix_;  // "10.X.Y."
};

// A TCP port free on `ip` now (bound and released: the server started next
// takes it). Throws std::runtime_error when no port can be bound there.
int free_tcp_port(const std::string& ip);

}  // namespace aqs::testbed
