// access_view: the guarded copies and the role=job admission check.
#include "daemon/access_view.hpp"

#include <algorithm>

#include "core/adaptive_placement.hpp"
#include "daemon_base/permissions.hpp"
#include "protocol/errors.hpp"

namespace aqs::daemon {

void add_agent_address(const peer_info& agent, std::set<std::string>& addrs) {
  if (agent.via == transport::tcp) {
    addrs.insert(agent.address);
  } else {
    addrs.insert("127.0.0.1");
    addrs.insert("::1");
    addrs.insert("::ffff:127.0.0.1");
  }
}

void access_view::set_machine(core::cluster machine, std::vector<core::node_resources> resources) {
  std::lock_guard lk(mu_);
  machine_ = std::move(machine);
  resources_ = std::move(resources);
}

std::optional<std::string> access_view::never_fits(const core::job_request& r) const {
  std::lock_guard lk(mu_);
  if (machine_.nodes().empty()) return std::nullopt;
  std::vector<std::size_t> all(machine_.nodes().size());
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = i;
  if (!r.nodelist.empty() || !r.exclude.empty()) {
    // Named nodes (--nodelist, --exclude): only those it may use count.
    for (const std::string& n : r.nodelist) {
      bool known = false;
      for (const auto& nd : machine_.nodes()) known = known || nd.name == n;
      if (!known) return "Invalid node name specified: " + n + " is not a node of this cluster";
    }
    std::erase_if(all, [&](std::size_t i) {
      const std::string& name = machine_.at(i).name;
      const bool listed = r.nodelist.empty() || std::find(r.nodelist.begin(), r.nodelist.end(), name) != r.nodelist.end();
      return !listed || std::find(r.exclude.begin(), r.exclude.end(), name) != r.exclude.end();
    });
    if (all.empty()) return std::string("--exclude leaves it no node");
    if (r.shape.plain()) {
      std::size_t total = 0;
      for (std::size_t i : all) total += machine_.at(i).procs;
      if (r.min_pe > total) {
        return "it needs " + std::to_string(r.min_pe) + " processors; the nodes it may use have " + std::to_string(total);
      }
      return std::nullopt;
    }
    return never_fits_shaped(r, all);
  }
  if (r.shape.plain()) {
    if (r.min_pe > machine_.size()) {
      return "it needs " + std::to_string(r.min_pe) + " processors; the cluster has " + std::to_string(machine_.size());
    }
    return std::nullopt;
  }
  return never_fits_shaped(r, all);
}

std::optional<std::string> access_view::never_fits_shaped(const core::job_request& r,
                                                          const std::vector<std::size_t>& nodes) const {
  if (r.adaptive && core::node_bound(r.shape)) {
    return core::adaptive_never_fits(machine_, resources_, nodes, r.shape, r.min_pe, r.max_pe);
  }
  return core::never_fits(machine_, resources_, nodes, r.shape, r.min_pe);
}

std::optional<std::string> access_view::never_fits(const core::job_request& r, const core::partition& p) const {
  std::lock_guard lk(mu_);
  std::vector<std::size_t> mine;
  std::vector<std::size_t> sizes;
  std::size_t total = 0;
  for (std::size_t i = 0; i < machine_.nodes().size(); ++i) {
    if (!p.has_node(machine_.at(i).name)) continue;
    mine.push_back(i);
    sizes.push_back(machine_.at(i).procs);
    total += machine_.at(i).procs;
  }
  if (mine.empty()) return std::nullopt;
  const std::string in = " in partition " + p.name;
  // Nodes named in the configuration but not registered yet may be larger.
  const bool all_known = p.all_nodes || mine.size() == p.nodes.size();
  if (p.max_nodes > 0 && all_known) {
    // The fewest nodes that hold the job (an adaptive job's minimum, which
    // MaxNodes bounds as it bounds its growth): the largest first.
    std::sort(sizes.rbegin(), sizes.rend());
    std::size_t need = 0, got = 0;
    while (need < sizes.size() && got < r.min_pe) got += sizes[need++];
    if (got >= r.min_pe && need > p.max_nodes) {
      return "Node count specification invalid: " + std::to_string(r.min_pe) + " processors need " +
             std::to_string(need) + " nodes" + in + ", MaxNodes is " + std::to_string(p.max_nodes);
    }
  }
  if (r.shape.plain()) {
    if (all_known && r.min_pe > total) {
      return "it needs " + std::to_string(r.min_pe) + " processors; partition " + p.name + " has " + std::to_string(total);
    }
    return std::nullopt;
  }
  if (!all_known) return std::nullopt;
  core::job_shape shape = r.shape;
  if (p.max_nodes > 0 && (shape.max_nodes == 0 || shape.max_nodes > p.max_nodes)) shape.max_nodes = p.max_nodes;
  core::job_request within = r;
  within.shape = shape;
  if (auto why = never_fits_shaped(within, mine)) return *why + in;
  return std::nullopt;
}

void access_view::set_reason(std::int64_t job, std::string reason) {
  std::lock_guard lk(mu_);
  if (reason.empty()) {
    reasons_.held.erase(job);
  } else {
    reasons_.held[job] = std::move(reason);
  }
}

void access_view::set_queue_head(std::optional<std::int64_t> job) {
  std::lock_guard lk(mu_);
  reasons_.head = job;
}

void access_view::set_partition_reasons(std::set<std::int64_t> heads,
                                        std::unordered_map<std::int64_t, std::string> reasons) {
  std::lock_guard lk(mu_);
  reasons_.heads = std::move(heads);
  reasons_.partition = std::move(reasons);
}

access_view::reasons_t access_view::reasons() const {
  std::lock_guard lk(mu_);
  return reasons_;
}

std::string access_view::reasons_t::of_pending(std::int64_t job) const {
  const auto it = held.find(job);
  if (it != held.end()) return it->second;
  const auto p = partition.find(job);
  if (p != partition.end()) return p->second;
  return head == job || heads.count(job) != 0 ? "Resources" : "Priority";
}

void access_view::set_spans(std::vector<core::node_span> spans) {
  std::lock_guard lock(mu_);
  spans_ = std::move(spans);
}

std::vector<core::node_span> access_view::spans() const {
  std::lock_guard lock(mu_);
  return spans_;
}

void access_view::set_owner(std::int64_t job, std::int32_t uid) {
  std::lock_guard lock(mu_);
  owners_[job] = uid;
}

void access_view::set_token(std::int64_t job, std::string token) {
  std::lock_guard lock(mu_);
  tokens_[job] = std::move(token);
}

void access_view::set_job_addresses(std::int64_t job, std::set<std::string> addrs) {
  std::lock_guard lock(mu_);
  job_addrs_[job] = std::move(addrs);
}

void access_view::set_agent_addresses(std::set<std::string> addrs) {
  std::lock_guard lock(mu_);
  agent_addrs_ = std::move(addrs);
}

void access_view::forget_instance(std::int64_t job) {
  std::lock_guard lock(mu_);
  tokens_.erase(job);
  job_addrs_.erase(job);
}

void access_view::forget_job(std::int64_t job) {
  std::lock_guard lock(mu_);
  owners_.erase(job);
  tokens_.erase(job);
  job_addrs_.erase(job);
  reasons_.held.erase(job);
}

std::optional<std::int32_t> access_view::owner(std::int64_t job) const {
  std::lock_guard lock(mu_);
  auto it = owners_.find(job);
  if (it == owners_.end()) return std::nullopt;
  return it->second;
}

std::optional<std::string> access_view::token(std::int64_t job) const {
  std::lock_guard lock(mu_);
  auto it = tokens_.find(job);
  if (it == tokens_.end()) return std::nullopt;
  return it->second;
}

bool access_view::address_allowed(std::int64_t job, const std::string& address) const {
  auto it = job_addrs_.find(job);
  if (it == job_addrs_.end()) return false;
  if (it->second.count(address) != 0) return true;
  return it->second.count(k_any_agent) != 0 && agent_addrs_.count(address) != 0;
}

void access_view::check_job_peer(const peer_info& p) const {
  const std::int64_t job = p.job_id.value_or(0);
  std::lock_guard lock(mu_);
  auto it = owners_.find(job);
  if (it == owners_.end()) {
    throw protocol::protocol_error(protocol::error_code::not_found, "job " + std::to_string(job) + " is not running");
  }
  const bool address_ok = p.via == transport::tcp && address_allowed(job, p.address);
  if (auto why = job_peer_refusal(p, job, it->second, address_ok)) {
    throw protocol::protocol_error(protocol::error_code::permission_denied, *why);
  }
}

std::optional<std::string> access_view::tcp_key(protocol::peer_role role, std::optional<std::int64_t> job_id) const {
  if (role != protocol::peer_role::job) return cluster_key_;
  return token(job_id.value_or(0));
}

}  // namespace aqs::daemon
