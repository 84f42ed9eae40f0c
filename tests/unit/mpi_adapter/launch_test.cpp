// Unit tests of the OpenMPI launch: hostfile and rankfile text, the mpirun
// environment, validation errors, and writing the files.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <sys/stat.h>
#include <vector>

#include "aqs/mpi_adapter/launch.hpp"
#include "file_text.hpp"
#include "temp_dir.hpp"

using namespace aqs::mpi_adapter;

namespace {

allocation on(std::vector<processor> procs, std::string agent = "") {
  return allocation{std::move(procs), false, {}, std::move(agent), false, {}, {}};
}

// The message of the allocation_error that `f` throws ("" if none).
template <typename F>
std::string error_of(F f) {
  try {
    f();
  } catch (const allocation_error& e) {
    return e.what();
  }
  return "";
}

std::string validation_error(const allocation& a) {
  return error_of([&] { validate(a); });
}

const launch_files k_files{"/spool/job-7/hostfile", "/spool/job-7/rankfile"};

const environment k_base_env = {
    {"OMPI_MCA_orte_default_hostfile", "/spool/job-7/hostfile"},
    {"OMPI_MCA_rmaps_rank_file_path", "/spool/job-7/rankfile"},
    {"OMPI_MCA_rmaps_rank_file_physical", "1"},
    {"OMPI_MCA_hwloc_base_use_hwthreads_as_cpus", "1"},
};

environment base_env_and(const environment& more) {
  environment env = k_base_env;
  env.insert(env.end(), more.begin(), more.end());
  return env;
}

}  // namespace

TEST_CASE("a single host gets one hostfile line and one rankfile line per processor") {
  const auto a = on({{"node1", 2}, {"node1", 3}, {"node1", 0}});
  CHECK(hostfile_text(a) == "node1 slots=3\n");
  CHECK(rankfile_text(a) == "rank 0=node1 slot=2\nrank 1=node1 slot=3\nrank 2=node1 slot=0\n");
}

TEST_CASE("interleaved hosts keep map order in the rankfile and first appearance in the hostfile") {
  const auto a = on({{"b", 0}, {"a", 5}, {"b", 1}, {"a", 4}, {"b", 2}}, "/usr/lib/aqs/aqs-rsh");
  CHECK(hostfile_text(a) == "b slots=3\na slots=2\n");
  CHECK(rankfile_text(a) ==
        "rank 0=b slot=0\n"
        "rank 1=a slot=5\n"
        "rank 2=b slot=1\n"
        "rank 3=a slot=4\n"
        "rank 4=b slot=2\n");
}

TEST_CASE("processors sharing a cpu each get a rank on that cpu, and ranks yield when idle") {
  const auto a = on({{"n", 1}, {"n", 0}, {"n", 1}});
  CHECK(hostfile_text(a) == "n slots=3\n");
  CHECK(rankfile_text(a) == "rank 0=n slot=1\nrank 1=n slot=0\nrank 2=n slot=1\n");
  CHECK(launch_environment(a, k_files) == base_env_and({{"OMPI_MCA_mpi_yield_when_idle", "1"}}));
}

TEST_CASE("the same cpu number on two hosts is no sharing") {
  const auto a = on({{"a", 0}, {"b", 0}}, "/bin/aqs-rsh");
  for (const auto& [k, v] : launch_environment(a, k_files)) CHECK(k != "OMPI_MCA_mpi_yield_when_idle");
}

TEST_CASE("a job on one host as a user gets only the files and the physical binding") {
  CHECK(launch_environment(on({{"n", 0}, {"n", 1}}), k_files) == k_base_env);
  // A launch agent given for one host is not needed, so mpirun is not told.
  CHECK(launch_environment(on({{"n", 0}}, "/usr/lib/aqs/aqs-rsh"), k_files) == k_base_env);
}

TEST_CASE("a job as root lets mpirun run as root") {
  allocation a = on({{"n", 0}});
  a.as_root = true;
  CHECK(launch_environment(a, k_files) ==
        base_env_and({{"OMPI_ALLOW_RUN_AS_ROOT", "1"}, {"OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"}}));
}

TEST_CASE("a job on several hosts starts its remote daemons through the launch agent, from mpirun's node only") {
  const auto a = on({{"a", 0}, {"b", 0}, {"c", 1}}, "/usr/lib/aqs/aqs-rsh");
  CHECK(launch_environment(a, k_files) == base_env_and({{"OMPI_MCA_plm_rsh_agent", "/usr/lib/aqs/aqs-rsh"},
                                                        {"OMPI_MCA_plm_rsh_no_tree_spawn", "1"},
                                                        {"OMPI_MCA_orte_leave_session_attached", "1"}}));
}

TEST_CASE("given interfaces carry both MPI messages and OpenMPI's own traffic") {
  allocation a = on({{"n", 0}});
  a.tcp_interfaces = {"eth1", "10.0.0.0/8"};
  CHECK(launch_environment(a, k_files) == base_env_and({{"OMPI_MCA_btl_tcp_if_include", "eth1,10.0.0.0/8"},
                                                        {"OMPI_MCA_oob_tcp_if_include", "eth1,10.0.0.0/8"}}));
}

TEST_CASE("everything at once comes in a fixed order") {
  const allocation a{{{"a", 0}, {"b", 0}, {"a", 0}}, true, {"ib0"}, "/opt/aqs/bin/aqs-rsh", false, {}, {}};
  CHECK(launch_environment(a, k_files) == base_env_and({{"OMPI_MCA_mpi_yield_when_idle", "1"},
                                                        {"OMPI_MCA_plm_rsh_agent", "/opt/aqs/bin/aqs-rsh"},
                                                        {"OMPI_MCA_plm_rsh_no_tree_spawn", "1"},
                                                        {"OMPI_MCA_orte_leave_session_attached", "1"},
                                                        {"OMPI_MCA_btl_tcp_if_include", "ib0"},
                                                        {"OMPI_MCA_oob_tcp_if_include", "ib0"},
                                                        {"OMPI_ALLOW_RUN_AS_ROOT", "1"},
                                                        {"OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"}}));
}

allocation adaptive_on(std::vector<processor> procs, std::string agent = "") {
  allocation a = on(std::move(procs), std::move(agent));
  a.adaptive = true;
  return a;
}

TEST_CASE("an adaptive job gets the hosts and their slots, no rankfile and no binding: its shim pins each rank") {
  const auto a = adaptive_on({{"a", 2}, {"a", 3}, {"b", 0}}, "/usr/lib/aqs/aqs-rsh");
  CHECK(hostfile_text(a) == "a slots=2\nb slots=1\n");
  const launch_files hosts_only{"/spool/job-7/hostfile", ""};
  CHECK(launch_environment(a, hosts_only) == environment{{"OMPI_MCA_orte_default_hostfile", "/spool/job-7/hostfile"},
                                                         {"OMPI_MCA_hwloc_base_binding_policy", "none"},
                                                         {"OMPI_MCA_rmaps_base_oversubscribe", "1"},
                                                         {"OMPI_MCA_plm_rsh_agent", "/usr/lib/aqs/aqs-rsh"},
                                                         {"OMPI_MCA_plm_rsh_no_tree_spawn", "1"},
                                                         {"OMPI_MCA_orte_leave_session_attached", "1"}});
}

TEST_CASE("an adaptive job's spare hosts get a daemon but no ranks: they are in the hostfile with no slots") {
  allocation a = adaptive_on({{"a", 0}, {"a", 1}}, "/bin/aqs-rsh");
  a.spare_hosts = {"c", "b"};
  CHECK(hostfile_text(a) == "a slots=2\nc slots=0\nb slots=0\n");
  // On one host with spare hosts, mpirun starts daemons through the agent.
  const auto env = launch_environment(a, {"/j/hostfile", ""});
  CHECK(std::find(env.begin(), env.end(), std::pair<std::string, std::string>{"OMPI_MCA_plm_rsh_agent", "/bin/aqs-rsh"}) !=
        env.end());
  // Without spare hosts, one host needs no agent.
  for (const auto& [k, v] : launch_environment(adaptive_on({{"a", 0}}, "/bin/aqs-rsh"), {"/j/hostfile", ""})) {
    CHECK(k != "OMPI_MCA_plm_rsh_agent");
  }
}

TEST_CASE("an adaptive job on one host keeps MPI's TCP on loopback, unless interfaces are given") {
  // Its spawned ranks reach the others only over TCP; an interface listed at
  // MPI_Init and gone by the expansion failed their first connection.
  using kv = std::pair<std::string, std::string>;
  const auto one = launch_environment(adaptive_on({{"a", 0}, {"a", 1}}, "/bin/aqs-rsh"), {"/j/hostfile", ""});
  CHECK(std::find(one.begin(), one.end(), kv{"OMPI_MCA_btl_tcp_if_include", "lo"}) != one.end());
  CHECK(std::find(one.begin(), one.end(), kv{"OMPI_MCA_oob_tcp_if_include", "lo"}) != one.end());
  // Given interfaces win.
  allocation given = adaptive_on({{"a", 0}}, "/bin/aqs-rsh");
  given.tcp_interfaces = {"eth1"};
  const auto g = launch_environment(given, {"/j/hostfile", ""});
  CHECK(std::find(g.begin(), g.end(), kv{"OMPI_MCA_btl_tcp_if_include", "eth1"}) != g.end());
  CHECK(std::find(g.begin(), g.end(), kv{"OMPI_MCA_btl_tcp_if_include", "lo"}) == g.end());
  // Several hosts (or spare hosts to grow onto) need the network.
  allocation spare = adaptive_on({{"a", 0}}, "/bin/aqs-rsh");
  spare.spare_hosts = {"b"};
  for (const auto& e : {launch_environment(spare, {"/j/hostfile", ""}),
                        launch_environment(adaptive_on({{"a", 0}, {"b", 0}}, "/bin/aqs-rsh"), {"/j/hostfile", ""})}) {
    for (const auto& [k, v] : e) CHECK(k != "OMPI_MCA_btl_tcp_if_include");
  }
  // A rigid job is one MPI job: shared memory carries it on one host.
  for (const auto& [k, v] : launch_environment(on({{"a", 0}, {"a", 1}}), k_files)) CHECK(k != "OMPI_MCA_btl_tcp_if_include");
}

TEST_CASE("spare hosts must be valid, distinct from the job's hosts, and for adaptive jobs only") {
  allocation a = adaptive_on({{"a", 0}}, "/bin/aqs-rsh");
  a.spare_hosts = {"b", "a"};
  CHECK(validation_error(a) == "spare host 'a' is already in the allocation");
  a.spare_hosts = {"b c"};
  CHECK(validation_error(a).starts_with("spare host 0 has host name 'b c' with a character mpirun cannot take"));
  a.spare_hosts = {"b.x", "b.y"};
  CHECK(validation_error(a) == "spare host 'b.y' and host 'b.x' are both 'b' to mpirun");
  a.spare_hosts = {"b"};
  a.launch_agent.clear();
  CHECK(validation_error(a) ==
        "the allocation spans 2 hosts, which needs the launch agent (aqs-rsh), and no path to it was given");
  allocation rigid = on({{"a", 0}}, "/bin/aqs-rsh");
  rigid.spare_hosts = {"b"};
  CHECK(validation_error(rigid) == "spare hosts are for adaptive jobs, which grow; this job is rigid");
}

TEST_CASE("an adaptive job's ranks follow the hostfile's slots, so its hosts must not interleave in map order") {
  CHECK(validation_error(adaptive_on({{"a", 0}, {"b", 0}, {"a", 1}}, "/bin/aqs-rsh")) ==
        "processor 2 is on host 'a' again after another host: an adaptive job's ranks fill each host's slots in "
        "turn, so its processors must be grouped by host");
  CHECK(validation_error(on({{"a", 0}, {"b", 0}, {"a", 1}}, "/bin/aqs-rsh")).empty());  // rigid: the rankfile places
}

TEST_CASE("an adaptive job with several processors per rank gets one slot per rank: plain mpirun starts its ranks") {
  allocation a = adaptive_on({{"a", 0}, {"a", 1}, {"a", 0}, {"a", 1}, {"b", 2}, {"b", 3}}, "/bin/aqs-rsh");
  a.ranks = {{0, 1}, {2, 3}, {4, 5}};
  CHECK(hostfile_text(a) == "a slots=2\nb slots=1\n");
  // Still no binding: the shim pins each rank to its cpus.
  const auto env = launch_environment(a, {"/j/hostfile", ""});
  CHECK(std::find(env.begin(), env.end(), std::pair<std::string, std::string>{"OMPI_MCA_hwloc_base_binding_policy",
                                                                              "none"}) != env.end());
  a.ranks = {{0, 4}};
  CHECK(validation_error(a) == "rank 0 spans hosts 'a' and 'b'");
}

TEST_CASE("an adaptive job's launch files are the hostfile alone") {
  aqs::test::temp_dir tmp("aqs-mpi-adapter");
  const auto files = write_launch_files(tmp.path() / "job-8", adaptive_on({{"a", 1}, {"b", 0}}, "/bin/aqs-rsh"));
  CHECK(files == launch_files{tmp.path() / "job-8" / "hostfile", ""});
  CHECK(aqs::test::slurp(files.hostfile) == "a slots=1\nb slots=1\n");
  CHECK(!std::filesystem::exists(tmp.path() / "job-8" / "rankfile"));
}

TEST_CASE("the node agent's host and cpu lists pair up into processors, and lists of different lengths are refused") {
  CHECK(make_processors({"a", "b", "a"}, {3, 0, 3}) == std::vector<processor>{{"a", 3}, {"b", 0}, {"a", 3}});
  CHECK(make_processors({}, {}).empty());
  CHECK(error_of([] { make_processors({"a", "b"}, {0}); }) ==
        "2 host names for 1 cpus: there must be one of each per processor");
  CHECK(error_of([] { make_processors({"a"}, {0, 1}); }) ==
        "1 host names for 2 cpus: there must be one of each per processor");
}

TEST_CASE("an empty allocation is refused") {
  CHECK(validation_error(on({})) == "the allocation has no processors");
  CHECK_THROWS_AS(hostfile_text(on({})), allocation_error);
  CHECK_THROWS_AS(rankfile_text(on({})), allocation_error);
  CHECK_THROWS_AS(launch_environment(on({}), k_files), allocation_error);
}

TEST_CASE("host names mpirun cannot take are refused, naming the processor") {
  CHECK(validation_error(on({{"a", 0}, {"", 1}})) == "processor 1 has an empty host name");
  CHECK(validation_error(on({{"a b", 0}})) ==
        "processor 0 has host name 'a b' with a character mpirun cannot take (allowed: letters, digits, '.', '-', "
        "'_')");
  CHECK(validation_error(on({{"a\tb", 0}})) ==
        "processor 0 has host name 'a\\x09b' with a character mpirun cannot take (allowed: letters, digits, '.', "
        "'-', '_')");
  CHECK(validation_error(on({{"n", 0}, {"n", 1}, {"x=1", 0}})).starts_with("processor 2 has host name 'x=1' with"));
  CHECK(validation_error(on({{"a\nrank 9=evil", 0}}))
            .starts_with("processor 0 has host name 'a\\x0arank 9=evil' with"));
  for (const char* bad : {"user@node", "node#1", "node:2", "+n0", "n\x01", "n\x7f", "n\xc3\xa9", "a/b"}) {
    CAPTURE(bad);
    CHECK(validation_error(on({{bad, 0}})).starts_with("processor 0 has host name '"));
  }
  CHECK(validation_error(on({{"-oProxyCommand", 0}})) ==
        "processor 0 has host name '-oProxyCommand', which must start with a letter or digit");
  CHECK(validation_error(on({{".hidden", 0}})) ==
        "processor 0 has host name '.hidden', which must start with a letter or digit");
  CHECK(validation_error(on({{std::string(256, 'a'), 0}})) ==
        "processor 0 has a host name longer than 255 characters");
  CHECK(validation_error(on({{std::string(255, 'a'), 0}})).empty());
  CHECK(validation_error(on({{"node-1.cluster_a", 0}, {"10.0.0.7", 0}}, "/bin/aqs-rsh")).empty());
}

TEST_CASE("hosts that mpirun would take for one are refused") {
  CHECK(validation_error(on({{"n1.rack1", 0}, {"n1.rack2", 0}}, "/bin/aqs-rsh")) ==
        "hosts 'n1.rack1' and 'n1.rack2' are both 'n1' to mpirun, which drops what follows the first '.' of a host "
        "name");
  CHECK(validation_error(on({{"n1", 0}, {"n1.cluster", 0}}, "/bin/aqs-rsh"))
            .starts_with("hosts 'n1' and 'n1.cluster'"));
  // IPv4 addresses keep their dots.
  CHECK(validation_error(on({{"10.0.0.1", 0}, {"10.0.0.2", 0}}, "/bin/aqs-rsh")).empty());
}

TEST_CASE("a negative cpu is refused, naming the processor") {
  CHECK(validation_error(on({{"n", 0}, {"n", -1}})) == "processor 1 on n has cpu -1 (cpus are numbered from 0)");
}

TEST_CASE("a job on several hosts without a usable launch agent is refused") {
  CHECK(validation_error(on({{"a", 0}, {"b", 0}})) ==
        "the allocation spans 2 hosts, which needs the launch agent (aqs-rsh), and no path to it was given");
  CHECK(validation_error(on({{"a", 0}}, "bin/aqs-rsh")) == "launch agent path 'bin/aqs-rsh' is not absolute");
  CHECK(validation_error(on({{"a", 0}}, "/opt/my aqs/aqs-rsh")) ==
        "launch agent path '/opt/my aqs/aqs-rsh' has a character mpirun cannot take (allowed: letters, digits, '/', "
        "'.', '-', '_', '+')");
  CHECK(validation_error(on({{"a", 0}}, "/opt/a:b/aqs-rsh")).starts_with("launch agent path '/opt/a:b/aqs-rsh' has"));
  CHECK(validation_error(on({{"a", 0}, {"b", 0}}, "/opt/aqs-0.1+deb/bin/aqs-rsh")).empty());
}

TEST_CASE("interface names OpenMPI cannot take are refused") {
  allocation a = on({{"n", 0}});
  a.tcp_interfaces = {"eth0", ""};
  CHECK(validation_error(a) == "a tcp interface name is empty");
  a.tcp_interfaces = {"eth0,eth1"};
  CHECK(validation_error(a) ==
        "tcp interface 'eth0,eth1' has a character OpenMPI cannot take (allowed: letters, digits, '.', '-', '_', '/', "
        "':')");
  a.tcp_interfaces = {"eth 0"};
  CHECK(validation_error(a).starts_with("tcp interface 'eth 0' has"));
  a.tcp_interfaces = {"fd00::/8", "enp3s0f1", "br-lan_2", "192.168.0.0/16"};
  CHECK(validation_error(a).empty());
  // What a node agent checks of its --mpi-interfaces at start.
  CHECK(error_of([] { validate_interfaces({"eth0", ""}); }) == "a tcp interface name is empty");
  CHECK(error_of([] { validate_interfaces({"10.1.0.0/16"}); }).empty());
}

TEST_CASE("every validation error is one line") {
  allocation bad_itf = on({{"n", 0}});
  bad_itf.tcp_interfaces = {"e\nth0"};
  for (const auto& a : {on({}), on({{"", 0}}), on({{"a\nb", 0}}), on({{"n", -3}}), on({{"a", 0}, {"b", 0}}),
                        on({{"a", 0}}, "/x\n/y"), bad_itf}) {
    const std::string msg = validation_error(a);
    CAPTURE(msg);
    CHECK(!msg.empty());
    CHECK(msg.find('\n') == std::string::npos);
  }
}

TEST_CASE("the launch files land in the given directory, fresh and readable by the job's user") {
  aqs::test::temp_dir tmp("aqs-mpi-adapter");
  const auto dir = tmp.path() / "job-7";  // created when missing
  const auto a = on({{"a", 1}, {"b", 0}}, "/bin/aqs-rsh");
  const auto files = write_launch_files(dir, a);
  CHECK(files == launch_files{dir / "hostfile", dir / "rankfile"});
  CHECK(aqs::test::slurp(files.hostfile) == "a slots=1\nb slots=1\n");
  CHECK(aqs::test::slurp(files.rankfile) == "rank 0=a slot=1\nrank 1=b slot=0\n");
  struct stat st {};
  REQUIRE(::stat(files.rankfile.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0644);

  // A second write replaces the files; a link planted in their place is
  // replaced too, not followed.
  const auto victim = tmp.path() / "victim";
  { std::ofstream(victim) << "keep me"; }
  std::filesystem::remove(files.hostfile);
  std::filesystem::create_symlink(victim, files.hostfile);
  write_launch_files(dir, on({{"c", 2}}));
  CHECK(aqs::test::slurp(victim) == "keep me");
  CHECK(!std::filesystem::is_symlink(files.hostfile));
  CHECK(aqs::test::slurp(files.hostfile) == "c slots=1\n");
  CHECK(aqs::test::slurp(files.rankfile) == "rank 0=c slot=2\n");
}

TEST_CASE("the launch files of a relative directory get absolute paths") {
  aqs::test::temp_dir tmp("aqs-mpi-adapter");
  const auto cwd = std::filesystem::current_path();
  std::filesystem::current_path(tmp.path());
  const auto files = write_launch_files("rel", on({{"a", 0}}));
  std::filesystem::current_path(cwd);
  CHECK(files.hostfile.is_absolute());
  CHECK(files.rankfile == std::filesystem::canonical(tmp.path()) / "rel" / "rankfile");
}

TEST_CASE("an invalid allocation writes no files, and an unwritable directory is an error") {
  aqs::test::temp_dir tmp("aqs-mpi-adapter");
  CHECK_THROWS_AS(write_launch_files(tmp.path() / "x", on({{"a", -1}})), allocation_error);
  CHECK(!std::filesystem::exists(tmp.path() / "x"));
  { std::ofstream(tmp.path() / "file") << "not a directory"; }
  CHECK_THROWS_AS(write_launch_files(tmp.path() / "file", on({{"a", 0}})), std::exception);
}
