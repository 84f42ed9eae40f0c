// sstat: Slurm's sstat over AQS (see sstat.hpp). The field table, layouts
// and messages follow Slurm 22.05's src/sstat; the code is AQS's own.
#include "slurm/sstat.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <map>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "slurm/slurm_commands.hpp"

namespace aqs::slurm {

namespace {

struct field_def {
  int width;
  const char* name;
};
// sstat's fields in its own order (prefixes match the first in this order).
constexpr std::array<field_def, 52> k_fields = {{
    {10, "AveCPU"},          {10, "AveCPUFreq"},         {12, "AveDiskRead"},         {12, "AveDiskWrite"},
    {10, "AvePages"},        {10, "AveRSS"},             {10, "AveVMSize"},           {14, "ConsumedEnergy"},
    {17, "ConsumedEnergyRaw"}, {-12, "JobID"},           {12, "MaxDiskRead"},         {15, "MaxDiskReadNode"},
    {15, "MaxDiskReadTask"}, {12, "MaxDiskWrite"},       {16, "MaxDiskWriteNode"},    {16, "MaxDiskWriteTask"},
    {8, "MaxPages"},         {12, "MaxPagesNode"},       {14, "MaxPagesTask"},        {10, "MaxRSS"},
    {10, "MaxRSSNode"},      {10, "MaxRSSTask"},         {10, "MaxVMSize"},           {14, "MaxVMSizeNode"},
    {14, "MaxVMSizeTask"},   {10, "MinCPU"},             {10, "MinCPUNode"},          {10, "MinCPUTask"},
    {20, "Nodelist"},        {8, "NTasks"},              {20, "Pids"},                {10, "ReqCPUFreq"},
    {13, "ReqCPUFreqMin"},   {13, "ReqCPUFreqMax"},      {13, "ReqCPUFreqGov"},       {14, "TRESUsageInAve"},
    {14, "TRESUsageInMax"},  {18, "TRESUsageInMaxNode"}, {18, "TRESUsageInMaxTask"},  {14, "TRESUsageInMin"},
    {18, "TRESUsageInMinNode"}, {18, "TRESUsageInMinTask"}, {14, "TRESUsageInTot"},   {15, "TRESUsageOutAve"},
    {15, "TRESUsageOutMax"}, {19, "TRESUsageOutMaxNode"}, {19, "TRESUsageOutMaxTask"}, {15, "TRESUsageOutMin"},
    {19, "TRESUsageOutMinNode"}, {19, "TRESUsageOutMinTask"}, {15, "TRESUsageOutTot"}, {0, nullptr},
}};

constexpr const char* k_default_fields =
    "jobid,maxvmsize,maxvmsizenode,maxvmsizetask,avevmsize,maxrss,maxrssnode,maxrsstask,averss,maxpages,"
    "maxpagesnode,maxpagestask,avepages,mincpu,mincpunode,mincputask,avecpu,ntasks,avecpufreq,reqcpufreqmin,"
    "reqcpufreqmax,reqcpufreqgov,consumedenergy,maxdiskread,maxdiskreadnode,maxdiskreadtask,avediskread,"
    "maxdiskwrite,maxdiskwritenode,maxdiskwritetask,avediskwrite,tresusageinave,tresusageinmax,tresusageinmaxn,"
    "tresusageinmaxt,tresusageinmin,tresusageinminn,tresusageinmint,tresusageintot,tresusageoutave,"
    "tresusageoutmax,tresusageoutmaxn,tresusageoutmaxt,tresusageoutmin,tresusageoutminn,tresusageoutmint,"
    "tresusageouttot";

bool iequal_prefix(std::string_view name, std::string_view prefix) {
  if (prefix.size() > name.size()) return false;
  for (std::size_t i = 0; i < prefix.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(name[i])) != std::tolower(static_cast<unsigned char>(prefix[i]))) {
      return false;
    }
  }
  return true;
}

sstat_request parse_job(std::string_view text) {
  const auto dot = text.find('.');
  const std::string_view id = text.substr(0, dot);
  std::int64_t v = 0;
  const auto r = std::from_chars(id.data(), id.data() + id.size(), v);
  if (id.empty() || r.ec != std::errc() || r.ptr != id.data() + id.size() || v <= 0) {
    throw command_error("Invalid job id: " + std::string(text.substr(0, 64)));
  }
  sstat_request q;
  q.job_id = v;
  if (dot != std::string_view::npos) {
    const std::string step(text.substr(dot + 1));
    const bool digits = !step.empty() && step.size() <= 10 &&
                        std::all_of(step.begin(), step.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (!digits && step != "batch" && step != "extern") {
      throw command_error("Invalid job id: " + std::string(text.substr(0, 64)));
    }
    q.step = step;
  }
  return q;
}

void add_jobs(std::vector<sstat_request>& out, std::string_view list) {
  std::size_t at = 0;
  while (at <= list.size()) {
    const auto comma = list.find(',', at);
    const std::string_view item = list.substr(at, comma == std::string_view::npos ? std::string_view::npos : comma - at);
    if (!item.empty()) out.push_back(parse_job(item));
    if (comma == std::string_view::npos) break;
    at = comma + 1;
  }
}

std::string cell(std::string value, int width, sacct_style style, bool last, bool null, bool plus) {
  if (style == sacct_style::parsable2) return value + (last ? "" : "|");
  if (style == sacct_style::parsable) return value + "|";
  const auto w = static_cast<std::size_t>(std::abs(width));
  if (null) value = " ";
  if (value.size() > w && w > 0) {
    value.resize(w);
    if (plus) value.back() = '+';
  }
  if (value.size() < w) {
    value = width >= 0 ? std::string(w - value.size(), ' ') + value : value + std::string(w - value.size(), ' ');
  }
  return value + " ";
}

}  // namespace

sstat_command_line parse_sstat_command_line(std::span<const std::string> args) {
  sstat_command_line c;
  auto bad = [](const std::string& what) {
    return usage_error(what + "\nTry \"sstat --help\" for more information");
  };
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    std::optional<std::string> inline_value;
    std::string opt = a;
    if (a.starts_with("--")) {
      if (const auto eq = a.find('='); eq != std::string::npos) {
        opt = a.substr(0, eq);
        inline_value = a.substr(eq + 1);
      }
    } else if (a.size() > 2 && a[0] == '-' && (a[1] == 'j' || a[1] == 'o')) {
      opt = a.substr(0, 2);
      inline_value = a.substr(2);
    }
    auto value = [&]() -> std::string {
      if (inline_value) return *inline_value;
      if (i + 1 >= args.size()) {
        throw bad(opt.starts_with("--") ? "option '" + opt + "' requires an argument"
                                        : "option requires an argument -- '" + opt.substr(1) + "'");
      }
      return args[++i];
    };
    auto flag = [&] {
      if (inline_value) throw bad("option '" + opt + "' doesn't allow an argument");
    };
    if (opt == "-a" || opt == "--allsteps") {
      flag();
      c.all_steps = true;
    } else if (opt == "-e" || opt == "--helpformat") {
      flag();
      c.help_format = true;
    } else if (opt == "-h" || opt == "--help" || opt == "--usage") {
      flag();
      c.help = true;
    } else if (opt == "-i" || opt == "--pidformat") {
      flag();
      c.pid_format = true;
    } else if (opt == "-j" || opt == "--jobs") {
      add_jobs(c.jobs, value());
    } else if (opt == "-n" || opt == "--noheader") {
      flag();
      c.header = false;
    } else if (opt == "-o" || opt == "--format" || opt == "--fields") {
      if (!c.fields.empty()) c.fields += ",";
      c.fields += value();
    } else if (opt == "-p" || opt == "--parsable") {
      flag();
      c.style = sacct_style::parsable;
    } else if (opt == "-P" || opt == "--parsable2") {
      flag();
      c.style = sacct_style::parsable2;
    } else if (opt == "--noconvert") {
      flag();
      c.no_convert = true;
    } else if (opt == "-v" || opt == "--verbose") {
      flag();
    } else if (opt == "-V" || opt == "--version") {
      flag();
      c.version = true;
    } else if (a.starts_with("--")) {
      throw bad("unrecognized option '" + opt + "'");
    } else if (a.starts_with("-") && a.size() > 1) {
      throw bad("invalid option -- '" + a.substr(1, 1) + "'");
    } else {
      add_jobs(c.jobs, a);  // sstat takes a job list after its options too
    }
  }
  return c;
}

std::string sstat_usage() {
  return "Usage: sstat [options] -j job[.stepid]   (AQS's Slurm-compatible sstat)\n"
         "  -a, --allsteps       every step of the job (batch included), not only its first\n"
         "  -e, --helpformat     list the fields -o takes\n"
         "  -i, --pidformat      JobID, Nodelist and Pids only\n"
         "  -j, --jobs=LIST      job[.step],... (steps: 0, 1, ..., batch)\n"
         "  -n, --noheader       no header lines\n"
         "  -o, --format=LIST    fields, e.g. JobID,MaxRSS,AveRSS,AveCPU,NTasks,MaxVMSize (NAME%WIDTH)\n"
         "  -p, --parsable       '|' after every field;  -P, --parsable2: between fields\n"
         "      --noconvert      memory in K, unconverted\n"
         "A running job's steps as the agents of its nodes measure them (from /proc: resident and\n"
         "virtual memory, now and at their peak, CPU time of every process of each task). sstat asks\n"
         "the agents on this machine: run it on the job's node (inside the job, or on that host).\n"
         "Only the job's owner and root are answered.\n";
}

std::string sstat_field_list() {
  std::string out;
  int col = 0;
  for (const auto& f : k_fields) {
    if (f.name == nullptr) break;
    char buf[32];
    std::snprintf(buf, sizeof buf, "%-20s", f.name);
    out += buf;
    if (++col % 4 == 0) out += "\n";
  }
  if (col % 4 != 0) out += "\n";
  return out;
}

std::vector<sstat_field> parse_sstat_fields(std::string_view list) {
  std::vector<sstat_field> out;
  std::size_t at = 0;
  while (at < list.size()) {
    const auto comma = list.find(',', at);
    std::string item(list.substr(at, comma == std::string_view::npos ? std::string_view::npos : comma - at));
    at = comma == std::string_view::npos ? list.size() : comma + 1;
    while (!item.empty() && std::isspace(static_cast<unsigned char>(item.front())) != 0) item.erase(item.begin());
    if (item.empty()) continue;
    int width = 0;
    if (const auto pct = item.find('%'); pct != std::string::npos) {
      width = std::atoi(item.c_str() + pct + 1);
      item.resize(pct);
    }
    const field_def* found = nullptr;
    for (const auto& f : k_fields) {
      if (f.name != nullptr && !item.empty() && iequal_prefix(f.name, item)) {
        found = &f;
        break;
      }
    }
    if (found == nullptr) throw std::invalid_argument("Invalid field requested: \"" + item + "\"");
    out.push_back({found->name, width != 0 ? width : found->width});
  }
  return out;
}

std::vector<sstat_field> default_sstat_fields(bool pid_format) {
  return parse_sstat_fields(pid_format ? "jobid,nodelist,pids" : k_default_fields);
}

bool sstat_measures(std::string_view field) {
  for (const char* f : {"JobID", "NTasks", "Nodelist", "Pids", "MaxRSS", "MaxRSSNode", "MaxRSSTask", "AveRSS", "MaxVMSize",
                        "MaxVMSizeNode", "MaxVMSizeTask", "AveVMSize", "MinCPU", "MinCPUNode", "MinCPUTask", "AveCPU"}) {
    if (field == f) return true;
  }
  return false;
}

std::string merge_agent_reply(std::string_view line, std::int64_t job_id, std::vector<step_stat>& steps) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(line);
    if (j.contains("error")) return j.at("error").get<std::string>();
    const std::string node = j.at("node").get<std::string>();
    for (const auto& s : j.at("steps")) {
      const std::string name = s.at("step").get<std::string>();
      auto it = std::find_if(steps.begin(), steps.end(), [&](const step_stat& x) { return x.step == name; });
      if (it == steps.end()) {
        steps.push_back(step_stat{job_id, name, {}});
        it = std::prev(steps.end());
      }
      for (const auto& t : s.at("tasks")) {
        task_stat ts;
        ts.node = node;
        ts.task = t.at("task").get<std::int64_t>();
        ts.rss_kb = t.at("rss_kb").get<std::uint64_t>();
        ts.max_rss_kb = t.at("max_rss_kb").get<std::uint64_t>();
        ts.vsize_kb = t.at("vsize_kb").get<std::uint64_t>();
        ts.max_vsize_kb = t.at("max_vsize_kb").get<std::uint64_t>();
        ts.cpu_ms = t.at("cpu_ms").get<std::uint64_t>();
        ts.pids = t.at("pids").get<std::vector<std::int64_t>>();
        it->tasks.push_back(std::move(ts));
      }
    }
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(std::string("unreadable answer from a node agent: ") + e.what());
  }
  return {};
}

std::vector<step_stat> select_steps(const std::vector<step_stat>& all, const std::optional<std::string>& step,
                                    bool all_steps) {
  std::vector<step_stat> out;
  auto normal = [](const step_stat& s) { return s.step != "batch" && s.step != "extern"; };
  std::vector<step_stat> sorted = all;
  std::sort(sorted.begin(), sorted.end(), [&](const step_stat& a, const step_stat& b) {
    if (normal(a) != normal(b)) return normal(a);
    if (normal(a)) return std::stoll(a.step) < std::stoll(b.step);
    return a.step < b.step;
  });
  for (const auto& s : sorted) {
    if (step) {
      if (s.step == *step) out.push_back(s);
    } else if (all_steps) {
      out.push_back(s);
    } else if (normal(s)) {
      out.push_back(s);
      break;
    }
  }
  return out;
}

std::string sstat_memory(std::uint64_t kb, bool no_convert) {
  if (kb == 0) return "0";
  double num = static_cast<double>(kb) * 1024.0;  // Slurm converts from bytes
  const char* units = " KMGTP?";
  int unit = 0;
  if (no_convert) {
    num = static_cast<double>(kb);
    unit = 1;
  } else {
    while (num >= 1024.0 && unit < 6) {
      num /= 1024.0;
      ++unit;
    }
  }
  char buf[48];
  const auto whole = static_cast<std::uint64_t>(num);
  if (static_cast<double>(whole) == num) {
    std::snprintf(buf, sizeof buf, "%llu", static_cast<unsigned long long>(whole));
  } else {
    std::snprintf(buf, sizeof buf, "%.2f", num);
  }
  std::string out = buf;
  if (unit > 0) out += units[unit];
  return out;
}

std::string sstat_cpu_time(std::uint64_t secs) {
  const std::uint64_t s = secs % 60, m = (secs / 60) % 60, h = (secs / 3600) % 24, d = secs / 86400;
  char buf[64];
  if (d != 0) {
    std::snprintf(buf, sizeof buf, "%llu-%02llu:%02llu:%02llu", static_cast<unsigned long long>(d),
                  static_cast<unsigned long long>(h), static_cast<unsigned long long>(m), static_cast<unsigned long long>(s));
  } else if (h != 0) {
    std::snprintf(buf, sizeof buf, "%02llu:%02llu:%02llu", static_cast<unsigned long long>(h),
                  static_cast<unsigned long long>(m), static_cast<unsigned long long>(s));
  } else {
    std::snprintf(buf, sizeof buf, "00:%02llu:%02llu", static_cast<unsigned long long>(m), static_cast<unsigned long long>(s));
  }
  return buf;
}

std::string render_sstat_header(const std::vector<sstat_field>& fields, sacct_style style) {
  std::string out;
  for (std::size_t k = 0; k < fields.size(); ++k) out += cell(fields[k].name, fields[k].width, style, k + 1 == fields.size(), false, false);
  out += "\n";
  if (style == sacct_style::table) {
    for (const auto& f : fields) out += std::string(static_cast<std::size_t>(std::abs(f.width)), '-') + " ";
    out += "\n";
  }
  return out;
}

std::string render_sstat_row(const std::vector<sstat_field>& fields, const step_stat& s, sacct_style style,
                             bool no_convert) {
  // Slurm's aggregation over a step's tasks on all its nodes: the maxima
  // with the task and node that had them, the averages per task.
  const task_stat* max_rss = nullptr;
  const task_stat* max_vm = nullptr;
  const task_stat* min_cpu = nullptr;
  std::uint64_t sum_rss = 0, sum_vm = 0, sum_cpu = 0;
  std::vector<std::string> nodes;
  std::string pids;
  for (const auto& t : s.tasks) {
    if (max_rss == nullptr || t.max_rss_kb > max_rss->max_rss_kb) max_rss = &t;
    if (max_vm == nullptr || t.max_vsize_kb > max_vm->max_vsize_kb) max_vm = &t;
    if (min_cpu == nullptr || t.cpu_ms < min_cpu->cpu_ms) min_cpu = &t;
    sum_rss += t.rss_kb;
    sum_vm += t.vsize_kb;
    sum_cpu += t.cpu_ms;
    if (std::find(nodes.begin(), nodes.end(), t.node) == nodes.end()) nodes.push_back(t.node);
    for (auto p : t.pids) pids += (pids.empty() ? "" : ",") + std::to_string(p);
  }
  const std::uint64_t n = s.tasks.size();
  std::string out;
  for (std::size_t k = 0; k < fields.size(); ++k) {
    const std::string& f = fields[k].name;
    std::optional<std::string> v;
    if (f == "JobID") v = std::to_string(s.job_id) + "." + s.step;
    else if (f == "NTasks") v = std::to_string(n);
    else if (f == "Nodelist") v = compress_hostlist(nodes);
    else if (f == "Pids") v = pids;
    else if (n != 0) {
      if (f == "MaxRSS") v = sstat_memory(max_rss->max_rss_kb, no_convert);
      else if (f == "MaxRSSNode") v = max_rss->node;
      else if (f == "MaxRSSTask") v = std::to_string(max_rss->task);
      else if (f == "AveRSS") v = sstat_memory(sum_rss / n, no_convert);
      else if (f == "MaxVMSize") v = sstat_memory(max_vm->max_vsize_kb, no_convert);
      else if (f == "MaxVMSizeNode") v = max_vm->node;
      else if (f == "MaxVMSizeTask") v = std::to_string(max_vm->task);
      else if (f == "AveVMSize") v = sstat_memory(sum_vm / n, no_convert);
      else if (f == "MinCPU") v = sstat_cpu_time(min_cpu->cpu_ms / 1000);
      else if (f == "MinCPUNode") v = min_cpu->node;
      else if (f == "MinCPUTask") v = std::to_string(min_cpu->task);
      else if (f == "AveCPU") v = sstat_cpu_time(sum_cpu / n / 1000);
    }
    // Fields AQS does not measure (pages, disk, energy, frequencies,
    // TRES) print empty, as Slurm's do where its plugins gather nothing.
    out += cell(v.value_or(""), fields[k].width, style, k + 1 == fields.size(), !v.has_value(), true);
  }
  out += "\n";
  return out;
}


std::vector<step_stat> fetch_step_stats(const std::string& aqsd_socket, std::int64_t job_id,
                                        const std::vector<std::string>& nodes, std::int64_t trusted_uid,
                                        std::vector<std::string>& errors, bool& refused) {
  std::vector<step_stat> steps;
  refused = false;
  for (const auto& node : nodes) {
    const std::string name = protocol::stat_socket_name(aqsd_socket, node);
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    const std::size_t len = std::min(name.size(), sizeof addr.sun_path);
    std::memcpy(addr.sun_path, name.data(), len);
    const auto addr_len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + len);
    auto fail = [&](const std::string& why) {
      errors.push_back(node + ": " + why);
      ::close(fd);
    };
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), addr_len) != 0) {
      fail("its agent does not answer on this machine");
      continue;
    }
    ucred cred{};
    socklen_t cl = sizeof cred;
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) != 0 ||
        (cred.uid != 0 && static_cast<std::int64_t>(cred.uid) != trusted_uid)) {
      fail("its stat socket is held by uid " + std::to_string(cred.uid) + ", not by an agent: not believed");
      continue;
    }
    const std::string req = "{\"job_id\":" + std::to_string(job_id) + "}\n";
    if (::send(fd, req.data(), req.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(req.size())) {
      fail("cannot ask its agent");
      continue;
    }
    std::string reply;
    char buf[65536];
    bool ok = true;
    while (reply.find('\n') == std::string::npos && reply.size() < (16u << 20)) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 10000) <= 0) {
        ok = false;
        break;
      }
      const ssize_t n = ::read(fd, buf, sizeof buf);
      if (n <= 0) break;
      reply.append(buf, static_cast<std::size_t>(n));
    }
    ::close(fd);
    if (!ok || reply.find('\n') == std::string::npos) {
      errors.push_back(node + ": its agent did not answer");
      continue;
    }
    const std::string err = merge_agent_reply(reply.substr(0, reply.find('\n')), job_id, steps);
    if (err == "permission_denied") refused = true;
    if (!err.empty() && err != "not_found") errors.push_back(node + ": " + err);
  }
  return steps;
}

}  // namespace aqs::slurm
