// netns_hosts: test hosts as network namespaces on a private bridge.
#include "netns_hosts.hpp"

#include <doctest/doctest.h>
#include <unistd.h>

#include <atomic>

#include "aqs_cluster.hpp"  // run()

namespace aqs::test {

namespace {

std::atomic<int> counter{0};

// Runs an `ip` command; its failure fails the test when `must`.
void ip_cmd(std::vector<std::string> args, bool must = true) {
  args.insert(args.begin(), "/usr/sbin/ip");
  if (!std::filesystem::exists(args[0])) args[0] = "/sbin/ip";
  const auto r = run(args, {}, std::nullopt, std::nullopt, "", std::chrono::seconds(20));
  if (must) {
    std::string line;
    for (const auto& a : args) line += a + " ";
    REQUIRE_MESSAGE(r.status == 0, line << ": " << r.err);
  }
}

}  // namespace

bool netns_hosts::available() {
  if (::geteuid() != 0) return false;
  const std::string probe = "aqsprobe" + std::to_string(::getpid() % 100000);
  const auto add = run({"/usr/sbin/ip", "netns", "add", probe}, {}, std::nullopt, std::nullopt, "", std::chrono::seconds(10));
  if (add.status != 0) return false;
  run({"/usr/sbin/ip", "netns", "del", probe}, {}, std::nullopt, std::nullopt, "", std::chrono::seconds(10));
  return true;
}

netns_hosts::netns_hosts(int n) : n_(n) {
  id_ = (::getpid() * 7 + counter.fetch_add(1)) % 100000;
  bridge_ = "aqb" + std::to_string(id_);
  prefix_ = "10." + std::to_string(100 + (id_ / 250) % 100) + "." + std::to_string(id_ % 250) + ".";
  ip_cmd({"link", "add", bridge_, "type", "bridge"});
  ip_cmd({"addr", "add", prefix_ + "1/24", "dev", bridge_});
  ip_cmd({"link", "set", bridge_, "up"});
  for (int i = 0; i < n_; ++i) {
    const std::string peer = "aqp" + std::to_string(id_) + "h" + std::to_string(i);
    ip_cmd({"netns", "add", ns(i)});
    ip_cmd({"link", "add", veth(i), "type", "veth", "peer", "name", peer});
    ip_cmd({"link", "set", peer, "netns", ns(i)});
    ip_cmd({"link", "set", veth(i), "master", bridge_});
    ip_cmd({"link", "set", veth(i), "up"});
    ip_cmd({"-n", ns(i), "link", "set", peer, "name", "eth0"});
    ip_cmd({"-n", ns(i), "addr", "add", ip(i) + "/24", "dev", "eth0"});
    ip_cmd({"-n", ns(i), "link", "set", "eth0", "up"});
    ip_cmd({"-n", ns(i), "link", "set", "lo", "up"});
  }
}

netns_hosts::~netns_hosts() {
  for (int i = 0; i < n_; ++i) {
    ip_cmd({"link", "del", veth(i)}, false);
    ip_cmd({"netns", "del", ns(i)}, false);
  }
  ip_cmd({"link", "del", bridge_}, false);
}

std::string netns_hosts::root_ip() const { return prefix_ + "1"; }
std::string netns_hosts::ip(int i) const { return prefix_ + std::to_string(10 + i); }
std::string netns_hosts::name(int i) const { return "host" + std::to_string(i); }
std::string netns_hosts::ns(int i) const { return "aqs" + std::to_string(id_) + "h" + std::to_string(i); }
std::string netns_hosts::veth(int i) const { return "aqv" + std::to_string(id_) + "h" + std::to_string(i); }

std::vector<std::string> netns_hosts::on_host(int i, const std::vector<std::string>& argv) const {
  std::vector<std::string> out{"/usr/sbin/ip", "netns", "exec", ns(i), "unshare", "--uts", "--", "/bin/sh", "-c",
                               "hostname \"$0\" && exec \"$@\"", name(i)};
  out.insert(out.end(), argv.begin(), argv.end());
  return out;
}

void netns_hosts::cut(int i) { ip_cmd({"link", "set", veth(i), "down"}); }
void netns_hosts::restore(int i) { ip_cmd({"link", "set", veth(i), "up"}); }

}  // namespace aqs::test
