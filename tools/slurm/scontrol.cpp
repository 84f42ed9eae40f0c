// scontrol: Slurm's scontrol subset over fctl's requests and the listings.
#include "slurm/scontrol.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>

#include "slurm/slurm_commands.hpp"
#include "cmdline/commands.hpp"
#include "cmdline/time_limit.hpp"
#include "cmdline/text_util.hpp"
#include "cmdline/usage_error.hpp"
#include "core/array_spec.hpp"
#include "core/hostlist.hpp"

namespace aqs::slurm {

namespace {

std::string lower(std::string_view s) { return cmdline::ascii_lower(s); }

constexpr std::string_view k_supported =
    "hold, uhold, release, requeue, suspend, resume, update, show job|partition|node|reservation|config|hostnames|hostlist, "
    "create|update|delete reservation";

std::int64_t job_id_of(std::string_view text) {
  std::int64_t v = 0;
  const auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc{} || p != text.data() + text.size() || v < 1 || v > protocol::k_max_job_id) {
    if (text.find('_') != std::string_view::npos) {
      throw command_error("Invalid job id specified: " + std::string(text) +
                          " (AQS's scontrol takes a job array's task by its own job id, as squeue shows it)");
    }
    throw command_error("Invalid job id specified: " + std::string(text));
  }
  return v;
}

// "12,13" -> {12, 13}.
void add_job_ids(std::vector<std::int64_t>& out, std::string_view list) {
  while (!list.empty()) {
    const auto comma = list.find(',');
    const std::string_view one = list.substr(0, comma);
    if (!one.empty()) out.push_back(job_id_of(one));
    list = comma == std::string_view::npos ? std::string_view{} : list.substr(comma + 1);
  }
}

// Records: the first line, then "   "-indented ones; -o joins them with spaces.
std::string record(const std::vector<std::string>& lines, bool oneliner) {
  std::string out;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) out += oneliner ? " " : "\n   ";
    out += lines[i];
  }
  return out + "\n";
}

std::string minutes_limit(std::int64_t secs, const char* none) { return secs <= 0 ? none : sacct_secs(secs); }

}  // namespace

scontrol_command_line parse_scontrol_command_line(std::span<const std::string> args) {
  scontrol_command_line out;
  std::size_t i = 0;
  for (; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.size() < 2 || a[0] != '-') break;
    if (a == "-o" || a == "--oneliner") {
      out.oneliner = true;
    } else if (a == "-Q" || a == "--quiet") {
      out.quiet = true;
    } else if (a == "-d" || a == "--details" || a == "-v" || a == "--verbose" || a == "-a" || a == "--all") {
      // more detail, chattier, hidden partitions: nothing more to show here
    } else if (a == "-h" || a == "--help" || a == "--usage") {
      out.help = true;
    } else if (a == "-V" || a == "--version") {
      out.version = true;
    } else {
      throw usage_error("unrecognized option '" + a + "'\nTry \"scontrol --help\" for more information");
    }
  }
  if (out.help || out.version) return out;
  if (i == args.size()) throw command_error("no command given (" + std::string(k_supported) + ")");
  const std::string verb = lower(args[i++]);
  const std::span<const std::string> rest = args.subspan(i);
  if (verb == "hold" || verb == "uhold" || verb == "release" || verb == "requeue" || verb == "suspend" ||
      verb == "resume") {
    out.verb = verb == "uhold" ? "hold" : verb;
    for (const auto& w : rest) add_job_ids(out.job_ids, w);
    if (out.job_ids.empty()) throw command_error(verb + " needs a job id (scontrol " + verb + " JOBID[,JOBID...])");
    return out;
  }
  if (verb == "create" || verb == "update" || verb == "delete") {
    const std::string first = rest.empty() ? std::string() : lower(rest[0]);
    const bool keyword = first == "reservation" || first == "res";
    const bool named = first.starts_with("reservationname=") || first.starts_with("reservation=");
    const bool resv = keyword || named;
    if (verb != "update" || resv) {
      if (!resv) throw command_error(verb + " is supported for reservations only (scontrol " + verb + " reservation ...)");
      out.verb = verb;
      out.entity = "reservation";
      out.words.assign(rest.begin() + (keyword ? 1 : 0), rest.end());
      if (verb == "delete") {
        if (out.words.size() != 1) throw command_error("delete reservation needs one name (scontrol delete reservation NAME)");
        const auto eq = out.words[0].find('=');
        if (eq != std::string::npos) out.words[0] = out.words[0].substr(eq + 1);
      } else if (out.words.empty()) {
        throw command_error(verb + " reservation needs KEY=VALUE options (ReservationName=, StartTime=, Duration=, ...)");
      }
      return out;
    }
  }
  if (verb == "update") {
    out.verb = verb;
    for (const auto& w : rest) {
      const auto eq = w.find('=');
      if (eq == std::string::npos) {
        throw command_error("invalid update '" + w + "': expected KEY=VALUE (JobId=, TimeLimit=, NumCPUs=)");
      }
      const std::string key = lower(std::string_view(w).substr(0, eq));
      const std::string value = w.substr(eq + 1);
      if (key == "jobid" || key == "job") {
        add_job_ids(out.job_ids, value);
      } else if (key == "timelimit") {
        if (value.starts_with('+') || value.starts_with('-')) {
          throw command_error("TimeLimit=" + value + ": AQS does not add to or take from a time limit; give the new limit");
        }
        try {
          out.time_limit_s = cmdline::parse_time_limit(value);
        } catch (const cmdline::usage_error& e) {
          throw command_error(std::string("TimeLimit: ") + e.what());
        }
      } else if (key == "numcpus") {
        auto count = [&](std::string_view t) {
          std::int64_t v = 0;
          const auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
          if (t.empty() || ec != std::errc{} || p != t.data() + t.size() || v < 1 || v > protocol::k_max_pe) {
            throw command_error("NumCPUs=" + value + ": expected a count N or a range N-M");
          }
          return v;
        };
        const auto dash = value.find('-');
        const std::int64_t lo = count(std::string_view(value).substr(0, dash));
        const std::int64_t hi = dash == std::string::npos ? lo : count(std::string_view(value).substr(dash + 1));
        out.min_pe = lo;
        out.max_pe = hi;
      } else {
        throw command_error("Update of " + w.substr(0, eq) +
                            " is not supported by AQS's scontrol (JobId= with TimeLimit= or NumCPUs=N[-M])");
      }
    }
    if (out.job_ids.empty()) throw command_error("update needs JobId=ID (scontrol update JobId=ID TimeLimit=...)");
    if (!out.time_limit_s && !out.min_pe) throw command_error("update needs TimeLimit= or NumCPUs= (nothing to change)");
    return out;
  }
  if (verb == "show") {
    out.verb = verb;
    if (rest.empty()) throw command_error("show needs an entity (job, partition, node, reservation, config, hostnames, hostlist)");
    std::string entity = lower(rest[0]);
    if (entity == "jobs" || entity == "jobid") entity = "job";
    if (entity == "partitions") entity = "partition";
    if (entity == "nodes") entity = "node";
    if (entity == "configuration") entity = "config";
    if (entity == "reservations" || entity == "res") entity = "reservation";
    if (entity != "job" && entity != "partition" && entity != "node" && entity != "config" && entity != "hostnames" &&
        entity != "hostlist" && entity != "reservation") {
      throw command_error("show " + rest[0] +
                          " is not supported by AQS's scontrol (job, partition, node, reservation, config, hostnames, hostlist)");
    }
    out.entity = entity;
    if (rest.size() > 2) throw command_error("show " + entity + " takes one name at most");
    if (rest.size() == 2) out.name = rest[1];
    if (entity == "config" && out.name) throw command_error("show config takes no name");
    if (entity == "job" && out.name) add_job_ids(out.job_ids, *out.name);
    if (entity == "hostlist" && !out.name) throw command_error("show hostlist needs a list of hosts (a,b,c)");
    return out;
  }
  throw command_error("'" + verb + "' is not supported by AQS's scontrol (" + std::string(k_supported) + ")");
}

protocol::control scontrol_control(const scontrol_command_line& cmd) {
  return cmdline::control_request(cmd.verb, cmd);
}

std::string scontrol_show_job(const job_view& j, std::time_t now, bool oneliner, const char* tf) {
  const auto& i = j.info;
  std::vector<std::string> lines;
  std::string first = "JobId=" + std::to_string(i.id);
  if (i.array_job_id && i.array_task_id) {
    first += " ArrayJobId=" + std::to_string(*i.array_job_id) + " ArrayTaskId=" + std::to_string(*i.array_task_id);
  }
  lines.push_back(first + " JobName=" + i.name);
  lines.push_back("UserId=" + i.user + "(" + (j.uid ? std::to_string(*j.uid) : std::string("4294967294")) + ")");
  lines.push_back("JobState=" + slurm_state(i.state).name + " Reason=" + job_reason(j) + " Dependency=(null)");
  lines.push_back("ExitCode=" + sacct_exit_code(j));
  lines.push_back("RunTime=" + sacct_secs(elapsed(j, now)) + " TimeLimit=" + sacct_limit(i.walltime_s) + " TimeMin=N/A");
  lines.push_back("SubmitTime=" + slurm_time(j.submit, tf));
  // A running job's EndTime is when its time limit ends it, as Slurm's.
  std::optional<std::time_t> end = j.end;
  if (!end && j.start && i.walltime_s && *i.walltime_s > 0) end = *j.start + *i.walltime_s;
  lines.push_back("StartTime=" + slurm_time(j.start, tf) + " EndTime=" + slurm_time(end, tf) + " Deadline=N/A");
  lines.push_back("Partition=" + i.partition.value_or(std::string(k_default_partition)));
  lines.push_back("NodeList=" + (j.hosts.empty() ? std::string("(null)") : compress_hostlist(j.hosts)));
  if (!j.hosts.empty()) lines.push_back("BatchHost=" + j.hosts.front());
  const std::int64_t cpus = cpus_of(j);
  lines.push_back("NumNodes=" + std::to_string(node_count(j)) + " NumCPUs=" + std::to_string(cpus) +
                  " NumTasks=" + std::to_string(cpus) + " CPUs/Task=1");
  if (i.adaptive) {
    // AQS's own: an adaptive job's processor range (it grows and shrinks within it).
    lines.push_back("Adaptive=YES MinCPUs=" + std::to_string(i.min_pe) + " MaxCPUs=" + std::to_string(i.max_pe));
  }
  return record(lines, oneliner) + (oneliner ? "" : "\n");
}

std::optional<std::string> scontrol_show_partitions(const protocol::list_nodes_reply& r,
                                                    const std::optional<std::string>& name, bool oneliner) {
  std::vector<protocol::partition_info> parts = r.partitions;
  const bool implicit = parts.empty();
  if (implicit) {
    protocol::partition_info p;
    p.name = std::string(k_default_partition);
    p.is_default = true;
    p.nodes = "ALL";
    parts.push_back(std::move(p));
  }
  std::string out;
  bool found = false;
  for (const auto& p : parts) {
    if (name && p.name != *name) continue;
    found = true;
    std::vector<std::string> hosts;
    std::int64_t cpus = 0;
    for (const auto& n : r.nodes) {
      if (!implicit && std::find(n.partitions.begin(), n.partitions.end(), p.name) == n.partitions.end()) continue;
      hosts.push_back(n.name);
      cpus += n.nprocs;
    }
    const std::string nodes = p.nodes == "ALL" ? (hosts.empty() ? std::string("(null)") : compress_hostlist(hosts)) : p.nodes;
    std::vector<std::string> lines = {
        "PartitionName=" + p.name,
        std::string("Default=") + (p.is_default ? "YES" : "NO"),
        "DefaultTime=" + minutes_limit(p.default_time_s, "NONE"),
        "MaxNodes=" + (p.max_nodes > 0 ? std::to_string(p.max_nodes) : std::string("UNLIMITED")) +
            " MaxTime=" + minutes_limit(p.max_time_s, "UNLIMITED") + " MinNodes=0" +
            " MaxCPUsPerJob=" + (p.max_cpus_per_job > 0 ? std::to_string(p.max_cpus_per_job) : std::string("UNLIMITED")),
        "Nodes=" + nodes,
        "State=" + p.state + " TotalCPUs=" + std::to_string(cpus) + " TotalNodes=" + std::to_string(hosts.size()),
    };
    out += record(lines, oneliner) + (oneliner ? "" : "\n");
  }
  if (!found) return std::nullopt;
  return out;
}

std::optional<std::string> scontrol_show_nodes(const protocol::list_nodes_reply& r,
                                               const std::optional<std::string>& name, bool oneliner) {
  std::vector<const protocol::listed_node*> nodes;
  for (const auto& n : r.nodes) {
    if (!name || n.name == *name) nodes.push_back(&n);
  }
  if (nodes.empty()) return std::nullopt;
  std::sort(nodes.begin(), nodes.end(), [](const auto* a, const auto* b) { return host_order(a->name, b->name); });
  std::string out;
  for (const auto* n : nodes) {
    const std::int64_t alloc = std::min(n->alloc, n->nprocs);
    std::string state = alloc == 0 ? "IDLE" : alloc < n->nprocs ? "MIXED" : "ALLOCATED";
    if (n->state == protocol::node_state::down) state = "DOWN";
    if (n->state == protocol::node_state::drain) state += "+DRAIN";
    if (!n->connected && n->state != protocol::node_state::down) state += "+NOT_RESPONDING";
    std::string partitions;
    for (const auto& p : n->partitions) partitions += (partitions.empty() ? "" : ",") + p;
    if (r.partitions.empty()) partitions = std::string(k_default_partition);
    std::vector<std::string> lines = {
        "NodeName=" + n->name,
        "CPUAlloc=" + std::to_string(alloc) + " CPUEfctv=" + std::to_string(n->nprocs) +
            " CPUTot=" + std::to_string(n->nprocs) + " CPULoad=N/A",
        "Gres=" + (n->gpus > 0 ? "gpu:" + std::to_string(n->gpus) : std::string("(null)")),
        "NodeAddr=" + n->name + " NodeHostName=" + n->name,
        "RealMemory=" + std::to_string(n->memory_mb) + " AllocMem=0 FreeMem=N/A",
        "State=" + state,
        "Partitions=" + partitions,
    };
    out += record(lines, oneliner) + (oneliner ? "" : "\n");
  }
  return out;
}

std::string scontrol_usage() {
  return "Usage: scontrol [OPTIONS] COMMAND [ARGS]\n"
         "AQS's subset of Slurm's scontrol (fctl does the same in AQS's words).\n"
         "  hold JOBID[,JOBID...]       keep pending jobs from starting (uhold: the same)\n"
         "  release JOBID[,JOBID...]    let held jobs start\n"
         "  requeue JOBID[,JOBID...]    kill running or suspended jobs and queue them again\n"
         "  suspend JOBID[,JOBID...]    stop running jobs and free their processors\n"
         "  resume JOBID[,JOBID...]     let suspended jobs run again\n"
         "  update JobId=ID[,ID...] [TimeLimit=LIMIT] [NumCPUs=N[-M]]\n"
         "                              a new time limit (pending jobs) or processor count/range\n"
         "  show job [ID]               jobs in key=value form (all live jobs without ID)\n"
         "  show partition [NAME]       partitions\n"
         "  show node [NAME]            nodes\n"
         "  show config                 Slurm's Key = Value settings (MinJobAge, MessageTimeout, ...)\n"
         "  show hostnames [LIST]       a host list (default $SLURM_JOB_NODELIST), one name a line\n"
         "  show hostlist NAME,NAME     names as a host list\n"
         "  -o, --oneliner              one line per record\n"
         "  -Q, --quiet                 no messages for what is not found\n"
         "  -h, --help                  this help\n"
         "  -V, --version               the version\n";
}

std::string scontrol_show_config(const protocol::list_nodes_reply& r, std::time_t now, const std::string& controller,
                                 const char* time_format) {
  std::int64_t cpus = 0;
  for (const auto& n : r.nodes) cpus += n.nprocs;
  std::string default_partition = std::string(k_default_partition);
  for (const auto& p : r.partitions) {
    if (p.is_default) default_partition = p.name;
  }
  // What AQS does, in Slurm's words; where Slurm has a knob AQS lacks, the
  // value that behaves as AQS does.
  const std::vector<std::pair<std::string, std::string>> keys = {
      {"AuthType", "auth/aqs (SO_PEERCRED on the socket, the cluster key over TCP)"},
      {"ClusterName", "aqs"},
      {"DefMemPerNode", "UNLIMITED"},
      {"InactiveLimit", "0 sec"},
      {"JobCompType", "jobcomp/aqs (PostgreSQL, every job kept)"},
      {"KillWait", "5 sec"},
      {"MaxArraySize", std::to_string(core::k_max_array_index + 1)},
      {"MaxJobCount", "UNLIMITED"},
      {"MessageTimeout", std::to_string(k_message_timeout_s) + " sec"},
      {"MinJobAge", std::to_string(k_min_job_age_s) + " sec"},
      {"OverTimeLimit", "0 min"},
      {"PriorityType", "priority/basic"},
      {"ProctrackType", "proctrack/pgid"},
      {"SchedulerParameters", "(null)"},
      {"SchedulerType", "sched/aqs (equipartition for adaptive jobs, FCFS with EASY backfilling for rigid ones)"},
      {"SelectType", "select/cons_tres"},
      {"SelectTypeParameters", "CR_CPU"},
      {"SlurmctldHost[0]", controller},
      {"SlurmctldPort", "0 (aqsd's Unix socket)"},
      {"SLURM_CONF", "(none: aqsd's configuration)"},
      {"SLURM_VERSION", "22.05.0"},
      {"TaskPlugin", "task/affinity"},
      {"NodeCount", std::to_string(r.nodes.size())},
      {"CPUTotal", std::to_string(cpus)},
      {"DefaultPartition", default_partition},
  };
  std::string out = "Configuration data as of " + slurm_time(now, time_format) + "\n";
  for (const auto& [k, v] : keys) {
    std::string key = k;
    if (key.size() < 23) key.resize(23, ' ');
    out += key + " = " + v + "\n";
  }
  return out;
}

}  // namespace aqs::slurm
