// access_view: the guarded copies and the role=job admission check.
#include "daemon/access_view.hpp"

#include "daemon/permissions.hpp"
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
  if (r.shape.plain()) {
    if (r.min_pe > machine_.size()) {
      return "it needs " + std::to_string(r.min_pe) + " processors; the cluster has " + std::to_string(machine_.size());
    }
    return std::nullopt;
  }
  return core::never_fits(machine_, resources_, all, r.shape, r.min_pe);
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

access_view::reasons_t access_view::reasons() const {
  std::lock_guard lk(mu_);
  return reasons_;
}

std::string access_view::reasons_t::of_pending(std::int64_t job) const {
  const auto it = held.find(job);
  if (it != held.end()) return it->second;
  return head == job ? "Resources" : "Priority";
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

}  // namespace aqs::daemon
