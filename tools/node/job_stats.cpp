// job_stats: sstat's measurements of the jobs running on this node, and the
// local socket that gives them to the job's owner.
#include "job_stats.hpp"

#include <dirent.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <fstream>
#include <set>
#include <sstream>
#include <tuple>

#include <boost/asio/post.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/streambuf.hpp>
#include <boost/asio/write.hpp>
#include <nlohmann/json.hpp>

#include "logging/log.hpp"

namespace aqs::node {

namespace asio = boost::asio;
using local = asio::local::stream_protocol;

namespace {

// How often the peaks are sampled (Slurm's JobAcctGatherFrequency is 30 s;
// each process's own peak, VmHWM, is the kernel's and misses nothing).
constexpr auto k_sample_every = std::chrono::seconds(3);

std::string read_text(const std::string& path, std::size_t limit = 1 << 20) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  std::string out(limit, '\0');
  in.read(out.data(), static_cast<std::streamsize>(limit));
  out.resize(static_cast<std::size_t>(in.gcount()));
  return out;
}

template <class T>
std::optional<T> number(std::string_view s) {
  T v{};
  const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || r.ec != std::errc() || r.ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

// Calls `found` on each `sep`-ended record of `text` (the last one may lack
// its `sep`) until it returns true.
template <class Found>
void scan_records(std::string_view text, char sep, Found found) {
  std::size_t at = 0;
  while (at < text.size()) {
    const auto end = text.find(sep, at);
    const std::string_view rec = text.substr(at, end == std::string_view::npos ? std::string_view::npos : end - at);
    at = end == std::string_view::npos ? text.size() : end + 1;
    if (found(rec)) return;
  }
}

// The number after "Key:" in /proc/PID/status (the first one on its line).
std::optional<std::uint64_t> status_field(std::string_view status, std::string_view key) {
  std::optional<std::uint64_t> out;
  scan_records(status, '\n', [&](std::string_view line) {
    if (!line.starts_with(key) || line.size() <= key.size() || line[key.size()] != ':') return false;
    std::size_t i = key.size() + 1;
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    std::size_t j = i;
    while (j < line.size() && line[j] >= '0' && line[j] <= '9') ++j;
    out = number<std::uint64_t>(line.substr(i, j - i));
    return true;
  });
  return out;
}

std::optional<std::string_view> environ_value(std::string_view env, std::string_view key) {
  std::optional<std::string_view> out;
  scan_records(env, '\0', [&](std::string_view kv) {
    if (kv.size() > key.size() && kv.starts_with(key) && kv[key.size()] == '=') out = kv.substr(key.size() + 1);
    return out.has_value();
  });
  return out;
}

bool step_name_ok(std::string_view s) {
  return !s.empty() && s.size() <= 10 && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

std::optional<proc_usage> parse_proc_usage(std::string_view stat, std::string_view status, std::string_view environ,
                                           std::uint64_t page_kb, std::uint64_t ticks_per_s) {
  // "pid (comm) state ppid pgrp session ...": comm may hold anything, so
  // the fields are counted from its last ')'.
  const auto close = stat.rfind(')');
  if (close == std::string_view::npos || ticks_per_s == 0) return std::nullopt;
  std::vector<std::string_view> f;  // f[0] is field 3 (state)
  std::size_t at = close + 1;
  while (at < stat.size()) {
    while (at < stat.size() && (stat[at] == ' ' || stat[at] == '\n')) ++at;
    const auto end = stat.find_first_of(" \n", at);
    if (at < stat.size()) f.push_back(stat.substr(at, end == std::string_view::npos ? std::string_view::npos : end - at));
    at = end == std::string_view::npos ? stat.size() : end;
  }
  if (f.size() < 22) return std::nullopt;
  auto field = [&](int n) { return number<std::uint64_t>(f[static_cast<std::size_t>(n - 3)]); };
  const auto pid = number<std::int64_t>(stat.substr(0, stat.find(' ')));
  const auto pgrp = field(5), session = field(6), utime = field(14), stime = field(15), vsize = field(23),
             rss = field(24);
  const auto cutime = number<std::int64_t>(f[16 - 3]), cstime = number<std::int64_t>(f[17 - 3]);
  if (!pid || !pgrp || !session || !utime || !stime || !vsize || !rss || !cutime || !cstime) return std::nullopt;
  proc_usage u;
  u.pid = static_cast<pid_t>(*pid);
  u.pgid = static_cast<pid_t>(*pgrp);
  u.sid = static_cast<pid_t>(*session);
  u.uid = static_cast<uid_t>(status_field(status, "Uid").value_or(0));
  u.rss_kb = *rss * page_kb;
  u.vsize_kb = *vsize / 1024;
  u.hwm_kb = status_field(status, "VmHWM").value_or(0);
  const std::uint64_t ticks = *utime + *stime + static_cast<std::uint64_t>(std::max<std::int64_t>(0, *cutime)) +
                              static_cast<std::uint64_t>(std::max<std::int64_t>(0, *cstime));
  u.cpu_ms = ticks * 1000 / ticks_per_s;
  if (const auto s = environ_value(environ, "SLURM_STEP_ID"); s && step_name_ok(*s)) u.step = std::string(*s);
  if (const auto t = environ_value(environ, "SLURM_PROCID")) u.task = number<std::int64_t>(*t).value_or(0);
  if (u.step == "batch") u.task = 0;
  return u;
}

std::optional<proc_usage> read_proc_usage(pid_t pid, const std::string& proc) {
  const std::string dir = proc + "/" + std::to_string(pid);
  const std::string stat = read_text(dir + "/stat", 4096);
  if (stat.empty()) return std::nullopt;
  static const std::uint64_t page_kb = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE)) / 1024;
  static const std::uint64_t ticks = static_cast<std::uint64_t>(::sysconf(_SC_CLK_TCK));
  return parse_proc_usage(stat, read_text(dir + "/status", 16384), read_text(dir + "/environ", 256 * 1024), page_kb,
                          ticks);
}

std::vector<step_usage> group_usage(const std::vector<proc_usage>& procs, peak_table& peaks) {
  std::map<std::pair<std::string, std::int64_t>, task_usage> tasks;
  std::map<std::pair<std::string, std::int64_t>, std::uint64_t> hwm;
  for (const auto& p : procs) {
    task_usage& t = tasks[{p.step, p.task}];
    t.task = p.task;
    t.rss_kb += p.rss_kb;
    t.vsize_kb += p.vsize_kb;
    t.cpu_ms += p.cpu_ms;
    t.pids.push_back(p.pid);
    auto& h = hwm[{p.step, p.task}];
    h = std::max(h, p.hwm_kb);
  }
  std::map<std::string, step_usage> steps;
  for (auto& [key, t] : tasks) {
    auto& peak = peaks[key];
    peak.first = std::max({peak.first, t.rss_kb, hwm[key]});
    peak.second = std::max(peak.second, t.vsize_kb);
    t.max_rss_kb = peak.first;
    t.max_vsize_kb = peak.second;
    std::sort(t.pids.begin(), t.pids.end());
    auto& s = steps[key.first];
    s.step = key.first;
    s.tasks.push_back(std::move(t));
  }
  std::vector<step_usage> out;
  for (auto& [name, s] : steps) out.push_back(std::move(s));
  // Numbered steps in order, then batch (as Slurm lists a job's steps).
  std::sort(out.begin(), out.end(), [](const step_usage& a, const step_usage& b) {
    const bool an = a.step != "batch", bn = b.step != "batch";
    if (an != bn) return an;
    if (a.step.size() != b.step.size()) return a.step.size() < b.step.size();
    return a.step < b.step;
  });
  return out;
}


job_stats_server::job_stats_server(asio::io_context& io, std::string node, const job_supervisor& supervisor)
    : io_(io), node_(std::move(node)), supervisor_(supervisor), acceptor_(io), timer_(io) {}

job_stats_server::~job_stats_server() {
  alive_.reset();
  worker_.join();  // a scan under way ends; what it posts back finds alive_ expired
  boost::system::error_code ec;
  acceptor_.close(ec);
  timer_.cancel();
}

void job_stats_server::start(const std::string& name) {
  const local::endpoint ep(name);
  acceptor_.open(ep.protocol());
  acceptor_.bind(ep);
  acceptor_.listen(16);
  accept();
  sample();
}

job_stats_server::job_view job_stats_server::view_of(std::int64_t job_id) const {
  job_view v;
  v.id = job_id;
  const auto sg = supervisor_.step_and_group(job_id);
  if (!sg) return v;
  std::tie(v.step, v.group) = *sg;
  if (supervisor_.contained(job_id) && supervisor_.containment() != nullptr) {
    for (pid_t p : supervisor_.containment()->procs(job_id)) v.in_cgroup.insert(p);
  }
  return v;
}

std::map<std::int64_t, std::vector<proc_usage>> job_stats_server::scan(const std::vector<job_view>& jobs) {
  std::map<std::int64_t, std::vector<proc_usage>> out;
  std::vector<const job_view*> wanted;
  for (const auto& v : jobs) {
    out[v.id];
    if (!v.in_cgroup.empty() || v.step > 0 || v.group > 0) wanted.push_back(&v);
  }
  if (wanted.empty()) return out;
  DIR* d = ::opendir("/proc");
  if (d == nullptr) return out;
  static const std::uint64_t page_kb = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE)) / 1024;
  static const std::uint64_t ticks = static_cast<std::uint64_t>(::sysconf(_SC_CLK_TCK));
  const std::lock_guard lock(tags_mutex_);
  std::set<pid_t> seen;
  while (const dirent* e = ::readdir(d)) {
    const auto pid = number<pid_t>(e->d_name);
    if (!pid) continue;
    // The stat line alone says whether it is a job's (its session, made by
    // the step, or process group, or its cgroup; never the step itself).
    const std::string dir = "/proc/" + std::string(e->d_name);
    const std::string stat = read_text(dir + "/stat", 4096);
    const auto first = parse_proc_usage(stat, "", "", page_kb, ticks);
    if (!first) continue;
    const job_view* of = nullptr;
    for (const job_view* v : wanted) {
      if (*pid == v->step) continue;
      if (v->in_cgroup.count(*pid) != 0 || (v->step > 0 && first->sid == v->step) ||
          (v->group > 0 && first->pgid == v->group)) {
        of = v;
        break;
      }
    }
    if (of == nullptr) continue;
    seen.insert(*pid);
    // Its start time (field 22) and name: the same process as last time?
    const auto open = stat.find('('), close = stat.rfind(')');
    const std::string comm = open != std::string::npos && close != std::string::npos && close > open
                                 ? stat.substr(open + 1, close - open - 1)
                                 : std::string();
    std::uint64_t start = 0;
    {
      std::istringstream rest(close != std::string::npos ? stat.substr(close + 1) : std::string());
      std::string field;
      for (int i = 3; i <= 22 && rest >> field; ++i) {
        if (i == 22) start = number<std::uint64_t>(field).value_or(0);
      }
    }
    auto known = tags_.find(*pid);
    const bool same = known != tags_.end() && known->second.start == start && known->second.comm == comm;
    const std::string status = read_text(dir + "/status", 16384);
    if (same) {
      if (auto u = parse_proc_usage(stat, status, "", page_kb, ticks)) {
        u->step = known->second.step;
        u->task = known->second.task;
        out[of->id].push_back(std::move(*u));
      }
    } else if (auto u = parse_proc_usage(stat, status, read_text(dir + "/environ", 256 * 1024), page_kb, ticks)) {
      tags_[*pid] = tag{start, comm, u->step, u->task};
      out[of->id].push_back(std::move(*u));
    }
  }
  ::closedir(d);
  for (auto it = tags_.begin(); it != tags_.end();) it = seen.count(it->first) != 0 ? std::next(it) : tags_.erase(it);
  return out;
}

std::string job_stats_server::answer(std::int64_t job_id, uid_t caller) {
  if (!supervisor_.is_running(job_id)) return reply_for(job_id, caller, {});
  return reply_for(job_id, caller, scan({view_of(job_id)})[job_id]);
}

std::string job_stats_server::reply_for(std::int64_t job_id, uid_t caller, const std::vector<proc_usage>& procs) {
  using nlohmann::json;
  auto error = [&](const char* code, const std::string& message) {
    return json{{"error", code}, {"message", message}, {"node", node_}, {"job_id", job_id}}.dump() + "\n";
  };
  if (!supervisor_.is_running(job_id)) return error("not_found", "job " + std::to_string(job_id) + " is not running on " + node_);
  // The owner: the launch's uid; for a job adopted from an earlier agent,
  // the real uid its processes run as.
  std::optional<uid_t> owner;
  if (const auto it = owners_.find(job_id); it != owners_.end()) owner = it->second;
  if (!owner) {
    for (const auto& p : procs) {
      if (p.uid != 0 || ::geteuid() != 0) {
        owner = p.uid;
        break;
      }
    }
  }
  if (caller != 0 && caller != ::geteuid() && (!owner || *owner != caller)) {
    return error("permission_denied", "job " + std::to_string(job_id) + " is not yours");
  }
  auto& peaks = peaks_[job_id];
  json steps = json::array();
  for (const auto& s : group_usage(procs, peaks)) {
    json tasks = json::array();
    for (const auto& t : s.tasks) {
      tasks.push_back({{"task", t.task},
                       {"rss_kb", t.rss_kb},
                       {"max_rss_kb", t.max_rss_kb},
                       {"vsize_kb", t.vsize_kb},
                       {"max_vsize_kb", t.max_vsize_kb},
                       {"cpu_ms", t.cpu_ms},
                       {"pids", t.pids}});
    }
    steps.push_back({{"step", s.step}, {"tasks", std::move(tasks)}});
  }
  return json{{"node", node_}, {"job_id", job_id}, {"steps", std::move(steps)}}.dump() + "\n";
}

void job_stats_server::sample() {
  // Forget what ended; raise the peaks of what runs: /proc read on the
  // worker, the peaks kept here.
  for (auto it = peaks_.begin(); it != peaks_.end();) {
    it = supervisor_.is_running(it->first) ? std::next(it) : peaks_.erase(it);
  }
  for (auto it = owners_.begin(); it != owners_.end();) {
    it = supervisor_.is_running(it->first) ? std::next(it) : owners_.erase(it);
  }
  std::vector<job_view> views;
  for (std::int64_t id : supervisor_.running()) views.push_back(view_of(id));
  std::weak_ptr<int> alive = alive_;
  asio::post(worker_, [this, alive, views = std::move(views)] {
    auto found = scan(views);
    asio::post(io_, [this, alive, found = std::move(found)] {
      if (alive.expired()) return;
      for (const auto& [id, procs] : found) {
        if (supervisor_.is_running(id)) (void)group_usage(procs, peaks_[id]);
      }
      timer_.expires_after(k_sample_every);
      timer_.async_wait([this](const boost::system::error_code& ec) {
        if (!ec) sample();
      });
    });
  });
}

void job_stats_server::accept() {
  acceptor_.async_accept([this](const boost::system::error_code& ec, local::socket sock) {
    if (ec == asio::error::operation_aborted) return;
    if (!ec) {
      auto s = std::make_shared<local::socket>(std::move(sock));
      auto buf = std::make_shared<asio::streambuf>(512);
      auto deadline = std::make_shared<asio::steady_timer>(io_, std::chrono::seconds(5));
      deadline->async_wait([s](const boost::system::error_code& e) {
        if (!e) {
          boost::system::error_code ignored;
          s->close(ignored);
        }
      });
      asio::async_read_until(*s, *buf, '\n', [this, s, buf, deadline](const boost::system::error_code& e, std::size_t n) {
        deadline->cancel();
        if (e) return;
        std::string line(asio::buffers_begin(buf->data()), asio::buffers_begin(buf->data()) + static_cast<std::ptrdiff_t>(n));
        ucred cred{};
        socklen_t len = sizeof cred;
        if (::getsockopt(s->native_handle(), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return;
        const auto send = [s](std::string reply) {
          auto out = std::make_shared<std::string>(std::move(reply));
          asio::async_write(*s, asio::buffer(*out), [s, out](const boost::system::error_code&, std::size_t) {});
        };
        std::int64_t id = 0;
        try {
          id = nlohmann::json::parse(line).at("job_id").get<std::int64_t>();
        } catch (const std::exception&) {
          send(nlohmann::json{{"error", "bad_request"}, {"message", "expected {\"job_id\":N}"}}.dump() + "\n");
          return;
        }
        const uid_t caller = cred.uid;
        if (!supervisor_.is_running(id)) {
          send(reply_for(id, caller, {}));
          return;
        }
        // /proc is read on the worker (scan), the reply made back here.
        std::weak_ptr<int> alive = alive_;
        asio::post(worker_, [this, alive, id, caller, send, view = view_of(id)] {
          auto procs = scan({view})[id];
          asio::post(io_, [this, alive, id, caller, send, procs = std::move(procs)] {
            if (!alive.expired()) send(reply_for(id, caller, procs));
          });
        });
      });
    }
    accept();
  });
}

}  // namespace aqs::node
