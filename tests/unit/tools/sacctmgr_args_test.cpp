// Unit tests of aqs-sacctmgr's command line as Slurm's sacctmgr reads it, and
// of its settings applied to accounts, users and QOS (all or nothing).
#include <doctest/doctest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "slurm/sacctmgr_args.hpp"

using namespace aqs;
using namespace aqs::slurm;

TEST_CASE("the workflow engines' query parses as Slurm's: -n -s list user NAME format=account%20") {
  const sacctmgr_command c = parse_sacctmgr({"-n", "-s", "list", "user", "alice", "format=account%20"});
  CHECK(c.verb == sacctmgr_verb::show);
  CHECK(c.entity == sacctmgr_entity::user);
  CHECK(c.names == std::vector<std::string>{"alice"});
  CHECK(c.with_assoc);
  CHECK_FALSE(c.header);
  REQUIRE(c.format.size() == 1);
  CHECK(c.format[0].name == "Account");
  CHECK(c.format[0].len == 20);
}

TEST_CASE("add, modify and delete read names, where and set as sacctmgr does") {
  sacctmgr_command a = parse_sacctmgr({"-i", "add", "account", "physics,chem", "Parent=root", "Fairshare=40",
                                       "GrpTRES=cpu=64", "Description=Dept"});
  CHECK(a.verb == sacctmgr_verb::add);
  CHECK(a.entity == sacctmgr_entity::account);
  CHECK(a.immediate);
  CHECK(a.names == std::vector<std::string>{"physics", "chem"});
  REQUIRE(a.settings.size() == 4);
  CHECK(a.settings[2] == std::pair<std::string, std::string>{"GrpTRES", "cpu=64"});

  sacctmgr_command u = parse_sacctmgr({"create", "user", "alice", "Account=physics", "DefaultAccount=physics"});
  CHECK(u.entity == sacctmgr_entity::user);
  CHECK(u.accounts == std::vector<std::string>{"physics"});
  REQUIRE(u.settings.size() == 1);

  sacctmgr_command m =
      parse_sacctmgr({"modify", "user", "where", "name=alice", "account=physics", "set", "MaxJobs=4", "MaxWall=60"});
  CHECK(m.verb == sacctmgr_verb::modify);
  CHECK(m.names == std::vector<std::string>{"alice"});
  CHECK(m.accounts == std::vector<std::string>{"physics"});
  CHECK(m.settings.size() == 2);

  sacctmgr_command d = parse_sacctmgr({"delete", "qos", "where", "name=high"});
  CHECK(d.verb == sacctmgr_verb::remove);
  CHECK(d.entity == sacctmgr_entity::qos);
  CHECK(d.names == std::vector<std::string>{"high"});
  CHECK(parse_sacctmgr({"-P", "show", "assoc"}).with_assoc);
  CHECK(parse_sacctmgr({"-P", "show", "qos"}).style == print_style::parsable2);
  CHECK(parse_sacctmgr({"-p", "show", "qos"}).style == print_style::parsable);
}

TEST_CASE("sacctmgr command lines it would refuse are refused with one line") {
  auto refused = [](std::vector<std::string> args, const std::string& words) {
    try {
      parse_sacctmgr(args);
      FAIL("not refused");
    } catch (const std::invalid_argument& e) {
      const std::string what = e.what();
      CAPTURE(what);
      CHECK(what.find(words) != std::string::npos);
      CHECK(what.find('\n') == std::string::npos);
    }
  };
  refused({"-x", "show", "user"}, "Unknown option: -x");
  refused({}, "no command given");
  refused({"frobnicate", "user"}, "unknown command");
  refused({"add"}, "needs account, user or qos");
  refused({"add", "cluster", "c1"}, "not 'cluster'");
  refused({"add", "account"}, "needs an account, user or qos name");
  refused({"add", "user", "bob"}, "add user needs Account=NAME");
  refused({"modify", "account", "physics"}, "modify needs 'set'");
  refused({"modify", "account", "physics", "set", "MaxJobs"}, "needs a value");
  refused({"show", "user", "format=bogus"}, "Unknown field 'bogus'");
  refused({"add", "account", "x", "set", "MaxJobs=1"}, "'set' belongs to modify");
}

TEST_CASE("settings apply all or nothing, with core's one-line refusals") {
  core::account a;
  a.name = "physics";
  a.parent = "root";
  sacctmgr_command c = parse_sacctmgr({"add", "account", "physics", "Fairshare=40", "GrpTRES=cpu=64"});
  CHECK_FALSE(apply_settings(a, c));
  CHECK(a.shares == 40u);
  CHECK(a.lim.grp_cpus == 64u);
  const core::account before = a;
  c = parse_sacctmgr({"modify", "account", "physics", "set", "Fairshare=1", "MaxJobs=-5"});
  auto e = apply_settings(a, c);
  REQUIRE(e);
  CHECK(*e == "MaxJobs must be a whole number from 0 to 10000000 (or -1 to clear), not '-5'");
  CHECK(a.shares == before.shares);  // the Fairshare=1 before it was not applied either
  c = parse_sacctmgr({"modify", "account", "physics", "set", "Color=red"});
  CHECK(apply_settings(a, c) == std::optional<std::string>("Unknown option: Color=red (for an account)"));

  core::user_association u;
  u.user = "alice";
  u.account = "physics";
  std::string def;
  c = parse_sacctmgr({"add", "user", "alice", "Account=physics", "DefaultAccount=physics", "MaxSubmitJobs=10"});
  CHECK_FALSE(apply_settings(u, c, &def));
  CHECK(def == "physics");
  CHECK(u.lim.max_submit_jobs == 10u);

  core::qos q;
  q.name = "high";
  c = parse_sacctmgr({"add", "qos", "high", "Priority=100", "MaxJobsPerUser=2", "MaxTRESPerUser=cpu=8",
                      "MaxSubmitJobsPerUser=5"});
  CHECK_FALSE(apply_settings(q, c));
  CHECK(q.priority == 100u);
  CHECK(q.lim.max_jobs == 2u);
  CHECK(q.lim.max_submit_jobs == 5u);
  CHECK(q.lim.max_cpus_per_user == 8u);
  c = parse_sacctmgr({"modify", "qos", "high", "set", "Priority=-1"});
  CHECK(apply_settings(q, c));
  CHECK(q.priority == 100u);
}
