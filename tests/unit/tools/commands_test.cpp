// Unit tests of fkill/fjobs/fnodes argument parsing, signal names and socket resolution.
#include <doctest/doctest.h>

#include <csignal>
#include <string>
#include <utility>
#include <vector>

#include "cmdline/commands.hpp"
#include "cmdline/job_options.hpp"
#include "cmdline/usage_error.hpp"
#include "thrown.hpp"

using namespace aqs::cmdline;
using args = std::vector<std::string>;
using aqs::core::job_state;

namespace {
template <class F>
std::string error_of(F&& f) {
  return aqs::test::thrown<usage_error>(std::forward<F>(f));
}
}  // namespace

TEST_CASE("the socket is --socket, else $AQS_SOCKET, else the system default") {
  CHECK(resolve_socket_path(std::string("/a.sock"), "/env.sock", "/sys.sock") == "/a.sock");
  CHECK(resolve_socket_path(std::nullopt, "/env.sock", "/sys.sock") == "/env.sock");
  CHECK(resolve_socket_path(std::nullopt, "", "/sys.sock") == "/sys.sock");
  CHECK(resolve_socket_path(std::nullopt, nullptr, "/sys.sock") == "/sys.sock");
  CHECK(parse_fsub_command_line(args{"--socket=/x.sock", "j.sh"}).options.socket == "/x.sock");
  CHECK(parse_frun_command_line(args{"--socket", "/x.sock", "ls"}).options.socket == "/x.sock");
  CHECK(parse_fjobs_command_line(args{"--socket", "/y.sock"}).common.socket == "/y.sock");
}

TEST_CASE("signals are accepted by name, with or without SIG, in any case, or by number") {
  CHECK(parse_signal("TERM") == SIGTERM);
  CHECK(parse_signal("SIGKILL") == SIGKILL);
  CHECK(parse_signal("int") == SIGINT);
  CHECK(parse_signal("usr1") == SIGUSR1);
  CHECK(parse_signal("9") == 9);
  CHECK(parse_signal("64") == 64);
  for (const char* bad : {"", "0", "65", "TERMX", "SIG", "-9", "100", "1.5"}) {
    CAPTURE(bad);
    CHECK(error_of([&] { parse_signal(bad); }).find("invalid signal") == 0);
  }
}

TEST_CASE("fkill takes ids and options in any order and builds a cancel") {
  const auto k = parse_fkill_command_line(args{"12", "--signal=KILL", "13", "12", "-u", "bob"});
  CHECK(k.job_ids == std::vector<std::int64_t>{12, 13});
  CHECK(k.signal == SIGKILL);
  CHECK(k.user == "bob");
  const auto c = build_cancel(k);
  CHECK(c.job_ids == k.job_ids);
  CHECK(c.signal == SIGKILL);
  CHECK(c.user == "bob");
  const auto all_of_user = build_cancel(parse_fkill_command_line(args{"--user", "alice"}));
  CHECK(all_of_user.job_ids.empty());
  CHECK_FALSE(all_of_user.signal.has_value());
  CHECK(error_of([] { parse_fkill_command_line(args{}); }).find("no job id") != std::string::npos);
  CHECK(error_of([] { parse_fkill_command_line(args{"x12"}); }).find("invalid job id 'x12'") != std::string::npos);
  CHECK(error_of([] { parse_fkill_command_line(args{"0"}); }).find("invalid job id '0'") != std::string::npos);
  CHECK(error_of([] { parse_fkill_command_line(args{"1", "--all"}); }).find("unknown option '--all'") != std::string::npos);
  CHECK(error_of([] { parse_fkill_command_line(args{"1", "-s"}); }).find("needs a value") != std::string::npos);
  CHECK(parse_fkill_command_line(args{"--help"}).common.help);
}

TEST_CASE("fctl takes an action, ids and update's options and builds a control request") {
  const auto h = parse_fctl_command_line(args{"hold", "12", "13", "12", "--json"});
  CHECK(h.action == "hold");
  CHECK(h.job_ids == std::vector<std::int64_t>{12, 13});
  CHECK(h.common.json);
  const auto u = build_control(parse_fctl_command_line(args{"update", "7", "--min", "4", "--max=8", "-t", "1:00:00"}));
  CHECK(u.action == "update");
  CHECK(u.min_pe == 4);
  CHECK(u.max_pe == 8);
  CHECK(u.time_limit_s == 3600);
  CHECK(parse_fctl_command_line(args{"update", "7", "-t", "UNLIMITED"}).time_limit_s == 0);
  CHECK(error_of([] { parse_fctl_command_line(args{}); }).find("no action given") != std::string::npos);
  CHECK(error_of([] { parse_fctl_command_line(args{"pause", "1"}); }).find("unknown action 'pause'") != std::string::npos);
  CHECK(error_of([] { parse_fctl_command_line(args{"hold"}); }).find("no job id given") != std::string::npos);
  CHECK(error_of([] { parse_fctl_command_line(args{"update", "1"}); }).find("update needs") != std::string::npos);
  CHECK(error_of([] { parse_fctl_command_line(args{"resume", "1", "--max", "2"}); }).find("go with update only") !=
        std::string::npos);
  CHECK(error_of([] { parse_fctl_command_line(args{"update", "1", "--min", "0"}); }).find("invalid --min '0'") !=
        std::string::npos);
  CHECK(error_of([] { parse_fctl_command_line(args{"update", "1", "--min", "5", "--max", "4"}); })
            .find("--min 5 is above --max 4") != std::string::npos);
  CHECK(error_of([] { parse_fctl_command_line(args{"hold", "x"}); }).find("invalid job id 'x'") != std::string::npos);
  CHECK(parse_fctl_command_line(args{"--help"}).common.help);
}

TEST_CASE("fjobs filters become a list_jobs request") {
  const auto j = parse_fjobs_command_line(args{"-a", "-u", "alice", "--json"});
  CHECK(j.all);
  CHECK(j.common.json);
  const auto l = build_list_jobs(j);
  CHECK(l.all);
  CHECK(l.user == "alice");
  const auto s = parse_fjobs_command_line(args{"-t", "running,PENDING,node_fail,running", "-j3,4"});
  CHECK(s.states == std::vector<job_state>{job_state::running, job_state::pending, job_state::node_fail});
  CHECK(s.job_ids == std::vector<std::int64_t>{3, 4});
  CHECK(build_list_jobs(s).all);  // asking for ids or states includes finished ones
  CHECK_FALSE(build_list_jobs(parse_fjobs_command_line(args{})).all);
  CHECK(error_of([] { parse_fjobs_command_line(args{"-t", "done"}); }).find("invalid job state 'done'") != std::string::npos);
  CHECK(error_of([] { parse_fjobs_command_line(args{"-j", "3,,4"}); }).find("invalid job id ''") != std::string::npos);
  CHECK(error_of([] { parse_fjobs_command_line(args{"17"}); }).find("unexpected argument '17'") != std::string::npos);
  CHECK(error_of([] { parse_fjobs_command_line(args{"--all=yes"}); }).find("takes no value") != std::string::npos);
}

TEST_CASE("fjobs --history takes one job id and no filter") {
  const auto h = parse_fjobs_command_line(args{"--history", "17", "--json"});
  CHECK(h.history == 17);
  CHECK(h.common.json);
  CHECK_FALSE(parse_fjobs_command_line(args{}).history);
  CHECK(error_of([] { parse_fjobs_command_line(args{"--history", "x"}); }).find("invalid job id 'x'") != std::string::npos);
  CHECK(error_of([] { parse_fjobs_command_line(args{"--history", "3", "-a"}); }).find("--history shows one job") !=
        std::string::npos);
  CHECK(error_of([] { parse_fjobs_command_line(args{"--history"}); }).find("history") != std::string::npos);
}

TEST_CASE("fnodes accepts only the common options") {
  CHECK(parse_fnodes_command_line(args{"--json"}).common.json);
  CHECK(error_of([] { parse_fnodes_command_line(args{"-a"}); }).find("unknown option '-a'") != std::string::npos);
  CHECK(error_of([] { parse_fnodes_command_line(args{"node1"}); }).find("unexpected argument") != std::string::npos);
}

TEST_CASE("every command's usage text names its options") {
  CHECK(fkill_usage().find("--signal") != std::string::npos);
  CHECK(fkill_usage().find("--user") != std::string::npos);
  CHECK(fjobs_usage().find("--all") != std::string::npos);
  CHECK(fjobs_usage().find("--states") != std::string::npos);
  CHECK(fnodes_usage().find("--json") != std::string::npos);
  for (const auto& u : {fsub_usage(), frun_usage(), fkill_usage(), fjobs_usage(), fnodes_usage()}) {
    CHECK(u.find("--socket") != std::string::npos);
    CHECK(u.find("--help") != std::string::npos);
    CHECK(u.back() == '\n');
  }
}

TEST_CASE("fjobs --limit shows the newest N; the table of --all defaults to a recent window") {
  auto parse = [](std::vector<std::string> args) { return parse_fjobs_command_line(args); };
  CHECK(parse({"--limit", "5"}).limit == 5);
  CHECK(listing_limit(parse({"--limit", "5"})) == 5);
  CHECK(listing_limit(parse({"--all", "--limit=0"})) == std::nullopt);
  CHECK(listing_limit(parse({"--all"})) == k_default_finished_window);
  CHECK(listing_limit(parse({"--all", "--json"})) == std::nullopt);
  CHECK(listing_limit(parse({})) == std::nullopt);
  CHECK_THROWS_AS(parse({"--limit", "x"}), usage_error);
  CHECK_THROWS_AS(parse({"--limit", "-1"}), usage_error);
  CHECK_THROWS_AS(parse({"--history", "3", "--limit", "2"}), usage_error);
}
