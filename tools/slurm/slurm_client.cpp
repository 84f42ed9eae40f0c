// slurm_client: the queries behind squeue, sacct, sinfo and scancel.
#include "slurm/slurm_client.hpp"

#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <map>

#include "client/job_listing.hpp"

namespace aqs::slurm {

std::optional<std::int64_t> uid_of_user(const std::string& name) {
  if (name == "root") return 0;
  struct passwd pw {};
  struct passwd* found = nullptr;
  char buf[4096];
  if (::getpwnam_r(name.c_str(), &pw, buf, sizeof buf, &found) != 0 || found == nullptr) return std::nullopt;
  return static_cast<std::int64_t>(found->pw_uid);
}

namespace {

std::optional<std::string> name_of_uid(uid_t uid) {
  struct passwd pw {};
  struct passwd* found = nullptr;
  char buf[4096];
  if (::getpwuid_r(uid, &pw, buf, sizeof buf, &found) != 0 || found == nullptr) return std::nullopt;
  return std::string(found->pw_name);
}

}  // namespace

std::string current_user() {
  const uid_t uid = ::getuid();
  return name_of_uid(uid).value_or(std::to_string(uid));
}

std::string resolve_user(const std::string& u) {
  if (u == "\x01me") return current_user();
  if (!u.empty() && std::all_of(u.begin(), u.end(), [](char c) { return c >= '0' && c <= '9'; }) && u.size() < 10) {
    if (const auto n = name_of_uid(static_cast<uid_t>(std::stoul(u)))) return *n;
  }
  return u;
}

std::vector<job_view> fetch_jobs(client::connection& c, const protocol::list_jobs& request, bool details) {
  const client::job_listing l = client::list_job_pages(c, request, std::nullopt);
  const std::vector<protocol::job_info> jobs = client::parse_jobs(l);
  std::map<std::string, std::optional<std::int64_t>> uids;
  const uid_lookup lookup = [&](const std::string& name) {
    const auto it = uids.find(name);
    if (it != uids.end()) return it->second;
    return uids[name] = uid_of_user(name);
  };
  std::vector<job_view> out;
  out.reserve(jobs.size());
  // A finished job's history tells where it ran ("started on node2:0-3"),
  // the signal that ended it and who cancelled it: one more request each, so
  // only for the first k_max_histories of them.
  constexpr std::size_t k_max_histories = 2000;
  std::size_t histories = 0;
  for (const auto& j : jobs) {
    job_view v = make_view(j, lookup);
    const bool ask = details && core::is_final(j.state) && (j.start_time || j.state == core::job_state::cancelled) &&
                     histories < k_max_histories;
    if (ask) {
      ++histories;
      add_history(c, v, lookup);
    }
    out.push_back(std::move(v));
  }
  return out;
}

void add_history(client::connection& c, job_view& v, const uid_lookup& lookup) {
  try {
    const auto h = c.ask(protocol::job_history{c.next_id(), v.info.id});
    v.map_seconds = map_integral(h.events);  // CPUTime without a usage record (issue 32)
    for (const auto& e : h.events) {
      const std::string started = "started on ";
      if (e.new_state == core::job_state::running && e.reason.starts_with(started) && v.hosts.empty()) {
        v.hosts = job_hosts(e.reason.substr(started.size()));
      }
      if (!core::is_final(e.new_state)) continue;
      if (e.signal) v.signal = e.signal;
      const std::string by = "cancelled by ";
      if (e.new_state == core::job_state::cancelled && e.reason.starts_with(by) && lookup) {
        v.cancelled_by = lookup(e.reason.substr(by.size()));
      }
    }
  } catch (const client::client_error&) {
    // History is a detail: the job is shown without it.
  }
}

std::vector<node_view> fetch_nodes(client::connection& c) {
  const auto reply = c.ask(protocol::list_nodes{c.next_id()});
  const auto& listed = reply.nodes;
  protocol::list_jobs running;
  running.states = {core::job_state::running, core::job_state::resizing, core::job_state::suspended};
  const auto jobs = client::parse_jobs(client::list_job_pages(c, running, std::nullopt));
  std::vector<node_view> out;
  for (const protocol::node_info& n : listed) {
    node_view v;
    v.info = n;
    for (const auto& j : jobs) v.allocated += procs_on_host(j.nodes, n.name);
    v.allocated = std::min(v.allocated, n.nprocs);
    if (reply.partitions.empty()) {
      out.push_back(std::move(v));
      continue;
    }
    // One view per partition the node is in, as sinfo lists them.
    for (const auto& p : reply.partitions) {
      if (std::find(n.partitions.begin(), n.partitions.end(), p.name) == n.partitions.end()) continue;
      node_view in = v;
      in.partition = partition_view{p.name, p.is_default, p.state, p.max_time_s, p.max_nodes};
      out.push_back(std::move(in));
    }
  }
  // Partitions in the configuration's order, nodes in Slurm's within each.
  auto rank = [&](const node_view& v) {
    for (std::size_t i = 0; i < reply.partitions.size(); ++i) {
      if (reply.partitions[i].name == v.partition.name) return i;
    }
    return std::size_t{0};
  };
  std::stable_sort(out.begin(), out.end(), [&](const node_view& a, const node_view& b) {
    const std::size_t ra = rank(a), rb = rank(b);
    if (ra != rb) return ra < rb;
    return host_order(a.info.name, b.info.name);
  });
  return out;
}

std::time_t now() { return std::time(nullptr); }

std::string slurm_usage_message(const std::string& message, const std::string& name, bool& getopt_style) {
  getopt_style = false;
  for (const char* cmd : {"fsub", "frun"}) {
    const std::string see = std::string(" (see ") + cmd + " --help)";
    const std::string unknown = "unknown option '";
    if (message.starts_with(unknown) && message.ends_with("'" + see)) {
      getopt_style = true;
      return "unrecognized option '" + message.substr(unknown.size(), message.size() - unknown.size() - see.size() - 1) +
             "'\nTry \"" + name + " --help\" for more information";
    }
    const std::size_t at = message.find(see);
    if (at != std::string::npos) {
      return message.substr(0, at) + " (see " + name + " --help)" + message.substr(at + see.size());
    }
  }
  return message;
}

}  // namespace aqs::slurm
