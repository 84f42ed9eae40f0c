// slurm_commands: Slurm's command lines read as getopt_long reads them.
#include <doctest/doctest.h>

#include "slurm/slurm_client.hpp"
#include "slurm/slurm_commands.hpp"

using namespace aqs;
using core::job_state;

namespace {
std::vector<std::string> words(std::initializer_list<const char*> w) { return {w.begin(), w.end()}; }
}  // namespace

TEST_CASE("the command's name comes from argv[0] without the aqs- prefix, so a symlink named squeue says squeue") {
  CHECK(slurm::command_name("/usr/bin/aqs-squeue", "x") == "squeue");
  CHECK(slurm::command_name("/tmp/bin/sbatch", "x") == "sbatch");
  CHECK(slurm::command_name("", "sacct") == "sacct");
}

TEST_CASE("squeue takes Nextflow's status query, with -t all and with --only-job-state") {
  // nextflow SlurmExecutor.groovy queueStatusCommand: squeue --noheader -o '%i %t' -t all [-p Q -u U | --only-job-state]
  auto c = slurm::parse_squeue_command_line(words({"--noheader", "-o", "%i %t", "-t", "all", "-p", "main", "-u", "alice"}));
  CHECK(c.noheader);
  CHECK(*c.format == "%i %t");
  CHECK(c.states->size() == core::k_all_job_states.size());
  c = slurm::parse_squeue_command_line(words({"--noheader", "-o", "%i %t", "-t", "all", "--only-job-state"}));
  CHECK(c.users.empty());
}

TEST_CASE("squeue reads clustered flags, attached values, long names, prefixes and positional ids") {
  const auto c = slurm::parse_squeue_command_line(words({"-ho", "%i %t", "-u", "alice,bob", "--states=PD,r", "--me",
                                                         "-j", "4,5", "--json", "--nohead", "6"}));
  CHECK(c.noheader);
  CHECK(*c.format == "%i %t");
  CHECK(c.users.size() == 3);
  CHECK(c.job_ids == std::vector<std::int64_t>{4, 5, 6});
  CHECK(c.states->size() == 3);  // PENDING, RUNNING, RESIZING
  CHECK(c.json);
  CHECK_THROWS_AS(slurm::parse_squeue_command_line(words({"--bogus"})), slurm::usage_error);
  CHECK_THROWS_WITH(slurm::parse_squeue_command_line(words({"--bogus"})),
                    "unrecognized option '--bogus'\nTry \"squeue --help\" for more information");
  CHECK_THROWS_AS(slurm::parse_squeue_command_line(words({"-t", "RUNNNING"})), slurm::command_error);
  CHECK_THROWS_AS(slurm::parse_squeue_command_line(words({"-o", "%i", "-O", "jobid"})), slurm::command_error);
}

TEST_CASE("scancel takes ids, users, names, states and signals; a step or array suffix names the job") {
  const auto c = slurm::parse_scancel_command_line(words({"12", "13.batch", "-s", "USR1", "-u", "bob", "-n", "x", "-t", "PD"}));
  CHECK(c.job_ids == std::vector<std::int64_t>{12, 13});
  CHECK(*c.signal == 10);
  CHECK(c.users == std::vector<std::string>{"bob"});
  CHECK(*c.name == "x");
  CHECK(slurm::has_filter(c));
  CHECK_FALSE(slurm::has_filter(slurm::parse_scancel_command_line(words({"12"}))));
  CHECK_THROWS_WITH(slurm::parse_scancel_command_line(words({"abc"})), "Invalid job id abc");
}

TEST_CASE("scancel ARRAY_TASK names that one task of the array, as submitit's cancel of one map task needs") {
  // submitit core.py cancel: [scancel, "<array>_<index>"]; "_[1-3]" still means the whole array.
  const auto c = slurm::parse_scancel_command_line(words({"12_4", "13", "14_[1-3]", "15_0"}));
  CHECK(c.job_ids == std::vector<std::int64_t>{13, 14});
  CHECK(c.array_tasks == std::vector<std::pair<std::int64_t, std::int64_t>>{{12, 4}, {15, 0}});
}

TEST_CASE("sinfo -p/--partition takes a comma list; the last one given counts") {
  CHECK(slurm::parse_sinfo_command_line(words({"-p", "debug,batch"})).partitions ==
        std::vector<std::string>{"debug", "batch"});
  CHECK(slurm::parse_sinfo_command_line(words({"--partition=gpu"})).partitions == std::vector<std::string>{"gpu"});
  CHECK(slurm::parse_sinfo_command_line(words({"-pdebug", "-p", "batch,"})).partitions ==
        std::vector<std::string>{"batch"});
  CHECK(slurm::parse_sinfo_command_line(words({"-h"})).partitions.empty());
}

TEST_CASE("sacct takes the options workflow tools pass") {
  const auto c = slurm::parse_sacct_command_line(
      words({"-P", "-n", "--format=JobIdRaw,State", "-j", "41", "-X", "--name", "r1", "-S", "now-2days", "-E", "now"}));
  CHECK(c.parsable2);
  CHECK(c.noheader);
  CHECK(*c.format == "JobIdRaw,State");
  CHECK(c.job_ids == std::vector<std::int64_t>{41});
  CHECK(c.allocations);
  CHECK(c.names == std::vector<std::string>{"r1"});
  const auto u = slurm::parse_sacct_command_line(words({"-nu", "alice", "-o", "Account%20"}));
  CHECK(u.noheader);
  CHECK(u.users == std::vector<std::string>{"alice"});
  CHECK(*u.format == "Account%20");
}

TEST_CASE("sacct times: now with offsets, dates, clock times and words") {
  const std::time_t now = 1772359235;
  CHECK(*slurm::parse_sacct_time("now", now) == now);
  CHECK(*slurm::parse_sacct_time("now-2days", now) == now - 2 * 86400);
  CHECK(*slurm::parse_sacct_time("now-30minutes", now) == now - 1800);
  CHECK(*slurm::parse_sacct_time("now+10", now) == now + 10);
  CHECK(slurm::parse_sacct_time("2026-03-01", now).has_value());
  CHECK(slurm::parse_sacct_time("2026-03-01T09:30", now).has_value());
  CHECK(slurm::parse_sacct_time("2026-03-01T09:30:10", now).has_value());
  CHECK(*slurm::parse_sacct_time("2026-03-01T09:30:10", now) - *slurm::parse_sacct_time("2026-03-01", now) == 34210);
  CHECK(slurm::parse_sacct_time("midnight", now).has_value());
  CHECK_FALSE(slurm::parse_sacct_time("yesterdayish", now).has_value());
  CHECK_FALSE(slurm::parse_sacct_time("now-2fortnights", now).has_value());
}

TEST_CASE("sbatch/srun options AQS does not act on are dropped with a warning only when fsub/frun do not know them") {
  const auto nobody_knows = [](const std::string&, const std::optional<std::string>&) { return false; };
  const auto t = slurm::translate_submit_args(
      words({"-J", "x", "--export=ALL", "-A", "acct", "-p", "main", "--mem", "1000", "--cpus-per-task=1", "-D", "/tmp",
             "--wrap=echo hi"}),
      false, nobody_knows);
  CHECK(t.args == words({"-J", "x", "-D", "/tmp", "--wrap=echo hi"}));
  REQUIRE(t.warnings.size() == 5);
  CHECK(t.warnings[0] == "--export=ALL is not supported by AQS; ignored");
  CHECK(t.warnings[1] == "-A=acct is not supported by AQS; ignored");
  // Known options pass untouched, and the script ends the options.
  const auto known = [](const std::string& o, const std::optional<std::string>&) { return o == "--mem"; };
  const auto k = slurm::translate_submit_args(words({"--mem=4G", "--qos", "high", "job.sh", "--export=x"}), false, known);
  CHECK(k.args == words({"--mem=4G", "job.sh", "--export=x"}));
  CHECK(k.warnings.size() == 1);
  // srun: launcher options go, the command and its options stay.
  const auto s = slurm::translate_submit_args(words({"-n1", "--cpu-bind=q", "--mpi=pmix", "snakemake", "-j", "1"}), true,
                                              nobody_knows);
  CHECK(s.args == words({"-n1", "snakemake", "-j", "1"}));
  CHECK(s.warnings.size() == 2);
}

TEST_CASE("fsub's complaints read as Slurm's: an unknown option as getopt says it, help pointing at the Slurm name") {
  bool getopt_style = false;
  CHECK(slurm::slurm_usage_message("unknown option '--bogus' (see fsub --help)", "sbatch", getopt_style) ==
        "unrecognized option '--bogus'\nTry \"sbatch --help\" for more information");
  CHECK(getopt_style);
  CHECK(slurm::slurm_usage_message("invalid time '1:2:3:4' (see frun --help)", "srun", getopt_style) ==
        "invalid time '1:2:3:4' (see srun --help)");
  CHECK_FALSE(getopt_style);
}

TEST_CASE("sbatch and srun skip the value of every option that takes one, as the declaration says") {
  // Their own copy of the option table lacked fsub's --faucets and frun's
  // --time-min: `sbatch --faucets URL -W` kept -W (then refused by fsub),
  // and `srun --time-min 5 cmd` took "5" for the command.
  auto w = words({"--faucets", "https://f:1", "-W", "--wrap=true"});
  CHECK(slurm::take_flag(w, {"-W", "--wait"}));
  CHECK(w == words({"--faucets", "https://f:1", "--wrap=true"}));
  const auto all = [](const std::string&, const std::optional<std::string>&) { return true; };
  const auto t = slurm::translate_submit_args(words({"--time-min", "5", "-n", "2", "hostname"}), true, all);
  CHECK(t.command_at == 4);
  CHECK(t.args == words({"--time-min", "5", "-n", "2", "hostname"}));
}
