// Unit tests of the reservation commands' pure parts: scontrol's
// create/update/delete reservation words, the records they make, and the
// two listings (scontrol show reservation, sinfo -T).
#include <doctest/doctest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "slurm/reservations.hpp"
#include "slurm/scontrol.hpp"
#include "slurm/slurm_commands.hpp"

using namespace aqs::slurm;

namespace {

using words = std::vector<std::string>;

std::string error_of(const words& w, bool create = true) {
  try {
    (void)reservation_record(w, 1'800'000'000, create);
  } catch (const command_error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("scontrol create reservation: Slurm's keys in any case become the record") {
  const auto rec = reservation_record(words{"ReservationName=maint", "starttime=now+60", "Duration=1:30:00",
                                            "Users=root,ann", "NODES=node[1-2]", "Flags=maint"},
                                      1'800'000'000, true);
  CHECK(rec["name"] == "maint");
  CHECK(rec["start_s"] == 1'800'000'060);
  CHECK(rec["duration_s"] == 5400);
  CHECK(rec["users"] == nlohmann::json::array({"root", "ann"}));
  CHECK(rec["nodes"] == "node[1-2]");
  CHECK(rec["flags"] == nlohmann::json::array({"MAINT"}));
  // Duration in minutes, CoreCnt, Accounts, start now by default.
  const auto r2 = reservation_record(words{"Reservation=c", "Duration=10", "CoreCnt=8", "Accounts=chem"}, 1'800'000'000, true);
  CHECK(r2["start_s"] == 1'800'000'000);
  CHECK(r2["duration_s"] == 600);
  CHECK(r2["core_count"] == 8);
}

TEST_CASE("scontrol create reservation: bad or missing keys are one line each") {
  CHECK(error_of({"ReservationName=m", "Duration=abc", "Users=root", "Nodes=n1"}) ==
        "Duration=abc: expected minutes or [D-]HH:MM:SS, not unlimited");
  CHECK(error_of({"ReservationName=m", "Duration=10", "Users=root", "Nodes=ALL"}).find("Nodes=ALL") == 0);
  CHECK(error_of({"ReservationName=m", "Duration=10", "Users=root"}) == "Nodes= or CoreCnt= is required");
  CHECK(error_of({"ReservationName=m", "Duration=10", "Nodes=n1"}) == "Users= or Accounts= is required");
  CHECK(error_of({"Duration=10", "Users=root", "Nodes=n1"}) == "ReservationName= is required");
  CHECK(error_of({"ReservationName=m", "Users=root", "Nodes=n1"}) == "Duration= or EndTime= is required");
  CHECK(error_of({"ReservationName=m", "Duration=10", "Users=root", "Nodes=n1", "Flags=DAILY"}) ==
        "Flags=DAILY: AQS knows MAINT and IGNORE_JOBS");
  CHECK(error_of({"ReservationName=m", "Duration=10", "Users=root", "CoreCnt=0"}) == "CoreCnt=0: expected a positive count");
  CHECK(error_of({"ReservationName=m", "Licenses=x"}).find("reservation key Licenses is not supported") == 0);
  CHECK(error_of({"ReservationName=m", "Users=a,,b"}, false) == "Users=a,,b: an empty name in the list");
  CHECK(error_of({"ReservationName=m", "StartTime=whenever"}, false).find("StartTime=whenever") == 0);
  // An update needs only the name and what changes.
  CHECK(error_of({"ReservationName=m", "Duration=20"}, false) == "(no error)");
}

TEST_CASE("scontrol's reservation verbs parse as Slurm's do") {
  auto cmd = parse_scontrol_command_line(words{"create", "reservation", "ReservationName=m", "Duration=5"});
  CHECK(cmd.verb == "create");
  CHECK(cmd.entity == "reservation");
  CHECK(cmd.words == words{"ReservationName=m", "Duration=5"});
  cmd = parse_scontrol_command_line(words{"update", "ReservationName=m", "Duration=5"});
  CHECK(cmd.verb == "update");
  CHECK(cmd.entity == "reservation");
  CHECK(cmd.words == words{"ReservationName=m", "Duration=5"});
  cmd = parse_scontrol_command_line(words{"delete", "reservation", "m"});
  CHECK(cmd.words == words{"m"});
  cmd = parse_scontrol_command_line(words{"delete", "ReservationName=m"});
  CHECK(cmd.words == words{"m"});
  cmd = parse_scontrol_command_line(words{"show", "res"});
  CHECK(cmd.entity == "reservation");
  // A job update is still a job update.
  cmd = parse_scontrol_command_line(words{"update", "JobId=4", "TimeLimit=10"});
  CHECK(cmd.entity.empty());
  CHECK_THROWS_AS(parse_scontrol_command_line(words{"create", "partition", "x"}), command_error);
  CHECK_THROWS_AS(parse_scontrol_command_line(words{"delete", "reservation"}), command_error);
  CHECK(parse_sinfo_command_line(words{"-T"}).reservations);
}

TEST_CASE("scontrol show reservation and sinfo -T lay reservations out as Slurm does") {
  ::setenv("TZ", "UTC", 1);
  const auto reply = nlohmann::json::parse(R"({"reservations":[{"name":"maint","start_s":1800000000,"end_s":1800000600,
    "state":"INACTIVE","nodes":"node1","node_count":1,"core_count":4,"procs":"node1:0-3","users":["root"],
    "accounts":[],"flags":["MAINT"],"created_by":"root"}]})");
  CHECK(scontrol_show_reservations(reply, false) ==
        "ReservationName=maint StartTime=2027-01-15T08:00:00 EndTime=2027-01-15T08:10:00 Duration=00:10:00\n"
        "   Nodes=node1 NodeCnt=1 CoreCnt=4 Features=(null) PartitionName=(null) Flags=MAINT\n"
        "   TRES=cpu=4\n"
        "   Users=root Groups=(null) Accounts=(null) Licenses=(null) State=INACTIVE BurstBuffer=(null) Watts=n/a\n"
        "   MaxStartDelay=(null)\n\n");
  CHECK(scontrol_show_reservations(reply, true).find("Duration=00:10:00 Nodes=node1") != std::string::npos);
  CHECK(scontrol_show_reservations(nlohmann::json::parse(R"({"reservations":[]})"), false) ==
        "No reservations in the system\n");
  CHECK(sinfo_reservations(reply, true) ==
        "RESV_NAME         STATE           START_TIME             END_TIME     DURATION  NODELIST\n"
        "maint          INACTIVE  2027-01-15T08:00:00  2027-01-15T08:10:00     00:10:00  node1\n");
}
