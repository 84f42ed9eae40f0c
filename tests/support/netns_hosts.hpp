// netns_hosts: N test hosts on this machine, each a network namespace (and,
// for the processes started in it, a UTS namespace with its own host name),
// joined by a bridge on a private /24 with the root namespace at .1. All
// traffic stays between them and the root namespace. Torn down with the
// object, also when a test fails. Needs root (ip netns, unshare).
#pragma once

#include <string>
#include <vector>

namespace aqs::test {

class netns_hosts {
public:
  // Creates `n` hosts named host0..host<n-1>. Fails the test (REQUIRE) when
  // the namespaces or links cannot be made.
  explicit netns_hosts(int n);
  ~netns_hosts();
  netns_hosts(const netns_hosts&) = delete;
  netns_hosts& operator=(const netns_hosts&) = delete;

  // Whether this process can make them (root, and `ip netns` works).
  static bool available();

  int size() const noexcept { return n_; }
  std::string root_ip() const;        // the bridge's address, in the root namespace
  std::string ip(int i) const;        // host i's address
  std::string name(int i) const;      // host i's host name ("host<i>")
  // argv, run on host i: in its network namespace, in a UTS namespace of its
  // own named name(i). The process keeps the pid of the returned command.
  std::vector<std::string> on_host(int i, const std::vector<std::string>& argv) const;
  // Cuts host i off the bridge (its link, root side, down), and back.
  void cut(int i);
  void restore(int i);

private:
  std::string ns(int i) const;
  std::string veth(int i) const;
  int n_ = 0;
  int id_ = 0;
  std::string bridge_;
  std::string prefix_;  // "10.X.Y."
};

}  // namespace aqs::test
