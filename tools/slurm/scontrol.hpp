// scontrol: the subset of Slurm's scontrol that maps onto AQS (aqs-scontrol):
// the job verbs of fctl (hold, release, requeue, suspend, resume, update of
// TimeLimit and NumCPUs), and `show job|partition|node|hostnames|hostlist` in
// scontrol's key=value layout, which scripts and workflow tools read. Pure:
// the command line in, the protocol request or the text out; the caller
// talks to aqsd (tools/commands/slurm/scontrol.cpp).
#pragma once

#include <cstdint>
#include <ctime>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "slurm/slurm_format.hpp"
#include "protocol/messages.hpp"
#include "protocol/replies.hpp"

namespace aqs::slurm {

// scontrol [OPTIONS] COMMAND [ARGS]. Commands (any case):
//   hold|uhold|release|requeue|suspend|resume JOBID[,JOBID...] [JOBID...]
//   update JobId=ID[,ID...] [TimeLimit=LIMIT] [NumCPUs=N[-M]]
//   show job [ID] | partition [NAME] | node [NAME] | reservation [NAME] | config | hostnames [LIST] | hostlist LIST
//   create reservation KEY=VALUE... | update reservation ReservationName=NAME KEY=VALUE... |
//   delete reservation NAME (slurm/reservations.hpp)
// Options: -o/--oneliner, -d/--details, -Q/--quiet, -v, -h/--help, -V/--version.
// Anything else throws command_error with one line naming what is supported.
struct scontrol_command_line {
  std::string verb;    // hold, release, requeue, suspend, resume, update, show; "" with -h/-V
  std::string entity;  // show: job, partition, node, reservation, config, hostnames, hostlist; create/update/delete: reservation
  std::optional<std::string> name;  // show ENTITY NAME
  std::vector<std::int64_t> job_ids;
  std::optional<std::int64_t> time_limit_s;  // update TimeLimit= (0: UNLIMITED)
  std::optional<std::int64_t> min_pe, max_pe;  // update NumCPUs=
  // create|update|delete reservation: the KEY=VALUE words (delete: the name).
  std::vector<std::string> words;
  bool oneliner = false, quiet = false;
  bool help = false, version = false;
};
scontrol_command_line parse_scontrol_command_line(std::span<const std::string> args);

// The control request (fctl's) of a job verb or update.
protocol::control scontrol_control(const scontrol_command_line& cmd);

// `scontrol show job`: one record per job, each followed by a blank line
// (one line each with `oneliner`): JobId, JobName, UserId, JobState,
// Reason, ExitCode, RunTime, TimeLimit, SubmitTime, StartTime, EndTime,
// Partition, NodeList, NumNodes, NumCPUs, ... as Slurm prints them.
std::string scontrol_show_job(const job_view& j, std::time_t now, bool oneliner, const char* time_format = nullptr);

// `scontrol show partition [NAME]` / `show node [NAME]` from a list_nodes
// reply; nullopt when NAME names none (Slurm: "Partition NAME not found").
std::optional<std::string> scontrol_show_partitions(const protocol::list_nodes_reply& r,
                                                    const std::optional<std::string>& name, bool oneliner);
std::optional<std::string> scontrol_show_nodes(const protocol::list_nodes_reply& r,
                                               const std::optional<std::string>& name, bool oneliner);

// `scontrol show config`: Slurm's "Configuration data as of TIME" and one
// "Key = Value" line each (keys padded to 23), the keys engines read
// (MinJobAge, MessageTimeout, SchedulerParameters, ...) with what AQS does;
// the node and cpu counts from the list_nodes reply; `controller` is where
// aqsd was reached.
std::string scontrol_show_config(const protocol::list_nodes_reply& r, std::time_t now, const std::string& controller,
                                 const char* time_format = nullptr);

std::string scontrol_usage();

}  // namespace aqs::slurm
