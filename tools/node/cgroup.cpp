// cgroup: the v1 and v2 backends over cgroupfs files, and the probe.
#include "cgroup.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <thread>
#include <unistd.h>

#include "unique_fd.hpp"

namespace aqs::node {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace {

constexpr long k_cgroup_super_magic = 0x27e0eb;
constexpr long k_cgroup2_super_magic = 0x63677270;

std::optional<std::string> read_text(const fs::path& p) {
  unique_fd fd(::open(p.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return std::nullopt;
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::read(fd.get(), buf, sizeof buf)) > 0;) out.append(buf, static_cast<std::size_t>(n));
  return out;
}

std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// Writes `text` to a cgroup file in one write (the kernel takes one value
// per write). Throws cgroup_error naming the file. O_CREAT|O_TRUNC: on
// cgroupfs the file exists and is not truncated; over a directory that
// mimics it (unit tests) the file is made.
void write_text(const fs::path& p, const std::string& text) {
  unique_fd fd(::open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!fd || ::write(fd.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
    throw cgroup_error("cannot write '" + trimmed(text) + "' to " + p.string() + ": " + std::strerror(errno));
  }
}

// "name value" lines (memory.events, memory.oom_control, cgroup.events):
// the value of `key`, or 0.
std::uint64_t keyed(const std::optional<std::string>& text, const std::string& key) {
  if (!text) return 0;
  std::istringstream in(*text);
  std::string k;
  std::uint64_t v = 0;
  while (in >> k >> v) {
    if (k == key) return v;
  }
  return 0;
}

// A file holding one unsigned number (cpuacct.usage_user), or nullopt.
std::optional<std::uint64_t> number_in(const std::optional<std::string>& text) {
  if (!text) return std::nullopt;
  try {
    return static_cast<std::uint64_t>(std::stoull(*text));
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// Whether `key` is one of the "name value" lines of `text`.
bool has_key(const std::optional<std::string>& text, const std::string& key) {
  if (!text) return false;
  std::istringstream in(*text);
  std::string k;
  std::uint64_t v = 0;
  while (in >> k >> v) {
    if (k == key) return true;
  }
  return false;
}

std::string cpu_list(std::vector<int> cpus) {
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());  // --procs N pins round-robin
  std::string s;
  for (int c : cpus) s += (s.empty() ? "" : ",") + std::to_string(c);
  return s;
}

void make_dir(const fs::path& p) {
  if (::mkdir(p.c_str(), 0755) != 0 && errno != EEXIST) {
    throw cgroup_error("cannot create " + p.string() + ": " + std::strerror(errno));
  }
}

// Whether p is on a real cgroupfs (not a directory that mimics one).
bool on_cgroupfs(const fs::path& p) {
  struct statfs sf {};
  if (::statfs(p.c_str(), &sf) != 0) return false;
  return sf.f_type == k_cgroup_super_magic || sf.f_type == k_cgroup2_super_magic;
}

// rmdir; over a directory that only mimics cgroupfs the interface files
// are plain files, removed first (never on a real cgroupfs, whose files go
// with the directory and whose rmdir fails while processes are inside).
bool remove_dir(const fs::path& p) {
  if (::rmdir(p.c_str()) == 0 || errno == ENOENT) return true;
  if (errno != ENOTEMPTY && errno != EEXIST) return false;
  if (on_cgroupfs(p)) return false;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(p, ec)) {
    if (e.is_directory(ec)) return false;  // a child cgroup
  }
  fs::remove_all(p, ec);
  return !ec;
}

std::vector<pid_t> read_pids(const fs::path& p) {
  std::vector<pid_t> out;
  const auto text = read_text(p);
  if (!text) return out;
  std::istringstream in(*text);
  for (long pid; in >> pid;) {
    if (pid > 0) out.push_back(static_cast<pid_t>(pid));
  }
  return out;
}

std::string job_dir_name(std::int64_t id) { return "job_" + std::to_string(id); }

constexpr const char* k_step_prefix = "step_";

std::string step_dir_name(const std::string& step) {
  const bool ok = !step.empty() && step.size() <= 64 && std::all_of(step.begin(), step.end(), [](char ch) {
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_' || ch == '-';
  });
  if (!ok) throw cgroup_error("a step's name is letters, digits, '_' and '-' (got '" + step + "')");
  return k_step_prefix + step;
}

// The step directories under a job's (sorted: the same order every time).
std::vector<fs::path> step_dirs(const fs::path& job) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(job, ec)) {
    if (e.path().filename().string().rfind(k_step_prefix, 0) == 0 && e.is_directory(ec)) out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// A job's directory and its steps': the processes of all of them.
std::vector<pid_t> tree_pids(const fs::path& job) {
  std::vector<pid_t> out = read_pids(job / "cgroup.procs");
  for (const auto& d : step_dirs(job)) {
    for (pid_t p : read_pids(d / "cgroup.procs")) out.push_back(p);
  }
  return out;
}

// "0-2,5" -> {0, 1, 2, 5} (cpuset.cpus as the kernel prints it).
std::vector<int> parse_cpu_list(const std::string& text) {
  std::vector<int> out;
  std::istringstream in(trimmed(text));
  for (std::string part; std::getline(in, part, ',');) {
    if (part.empty()) continue;
    const auto dash = part.find('-');
    try {
      const int a = std::stoi(part.substr(0, dash));
      const int b = dash == std::string::npos ? a : std::stoi(part.substr(dash + 1));
      for (int c = a; c <= b; ++c) out.push_back(c);
    } catch (const std::exception&) {
      return {};
    }
  }
  return out;
}

// Rewrites the cpuset.cpus of `job` and of its steps to `cpus`: the job's
// first to the union of what it had and what it gets (a child may hold only
// what its parent has), then the steps', then the job's to `cpus`.
void rewrite_cpus(const fs::path& job, const std::vector<int>& cpus) {
  if (cpus.empty()) throw cgroup_error("no cpus for the cpuset of " + job.string());
  if (!fs::is_directory(job)) throw cgroup_error("no cgroup " + job.string());
  std::vector<int> both = parse_cpu_list(read_text(job / "cpuset.cpus").value_or(""));
  both.insert(both.end(), cpus.begin(), cpus.end());
  write_text(job / "cpuset.cpus", cpu_list(both) + "\n");
  for (const auto& d : step_dirs(job)) write_text(d / "cpuset.cpus", cpu_list(cpus) + "\n");
  write_text(job / "cpuset.cpus", cpu_list(cpus) + "\n");
}

// The agent's own cgroup in the v1 hierarchy holding `controller`
// (/proc/self/cgroup: "ID:ctrl1,ctrl2:/path"), "" for the root.
std::string own_v1_path(const std::string& controller) {
  std::ifstream in("/proc/self/cgroup");
  for (std::string line; std::getline(in, line);) {
    const auto a = line.find(':');
    const auto b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    std::istringstream names(line.substr(a + 1, b - a - 1));
    for (std::string n; std::getline(names, n, ',');) {
      if (n == controller) {
        std::string path = line.substr(b + 1);
        return path == "/" ? "" : path;
      }
    }
  }
  return {};
}

// ---- v1 -------------------------------------------------------------------

class cgroup_v1 final : public cgroup_backend {
public:
  explicit cgroup_v1(const cgroup_options& o) : pids_max_(o.pids_max), scoped_(!o.cluster.empty()) {
    const std::vector<std::string> required{"memory", "cpuset", "freezer"};
    std::vector<std::string> wanted = required;
    for (const char* optional : {"pids", "cpuacct"}) wanted.emplace_back(optional);
    for (const auto& c : wanted) {
      const fs::path mount = o.root / c;
      const bool needed = std::find(required.begin(), required.end(), c) != required.end() ||
                          (c == "pids" && o.pids_max > 0);
      if (!fs::exists(mount / "cgroup.procs")) {
        if (needed) throw cgroup_error("no cgroup v1 " + c + " hierarchy at " + mount.string());
        continue;
      }
      // Under the agent's own cgroup of that hierarchy when it is there
      // (an agent started inside a limited cgroup keeps its jobs inside it).
      fs::path under = mount;
      if (const std::string own = own_v1_path(c); !own.empty() && fs::is_directory(mount / own.substr(1))) {
        under = mount / own.substr(1);
      }
      std::vector<fs::path> levels{under / "aqs"};
      if (!o.cluster.empty()) {
        levels.push_back(levels.back() / o.cluster);
        levels.push_back(levels.back() / o.node);
      }
      const fs::path base = levels.back();
      for (const auto& level : levels) {
        make_dir(level);
        if (c == "cpuset") {
          // A v1 cpuset takes no process until both are set: from its parent.
          for (const char* f : {"cpuset.cpus", "cpuset.mems"}) {
            if (trimmed(read_text(level / f).value_or("")).empty()) {
              write_text(level / f, trimmed(read_text(level.parent_path() / f).value_or("")) + "\n");
            }
          }
        }
      }
      hierarchies_.push_back({c, base});
    }
  }

  int version() const override { return 1; }
  std::string describe() const override {
    std::string names;
    for (const auto& h : hierarchies_) names += (names.empty() ? "" : ", ") + h.controller;
    return "cgroup v1 (" + names + ") under " + base().string();
  }
  fs::path base() const override { return dir_of("memory", 0).parent_path(); }

  void create(std::int64_t id, const cgroup_limits& l) override {
    if (!scoped_) throw cgroup_error("no job cgroup before the agent knows its cluster");
    if (exists(id)) {
      kill_all(id);
      remove(id);
    }
    for (const auto& h : hierarchies_) {
      const fs::path d = h.base / job_dir_name(id);
      make_dir(d);
      if (h.controller == "cpuset") {
        write_text(d / "cpuset.mems", trimmed(read_text(h.base / "cpuset.mems").value_or("")) + "\n");
        const std::string cpus =
            l.cpus.empty() ? trimmed(read_text(h.base / "cpuset.cpus").value_or("")) : cpu_list(l.cpus);
        write_text(d / "cpuset.cpus", cpus + "\n");
      } else if (h.controller == "memory" && l.memory_bytes > 0) {
        write_text(d / "memory.limit_in_bytes", std::to_string(l.memory_bytes) + "\n");
        // RAM and swap together: the job cannot swap its way past its limit.
        if (fs::exists(d / "memory.memsw.limit_in_bytes")) {
          write_text(d / "memory.memsw.limit_in_bytes", std::to_string(l.memory_bytes) + "\n");
        }
      } else if (h.controller == "pids") {
        const std::int64_t max = l.pids_max > 0 ? l.pids_max : pids_max_;
        if (max > 0) write_text(d / "pids.max", std::to_string(max) + "\n");
      }
    }
  }

  void create_step(std::int64_t id, const std::string& step) override {
    const std::string name = step_dir_name(step);
    for (const auto& h : hierarchies_) {
      const fs::path job = h.base / job_dir_name(id);
      if (!fs::is_directory(job)) throw cgroup_error("no cgroup " + job.string() + " for its step " + step);
      const fs::path d = job / name;
      make_dir(d);
      if (h.controller == "cpuset") {
        // A v1 cpuset takes no process until both are set: the job's.
        for (const char* f : {"cpuset.mems", "cpuset.cpus"}) {
          write_text(d / f, trimmed(read_text(job / f).value_or("")) + "\n");
        }
      }
    }
  }
  std::vector<std::string> join_files(std::int64_t id, const std::string& step) const override {
    const std::string name = step_dir_name(step);
    std::vector<std::string> out;
    for (const auto& h : hierarchies_) out.push_back((h.base / job_dir_name(id) / name / "cgroup.procs").string());
    return out;
  }
  std::uint64_t step_oom_kills(std::int64_t id, const std::string& step) const override {
    return keyed(read_text(dir_of("memory", id) / step_dir_name(step) / "memory.oom_control"), "oom_kill");
  }
  void set_cpus(std::int64_t id, const std::vector<int>& cpus) override { rewrite_cpus(dir_of("cpuset", id), cpus); }
  std::vector<int> cpus(std::int64_t id) const override {
    return parse_cpu_list(read_text(dir_of("cpuset", id) / "cpuset.cpus").value_or(""));
  }
  bool exists(std::int64_t id) const override {
    return std::any_of(hierarchies_.begin(), hierarchies_.end(),
                       [&](const auto& h) { return fs::is_directory(h.base / job_dir_name(id)); });
  }
  std::vector<pid_t> procs(std::int64_t id) const override {
    std::set<pid_t> all;
    for (const auto& h : hierarchies_) {
      for (pid_t p : tree_pids(h.base / job_dir_name(id))) all.insert(p);
    }
    return {all.begin(), all.end()};
  }
  bool request_freeze(std::int64_t id, bool on) override {
    // FREEZING until every task has stopped, then FROZEN (frozen()).
    try {
      write_text(dir_of("freezer", id) / "freezer.state", on ? "FROZEN\n" : "THAWED\n");
    } catch (const cgroup_error&) {
      return false;
    }
    return true;
  }
  bool frozen(std::int64_t id) const override {
    return trimmed(read_text(dir_of("freezer", id) / "freezer.state").value_or("")) == "FROZEN";
  }
  std::uint64_t oom_kills(std::int64_t id) const override {
    // v1 counts an OOM kill in the victim's own cgroup only: the job's and
    // each step's, added up.
    const fs::path job = dir_of("memory", id);
    std::uint64_t n = keyed(read_text(job / "memory.oom_control"), "oom_kill");
    for (const auto& d : step_dirs(job)) n += keyed(read_text(d / "memory.oom_control"), "oom_kill");
    return n;
  }
  std::optional<std::pair<std::uint64_t, std::uint64_t>> cpu_usage_us(std::int64_t id) const override {
    const fs::path d = dir_of("cpuacct", id);
    if (d.empty() || !fs::is_directory(d)) return std::nullopt;
    // Nanoseconds per mode where the kernel has them (4.7 and later); the
    // tick counts of cpuacct.stat otherwise.
    const auto user_ns = number_in(read_text(d / "cpuacct.usage_user"));
    const auto sys_ns = number_in(read_text(d / "cpuacct.usage_sys"));
    if (user_ns && sys_ns) return std::pair{*user_ns / 1000, *sys_ns / 1000};
    const auto stat = read_text(d / "cpuacct.stat");
    if (!has_key(stat, "user")) return std::nullopt;
    const long hz = ::sysconf(_SC_CLK_TCK);
    const std::uint64_t per_tick = hz > 0 ? 1'000'000 / static_cast<std::uint64_t>(hz) : 10'000;
    return std::pair{keyed(stat, "user") * per_tick, keyed(stat, "system") * per_tick};
  }
  std::vector<fs::path> dirs(std::int64_t id) const override {
    std::vector<fs::path> out;
    for (const auto& h : hierarchies_) {
      const fs::path job = h.base / job_dir_name(id);
      for (const auto& d : step_dirs(job)) out.push_back(d);
      out.push_back(job);
    }
    return out;
  }

private:
  struct hierarchy {
    std::string controller;
    fs::path base;  // .../aqs/<node>
  };
  fs::path dir_of(const std::string& controller, std::int64_t id) const {
    for (const auto& h : hierarchies_) {
      if (h.controller == controller) return h.base / job_dir_name(id);
    }
    return {};
  }
  std::vector<hierarchy> hierarchies_;
  std::int64_t pids_max_ = 0;
  bool scoped_ = false;  // under a cluster and node: jobs may be made
};

// ---- v2 -------------------------------------------------------------------

class cgroup_v2 final : public cgroup_backend {
public:
  explicit cgroup_v2(const cgroup_options& o)
      : base_(o.cluster.empty() ? o.root / "aqs" : o.root / "aqs" / o.cluster / o.node),
        pids_max_(o.pids_max),
        scoped_(!o.cluster.empty()) {
    const auto controllers = read_text(o.root / "cgroup.controllers");
    if (!controllers) throw cgroup_error("no cgroup v2 hierarchy at " + o.root.string() + " (no cgroup.controllers)");
    std::vector<std::string> want{"memory", "cpuset"};
    if (o.pids_max > 0) want.emplace_back("pids");
    std::set<std::string> have;
    {
      std::istringstream in(*controllers);
      for (std::string c; in >> c;) have.insert(c);
    }
    for (const auto& c : want) {
      if (!have.count(c)) {
        throw cgroup_error("the cgroup v2 hierarchy at " + o.root.string() + " has no " + c +
                           " controller (cgroup.controllers: '" + trimmed(*controllers) + "')");
      }
    }
    if (have.count("pids") && !o.pids_max) want.emplace_back("pids");
    // Enabled for the children of each level down to the node's: root,
    // aqs, aqs/<cluster>, aqs/<cluster>/<node> (the root may hold
    // processes; the levels below hold none, as v2 requires of a cgroup
    // that enables controllers).
    std::vector<fs::path> levels{o.root, o.root / "aqs"};
    if (!o.cluster.empty()) {
      levels.push_back(levels.back() / o.cluster);
      levels.push_back(base_);
    }
    for (const auto& level : levels) {
      if (level != o.root) make_dir(level);
      const std::string enabled = read_text(level / "cgroup.subtree_control").value_or("");
      std::string add;
      for (const auto& c : want) {
        if (enabled.find(c) == std::string::npos) add += (add.empty() ? "+" : " +") + c;
      }
      if (!add.empty()) {
        const std::string merged = trimmed(enabled) + (trimmed(enabled).empty() ? "" : " ") + add;
        // Real cgroupfs takes "+a +b" and keeps what was there; a mimic
        // directory keeps the file as written (hence the merge).
        write_text(level / "cgroup.subtree_control", on_cgroupfs(level) ? add : merged);
      }
    }
    controllers_ = want;
  }

  int version() const override { return 2; }
  std::string describe() const override {
    std::string names;
    for (const auto& c : controllers_) names += (names.empty() ? "" : ", ") + c;
    return "cgroup v2 (" + names + ", freeze) under " + base_.string();
  }
  fs::path base() const override { return base_; }

  void create(std::int64_t id, const cgroup_limits& l) override {
    if (!scoped_) throw cgroup_error("no job cgroup before the agent knows its cluster");
    if (exists(id)) {
      kill_all(id);
      remove(id);
    }
    const fs::path d = base_ / job_dir_name(id);
    make_dir(d);
    const std::string mems = trimmed(read_text(base_ / "cpuset.mems.effective").value_or(""));
    if (!mems.empty()) write_text(d / "cpuset.mems", mems + "\n");
    if (!l.cpus.empty()) write_text(d / "cpuset.cpus", cpu_list(l.cpus) + "\n");
    if (l.memory_bytes > 0) {
      write_text(d / "memory.max", std::to_string(l.memory_bytes) + "\n");
      // Where swap is accounted (the file is in every non-root cgroup then).
      if (fs::exists(d / "memory.swap.max") || fs::exists(base_ / "memory.swap.max")) {
        write_text(d / "memory.swap.max", "0\n");
      }
    }
    const std::int64_t max = l.pids_max > 0 ? l.pids_max : pids_max_;
    if (max > 0) write_text(d / "pids.max", std::to_string(max) + "\n");
    // Its steps get the controllers (so the job's cgroup holds no process
    // itself, as v2 requires of a cgroup that enables them).
    std::string add;
    for (const auto& c : controllers_) add += (add.empty() ? "+" : " +") + c;
    if (!add.empty()) write_text(d / "cgroup.subtree_control", add + "\n");
  }
  void create_step(std::int64_t id, const std::string& step) override {
    const std::string name = step_dir_name(step);
    const fs::path job = base_ / job_dir_name(id);
    if (!fs::is_directory(job)) throw cgroup_error("no cgroup " + job.string() + " for its step " + step);
    make_dir(job / name);
  }
  std::vector<std::string> join_files(std::int64_t id, const std::string& step) const override {
    return {(base_ / job_dir_name(id) / step_dir_name(step) / "cgroup.procs").string()};
  }
  std::uint64_t step_oom_kills(std::int64_t id, const std::string& step) const override {
    return keyed(read_text(base_ / job_dir_name(id) / step_dir_name(step) / "memory.events"), "oom_kill");
  }
  void set_cpus(std::int64_t id, const std::vector<int>& cpus) override { rewrite_cpus(base_ / job_dir_name(id), cpus); }
  std::vector<int> cpus(std::int64_t id) const override {
    return parse_cpu_list(read_text(base_ / job_dir_name(id) / "cpuset.cpus").value_or(""));
  }
  bool exists(std::int64_t id) const override { return fs::is_directory(base_ / job_dir_name(id)); }
  std::vector<pid_t> procs(std::int64_t id) const override { return tree_pids(base_ / job_dir_name(id)); }
  bool request_freeze(std::int64_t id, bool on) override {
    const fs::path d = base_ / job_dir_name(id);
    if (!fs::is_directory(d)) return false;
    try {
      write_text(d / "cgroup.freeze", on ? "1\n" : "0\n");
    } catch (const cgroup_error&) {
      return false;
    }
    return true;
  }
  bool frozen(std::int64_t id) const override {
    const fs::path d = base_ / job_dir_name(id);
    if (const auto events = read_text(d / "cgroup.events")) return keyed(events, "frozen") == 1;
    return trimmed(read_text(d / "cgroup.freeze").value_or("")) == "1";
  }
  std::uint64_t oom_kills(std::int64_t id) const override {
    // memory.events counts the job's steps too (unless cgroupfs is mounted
    // with memory_localevents: then each one's, added up).
    const fs::path job = base_ / job_dir_name(id);
    if (!fs::exists(job / "memory.events.local")) return keyed(read_text(job / "memory.events"), "oom_kill");
    std::uint64_t n = keyed(read_text(job / "memory.events.local"), "oom_kill");
    for (const auto& d : step_dirs(job)) n += keyed(read_text(d / "memory.events.local"), "oom_kill");
    return n;
  }
  std::optional<std::pair<std::uint64_t, std::uint64_t>> cpu_usage_us(std::int64_t id) const override {
    // cpu.stat is in every v2 cgroup, the cpu controller enabled or not.
    const auto stat = read_text(base_ / job_dir_name(id) / "cpu.stat");
    if (!has_key(stat, "user_usec")) return std::nullopt;
    return std::pair{keyed(stat, "user_usec"), keyed(stat, "system_usec")};
  }
  std::vector<fs::path> dirs(std::int64_t id) const override {
    const fs::path job = base_ / job_dir_name(id);
    std::vector<fs::path> out = step_dirs(job);
    out.push_back(job);
    return out;
  }

private:
  fs::path base_;
  std::int64_t pids_max_ = 0;
  std::vector<std::string> controllers_;
  bool scoped_ = false;  // under a cluster and node: jobs may be made
};

}  // namespace

int cgroup_backend::signal_all(std::int64_t job_id, int sig) const {
  int n = 0;
  for (pid_t p : procs(job_id)) {
    if (p > 1 && ::kill(p, sig) == 0) ++n;
  }
  return n;
}

bool cgroup_backend::freeze(std::int64_t job_id, bool on) {
  if (!request_freeze(job_id, on)) return false;
  if (!on) return true;
  // Where the kernel shows no state (a directory that mimics cgroupfs
  // without cgroup.events), frozen() reads back the request.
  const auto until = std::chrono::steady_clock::now() + 1s;
  while (std::chrono::steady_clock::now() < until) {
    if (frozen(job_id)) return true;
    std::this_thread::sleep_for(2ms);
  }
  return frozen(job_id);
}

bool cgroup_backend::kill_all(std::int64_t job_id) {
  // Freezing, what has stopped cannot fork while the list is read and
  // killed (what has not yet stopped and forks is found on the next round);
  // the thaw lets the SIGKILLs take effect (a frozen task dies only when
  // thawed). No wait for the whole cgroup to be frozen: a task in the
  // kernel (an OOM kill under way, a loaded machine) can delay that by a
  // second, and the kill needs none of it.
  const auto until = std::chrono::steady_clock::now() + 2s;
  while (true) {
    auto pids = procs(job_id);
    if (pids.empty()) return true;
    if (std::chrono::steady_clock::now() > until) return false;
    const bool froze = request_freeze(job_id, true);
    for (pid_t p : procs(job_id)) {
      if (p > 1) ::kill(p, SIGKILL);
    }
    if (froze) request_freeze(job_id, false);
    // Dying tasks leave cgroup.procs once they are reaped by their parents
    // (or us, their subreaper): a short wait before reading it again.
    for (int i = 0; i < 50 && !procs(job_id).empty(); ++i) std::this_thread::sleep_for(2ms);
  }
}

std::vector<std::string> cgroup_backend::steps(std::int64_t job_id) const {
  std::vector<std::string> out;
  const auto all = dirs(job_id);
  if (all.empty()) return out;
  // The first hierarchy's job directory is the first one not a step's.
  for (const auto& d : all) {
    const std::string n = d.filename().string();
    if (n.rfind(k_step_prefix, 0) != 0) break;
    out.push_back(n.substr(std::strlen(k_step_prefix)));
  }
  return out;
}

bool cgroup_backend::remove(std::int64_t job_id) const {
  bool ok = true;
  for (const auto& d : dirs(job_id)) ok = remove_dir(d) && ok;
  return ok;
}

void cgroup_backend::remove_empty_levels() const {
  for (const auto& d : dirs(0)) {
    ::rmdir(d.parent_path().c_str());                  // aqs/<cluster>/<node>
    ::rmdir(d.parent_path().parent_path().c_str());    // aqs/<cluster>
  }
}

std::unique_ptr<cgroup_backend> make_cgroup_v1(const cgroup_options& o) { return std::make_unique<cgroup_v1>(o); }
std::unique_ptr<cgroup_backend> make_cgroup_v2(const cgroup_options& o) { return std::make_unique<cgroup_v2>(o); }

std::unique_ptr<cgroup_backend> probe_cgroups(const cgroup_options& o, std::string& why) {
  why.clear();
  if (o.want == cgroup_options::mode::off) {
    why = "cgroups turned off (--cgroups off)";
    return nullptr;
  }
  std::string v2_why, v1_why;
  if (o.want != cgroup_options::mode::v1) {
    try {
      return make_cgroup_v2(o);
    } catch (const std::exception& e) {
      v2_why = e.what();
    }
  }
  if (o.want != cgroup_options::mode::v2) {
    try {
      return make_cgroup_v1(o);
    } catch (const std::exception& e) {
      v1_why = e.what();
    }
  }
  if (o.want == cgroup_options::mode::v2) {
    why = "cgroup v2: " + v2_why;
  } else if (o.want == cgroup_options::mode::v1) {
    why = "cgroup v1: " + v1_why;
  } else {
    why = "cgroup v2: " + v2_why + "; cgroup v1: " + v1_why;
  }
  return nullptr;
}

cgroup_options::mode parse_cgroup_mode(const std::string& text) {
  if (text == "auto") return cgroup_options::mode::automatic;
  if (text == "v1") return cgroup_options::mode::v1;
  if (text == "v2") return cgroup_options::mode::v2;
  if (text == "off") return cgroup_options::mode::off;
  throw std::invalid_argument("--cgroups must be one of auto, v1, v2, off (got '" + text + "')");
}

}  // namespace aqs::node
