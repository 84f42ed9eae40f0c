// Unit tests of aqs-sacctmgr's, aqs-sshare's and aqs-sprio's output, byte
// for byte as Slurm 22.05's print_fields and sprio print them.
#include <doctest/doctest.h>

#include <ctime>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/accounts.hpp"
#include "core/fairshare.hpp"
#include "slurm/accounting_format.hpp"

using namespace aqs;
using namespace aqs::slurm;

namespace {

core::account_tree tree() {
  core::account_tree t;
  core::account root;
  root.name = "root";
  root.description = "default root account";
  root.organization = "root";
  core::account physics;
  physics.name = "physics";
  physics.parent = "root";
  physics.description = "Department of Physics";
  physics.organization = "science";
  REQUIRE(core::set_limit(physics.lim, "GrpTRES", "cpu=64") == std::optional<std::string>(""));
  t.accounts = {root, physics};
  core::user_association alice;
  alice.user = "alice";
  alice.account = "physics";
  alice.shares = 3;
  REQUIRE(core::set_limit(alice.lim, "MaxJobs", "4") == std::optional<std::string>(""));
  REQUIRE(core::set_limit(alice.lim, "MaxWall", "1-12:00:00") == std::optional<std::string>(""));
  core::user_association alice_root = alice;
  alice_root.account = "root";
  alice_root.lim = {};
  alice_root.shares = 1;
  t.associations = {alice, alice_root};
  t.default_account["alice"] = "physics";
  core::qos normal;
  normal.name = "normal";
  normal.description = "Normal QOS default";
  t.qos_list = {normal};
  return t;
}

}  // namespace

TEST_CASE("print_fields: right- and left-justified columns, '+' on cut text, dashes, blanks for unset") {
  std::vector<print_field> f = {{"Account", 10, value_kind::text, "a"},
                                {"Left", -6, value_kind::text, "b"},
                                {"N", 4, value_kind::number, "c"},
                                {"Real", 9, value_kind::real, "d"}};
  std::vector<std::vector<print_value>> rows = {{std::string("physics"), std::string("x"), std::string("12"), std::string("0.5")},
                                                {std::string("averyverylongname"), std::nullopt, std::nullopt, std::nullopt}};
  CHECK(render_print_fields(f, rows, print_style::table, true) ==
        "   Account Left      N      Real \n"
        "---------- ------ ---- --------- \n"
        "   physics x        12  0.500000 \n"
        "averyvery+                       \n");
  CHECK(render_print_fields(f, rows, print_style::parsable2, true) ==
        "Account|Left|N|Real\n"
        "physics|x|12|0.500000\n"
        "averyverylongname|||\n");
  CHECK(render_print_fields(f, rows, print_style::parsable, false) ==
        "physics|x|12|0.500000|\n"
        "averyverylongname||||\n");
}

TEST_CASE("sacctmgr field names follow Slurm's prefix rule and %width; unknown ones are refused as sacctmgr does") {
  CHECK(sacctmgr_field("account").name == "Account");
  CHECK(sacctmgr_field("acc").name == "Account");
  CHECK(sacctmgr_field("Acct").name == "Account");
  CHECK_THROWS_WITH_AS(sacctmgr_field("ac"), "Unknown field 'ac'", std::invalid_argument);
  CHECK(sacctmgr_field("account%20").len == 20);
  CHECK(sacctmgr_field("account%-20").len == -20);
  CHECK(sacctmgr_field("DefaultA").name == "Def Acct");
  CHECK(sacctmgr_field("MaxTRESPU").name == "MaxTRESPU");
  CHECK(sacctmgr_field("MaxJ").name == "MaxJobs");
  CHECK(sacctmgr_field("MaxW").name == "MaxWall");
  CHECK(sacctmgr_field("u").name == "User");
  CHECK(sacctmgr_field("share").name == "Share");
  CHECK_THROWS_AS(sacctmgr_field("bogus"), std::invalid_argument);
  CHECK(sacctmgr_default_format(sacctmgr_entity::user, false).size() == 3);
  CHECK(sacctmgr_default_format(sacctmgr_entity::user, true).size() == 16);
}

TEST_CASE("the workflow engines' account check: sacctmgr -n -s list user NAME format=account%20") {
  const core::account_tree t = tree();
  sacctmgr_query q;
  q.names = {"alice"};
  q.with_assoc = true;
  CHECK(sacctmgr_show(t, sacctmgr_entity::user, sacctmgr_format("account%20"), q, print_style::table, false) ==
        "             physics \n"
        "                root \n");
  // -P, and a user with no account: nothing.
  CHECK(sacctmgr_show(t, sacctmgr_entity::user, sacctmgr_format("account"), q, print_style::parsable2, false) ==
        "physics\nroot\n");
  q.names = {"mallory"};
  CHECK(sacctmgr_show(t, sacctmgr_entity::user, sacctmgr_format("account%20"), q, print_style::table, false).empty());
}

TEST_CASE("sacctmgr show user and account print Slurm's default columns") {
  const core::account_tree t = tree();
  sacctmgr_query q;
  CHECK(sacctmgr_show(t, sacctmgr_entity::user, sacctmgr_default_format(sacctmgr_entity::user, false), q,
                      print_style::table, true) ==
        "      User   Def Acct     Admin \n"
        "---------- ---------- --------- \n"
        "     alice    physics      None \n");
  CHECK(sacctmgr_show(t, sacctmgr_entity::account, sacctmgr_default_format(sacctmgr_entity::account, false), q,
                      print_style::parsable2, true) ==
        "Account|Descr|Org\n"
        "physics|Department of Physics|science\n"
        "root|default root account|root\n");
  // Limits of an association: MaxJobs, MaxWall in Slurm's minutes form, GrpTRES as TRES text.
  q.with_assoc = true;
  q.names = {"alice"};
  CHECK(sacctmgr_show(t, sacctmgr_entity::user, sacctmgr_format("User,Account,Share,MaxJobs,MaxWall,GrpTRES"), q,
                      print_style::parsable2, true) ==
        "User|Account|Share|MaxJobs|MaxWall|GrpTRES\n"
        "alice|physics|3|4|1-12:00:00|\n"
        "alice|root|1|||\n");
  q.names = {"physics"};
  CHECK(sacctmgr_show(t, sacctmgr_entity::account, sacctmgr_format("Account,ParentName,User,GrpTRES"), q,
                      print_style::parsable2, false) ==
        "physics|root||cpu=64\n"
        "physics||alice|\n");
  sacctmgr_query all;
  CHECK(sacctmgr_show(t, sacctmgr_entity::qos, sacctmgr_format("Name,Priority,UsageFactor"), all, print_style::table,
                      true) ==
        "      Name   Priority UsageFactor \n"
        "---------- ---------- ----------- \n"
        "    normal          0    1.000000 \n");
}

TEST_CASE("sshare prints the tree indented, with Slurm's widths and -P") {
  core::account_tree t;
  core::account root;
  root.name = "root";
  core::account a;
  a.name = "physics";
  a.parent = "root";
  t.accounts = {root, a};
  core::user_association u1;
  u1.user = "alice";
  u1.account = "physics";
  core::user_association u2 = u1;
  u2.user = "bob";
  t.associations = {u1, u2};
  const core::account_index idx(t);
  const core::fair_share_result fs = core::fair_share(idx, {300, 100});
  CHECK(sshare_show(fs, sshare_default_format(false), {}, print_style::table, true) ==
        "Account                    User  RawShares  NormShares    RawUsage  EffectvUsage  FairShare \n"
        "-------------------- ---------- ---------- ----------- ----------- ------------- ---------- \n"
        "root                                          1.000000         400      1.000000            \n"
        " physics                                 1    1.000000         400      1.000000            \n"
        "  physics                 alice          1    0.500000         300      0.875000   0.297302 \n"
        "  physics                   bob          1    0.500000         100      0.625000   0.420448 \n");
  CHECK(sshare_show(fs, sshare_format("Account,User,FairShare"), {"bob"}, print_style::parsable2, false) ==
        "root||\n"
        " physics||\n"
        "  physics|bob|0.420448\n");
  CHECK_THROWS_WITH_AS(sshare_format("Account,Bogus"), "Invalid field requested: \"Bogus\"", std::invalid_argument);
}

TEST_CASE("sprio's default columns drop the factors weighted 0, and print weighted factors as whole numbers") {
  core::priority_weights w;
  w.age = 1000;
  w.fairshare = 10000;
  CHECK(sprio_default_format(w, false) == "%.15i %9r %.10Y %.10A %.10F");
  sprio_job j;
  j.priority.id = 42;
  j.priority.value = 5500;
  j.priority.factors.age = 0.5;
  j.priority.factors.fairshare = 0.5;
  j.partition = "main";
  const auto fields = sprio_format(sprio_default_format(w, false));
  CHECK(sprio_show({j}, w, fields, true) ==
        "          JOBID PARTITION   PRIORITY        AGE  FAIRSHARE\n"
        "             42 main            5500        500       5000\n");
  CHECK(sprio_show({j}, w, sprio_format("%i %.10a"), false) == "42  0.5000000\n");
  CHECK_THROWS_WITH_AS(sprio_format("%.15i %Z"), "Invalid job format specification: Z", std::invalid_argument);
  CHECK(sprio_weights(w) ==
        "          JOBID PARTITION   PRIORITY        AGE  FAIRSHARE\n"
        "        Weights                            1000      10000\n");
}

TEST_CASE("sreport: start= and end= as Slurm reads them; anything else is one line") {
  setenv("TZ", "UTC", 1);
  tzset();
  const std::int64_t now = 1'764'300'000;  // 2025-11-28T03:20:00Z
  CHECK(aqs::slurm::parse_report_time("2025-11-27", now) == 1'764'201'600);
  CHECK(aqs::slurm::parse_report_time("2025-11-27T01:02:03", now) == 1'764'201'600 + 3723);
  CHECK(aqs::slurm::parse_report_time("2025-11-27T01:02", now) == 1'764'201'600 + 3720);
  CHECK(aqs::slurm::parse_report_time("11/27/25", now) == 1'764'201'600);
  CHECK(aqs::slurm::parse_report_time("today", now) == 1'764'288'000);
  CHECK(aqs::slurm::parse_report_time("yesterday", now) == 1'764'201'600);
  CHECK(aqs::slurm::parse_report_time("now", now) == now);
  CHECK(aqs::slurm::parse_report_time("1700000000", now) == 1'700'000'000);
  for (const char* bad : {"", "2025-13-01", "tomorrowish", "2025-11-27T25:00", "-5", "2025-11-27x"}) {
    CAPTURE(bad);
    CHECK_THROWS_AS(aqs::slurm::parse_report_time(bad, now), std::invalid_argument);
  }
}

TEST_CASE("sreport: AccountUtilizationByUser has the account's total, then its users, in minutes by default") {
  setenv("TZ", "UTC", 1);
  tzset();
  const std::vector<aqs::slurm::usage_row> rows = {
      {"bob", "physics", 2, 1200}, {"alice", "physics", 1, 600}, {"carol", "chem", 3, 3600}};
  const std::string p = aqs::slurm::sreport_account_utilization(rows, 1'764'201'600, 1'764'288'000, "minutes",
                                                                aqs::slurm::print_style::parsable2, false);
  CHECK(p == "aqs|chem|||60\naqs|chem|carol|carol|60\naqs|physics|||30\naqs|physics|alice|alice|10\naqs|physics|bob|bob|20\n");
  const std::string t = aqs::slurm::sreport_account_utilization(rows, 1'764'201'600, 1'764'288'000, "hours",
                                                                aqs::slurm::print_style::table, true);
  CHECK(t.find("Cluster/Account/User Utilization 2025-11-27T00:00:00 - 2025-11-27T23:59:59 (86400 secs)") != std::string::npos);
  CHECK(t.find("Usage reported in CPU Hours") != std::string::npos);
  const std::string pct = aqs::slurm::sreport_account_utilization(rows, 0, 10, "percent",
                                                                  aqs::slurm::print_style::parsable2, false);
  CHECK(pct.find("aqs|chem|||66.67%") != std::string::npos);
}
