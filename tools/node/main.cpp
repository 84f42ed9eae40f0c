// aqs-node: the node agent. Registers this machine (or a virtual node of it)
// with aqsd and runs the jobs aqsd starts here.
#include <CLI/CLI.hpp>

#include <csignal>
#include <functional>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>

#include "agent.hpp"
#include "aqs/mpi_adapter/launch.hpp"
#include "logging/log.hpp"
#include "node_discovery.hpp"

namespace {

std::string read_key(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read the cluster key file " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string key = ss.str();
  while (!key.empty() && (key.back() == '\n' || key.back() == '\r' || key.back() == ' ')) key.pop_back();
  if (key.empty()) throw std::runtime_error("the cluster key file " + path + " is empty");
  return key;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"aqs-node: the AQS node agent. Registers with aqsd and runs the jobs it starts here.",
               "aqs-node"};
  std::string server, socket_path, key_file, name, cpus_text, spool, rsh_agent, mpi_interfaces;
  std::int64_t procs = 0;
  std::string memory_text;
  std::int64_t gpus = -1;
  double heartbeat_s = 2.0;
  double node_down_timeout_s = 10.0;
  int probe_port = 0;
  double probe_interval_s = 15.0;
  app.add_option("--server", server, "aqsd's address HOST:PORT (TCP, needs --key)");
  app.add_option("--socket", socket_path, "aqsd's Unix socket, when aqsd runs on this machine");
  app.add_option("--key", key_file, "file holding the cluster key (aqsd's STATE_DIR/cluster.key); with --socket, only for latency probes");
  app.add_option("--name", name, "this node's name, unique in the cluster")->required();
  app.add_option("--cpus", cpus_text, "advertise only these cores, e.g. 0-3,6 (default: all we may use)");
  app.add_option("--procs", procs, "advertise N processors whatever the hardware (pinned round-robin on the cores)")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 20));
  app.add_option("--memory", memory_text,
                 "advertise this much memory whatever the hardware: MB, or with a unit K, M, G, T (e.g. 16G)");
  app.add_option("--gpus", gpus, "advertise N GPUs whatever the hardware")->check(CLI::Range(0, 1 << 16));
  app.add_option("--spool", spool,
                 "where job scripts are kept: a directory of this agent's user (default "
                 "/var/spool/aqs/node-NAME as root, else /tmp/aqs-node-UID-NAME)");
  app.add_option("--rsh-agent", rsh_agent,
                 "OpenMPI's launch agent for jobs on several hosts (default: aqs-rsh next to aqs-node)");
  app.add_option("--mpi-interfaces", mpi_interfaces,
                 "MPI jobs' TCP traffic (messages and OpenMPI's own) only on these interfaces or networks, "
                 "comma-separated, e.g. eth1 or 10.1.0.0/16 (default: any)");
  app.add_option("--heartbeat", heartbeat_s, "seconds between heartbeats")->check(CLI::Range(0.05, 3600.0));
  app.add_option("--node-down-timeout", node_down_timeout_s,
                 "aqsd's --heartbeat-timeout (default 10): a job whose agent died and was not restarted in time "
                 "kills itself before aqsd may start it elsewhere")
      ->check(CLI::Range(0.1, 86400.0));
  app.add_option("--probe-port", probe_port,
                 "UDP port of the latency probe socket that other agents time round trips to (fnodes --latency); "
                 "0, the default: any free port (aqsd tells the others which)")
      ->check(CLI::Range(0, 65535));
  app.add_option("--probe-interval", probe_interval_s, "seconds between two rounds of latency probes to the other nodes")
      ->check(CLI::Range(1.0, 86400.0));
  std::string cgroups_mode = "auto", cgroup_root = "/sys/fs/cgroup";
  std::int64_t pids_limit = 0;
  app.add_option("--cgroups", cgroups_mode,
                 "contain each job in a cgroup of its own: auto (v2 where the host has it, else v1, else none: "
                 "process groups and memory polling, with the reason logged), v1, v2 (refuse to start without), off")
      ->check(CLI::IsMember({"auto", "v1", "v2", "off"}));
  app.add_option("--cgroup-root", cgroup_root, "where cgroupfs is mounted (default /sys/fs/cgroup)");
  app.add_option("--pids-limit", pids_limit, "at most N processes and threads in each job's cgroup (default 0: none)")
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{1} << 22));
  std::string log_level;
  app.add_option("--log-level", log_level, "debug, info, warning or error (default info, or $AQS_LOG_LEVEL)")
      ->check(CLI::IsMember({"debug", "info", "warning", "error"}));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    std::fprintf(stderr, "aqs-node: %s (see aqs-node --help)\n", e.what());
    return 2;
  }

  aqs::node::agent_options o;
  try {
    if (server.empty() == socket_path.empty()) throw std::invalid_argument("give exactly one of --server and --socket");
    if (!server.empty()) {
      if (key_file.empty()) throw std::invalid_argument("--server needs --key FILE (the cluster key)");
      if (server.rfind(':') == std::string::npos) throw std::invalid_argument("--server expects HOST:PORT, got '" + server + "'");
      o.server = server;
      o.key = read_key(key_file);
    } else {
      o.socket_path = socket_path;
      // Not needed on the Unix socket, but with it this agent can answer
      // and send latency probes (they are signed with the key).
      if (!key_file.empty()) o.key = read_key(key_file);
    }
    if (name.empty() || name.size() > 64 || name.find_first_of(" \t\n/") != std::string::npos) {
      throw std::invalid_argument("--name must be 1 to 64 characters without spaces or '/'");
    }
    o.name = name;
    aqs::logging::set_program("aqs-node[" + name + "]");
    if (!log_level.empty()) aqs::logging::set_level(*aqs::logging::parse_level(log_level));
    auto found = aqs::node::discover_resources();
    o.cpus = cpus_text.empty() ? found.cpus : aqs::node::parse_cpu_list(cpus_text);
    o.procs = procs > 0 ? procs : static_cast<std::int64_t>(o.cpus.size());
    o.memory_mb = memory_text.empty() ? found.memory_mb : aqs::node::parse_memory_mb(memory_text);
    o.gpus = gpus >= 0 ? gpus : found.gpus;
    if (spool.empty()) {
      spool = ::geteuid() == 0 ? "/var/spool/aqs/node-" + name
                               : "/tmp/aqs-node-" + std::to_string(::geteuid()) + "-" + name;
    }
    o.spool = spool;
    o.rsh_agent = rsh_agent.empty() ? aqs::node::default_rsh_agent() : rsh_agent;
    if (!mpi_interfaces.empty()) {
      std::stringstream list(mpi_interfaces);
      for (std::string itf; std::getline(list, itf, ',');) o.mpi_interfaces.push_back(itf);
      if (mpi_interfaces.back() == ',') o.mpi_interfaces.emplace_back();  // caught below as an empty name
      aqs::mpi_adapter::validate_interfaces(o.mpi_interfaces);
    }
    o.heartbeat = std::chrono::milliseconds(static_cast<long>(heartbeat_s * 1000));
    o.node_down_timeout = std::chrono::milliseconds(static_cast<long>(node_down_timeout_s * 1000));
    o.probe_port = static_cast<std::uint16_t>(probe_port);
    o.probe_interval = std::chrono::milliseconds(static_cast<long>(probe_interval_s * 1000));
    o.cgroups.want = aqs::node::parse_cgroup_mode(cgroups_mode);
    o.cgroups.root = cgroup_root;
    o.cgroups.pids_max = pids_limit;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "aqs-node: %s\n", e.what());
    return 2;
  }

  boost::asio::io_context io(1);
  int rc = 0;
  aqs::node::agent agent(io, o, [&](const std::string&) {
    rc = 1;
    io.stop();
  });
  // First SIGTERM/SIGINT: end the jobs, report them, exit. A second: now.
  boost::asio::signal_set stop_signals(io, SIGINT, SIGTERM);
  std::function<void(boost::system::error_code, int)> on_signal = [&](boost::system::error_code ec, int) {
    if (ec) return;
    static bool second = false;
    if (second) {
      io.stop();
      return;
    }
    second = true;
    agent.shutdown([&] { io.stop(); });
    stop_signals.async_wait(on_signal);
  };
  stop_signals.async_wait(on_signal);
  ::signal(SIGPIPE, SIG_IGN);
  try {
    agent.start();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "aqs-node: %s\n", e.what());
    return 1;
  }
  io.run();
  return rc;
}
