// access_view: the part of the controller's state that session threads read
// without going through the strand (the cluster key, who owns a live job,
// its TCP token and the addresses it may connect from, the node spans for
// map display). The strand writes it; everything is copied in and out under
// one mutex (the cluster key is set once, at construction).
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/geometry.hpp"
#include "core/job.hpp"
#include "core/map_display.hpp"
#include "core/partition.hpp"
#include "daemon_base/dispatcher.hpp"

namespace aqs::daemon {

// Where processes started by an agent connect from: its TCP address, or
// loopback for an agent on aqsd's own machine (Unix socket).
void add_agent_address(const peer_info& agent, std::set<std::string>& addrs);

// Thread-safe.
class access_view {
public:
  // The wildcard in a job's addresses: any host with a connected agent (an
  // adaptive job may grow there).
  static constexpr const char* k_any_agent = "*";

  // `cluster_key`: what nodes and TCP clients prove (empty: TCP is refused).
  explicit access_view(std::string cluster_key = {}) : cluster_key_(std::move(cluster_key)) {}

  // The secret a TCP peer of `role` must prove: the cluster key, or for a
  // job's peer the job's own token (nullopt: none, the peer is refused).
  std::optional<std::string> tcp_key(protocol::peer_role role, std::optional<std::int64_t> job_id) const;

  void set_spans(std::vector<core::node_span> spans);
  std::vector<core::node_span> spans() const;

  // The nodes as submission checks see them (processors, memory, GPUs).
  void set_machine(core::cluster machine, std::vector<core::node_resources> resources);
  // Why a job could never run on the registered nodes, even all idle; nullopt
  // when it could, or while no node has registered (jobs wait for nodes then).
  std::optional<std::string> never_fits(const core::job_request& r) const;
  // The same within a partition's registered nodes, and over its MaxNodes:
  // nullopt too while none of its nodes has registered.
  std::optional<std::string> never_fits(const core::job_request& r, const core::partition& p) const;

  // Why pending jobs wait: a reason set for a job held outside the core
  // ("" clears it), and the job next in the core's queue; the others wait
  // for Priority.
  void set_reason(std::int64_t job, std::string reason);
  void set_queue_head(std::optional<std::int64_t> job);
  // With partitions: the next job of each partition (Resources), and jobs
  // no partition of theirs can start (PartitionDown, PartitionConfig).
  void set_partition_reasons(std::set<std::int64_t> heads, std::unordered_map<std::int64_t, std::string> reasons);
  struct reasons_t {
    std::unordered_map<std::int64_t, std::string> held;
    std::optional<std::int64_t> head;
    std::set<std::int64_t> heads;
    std::unordered_map<std::int64_t, std::string> partition;
    std::string of_pending(std::int64_t job) const;
  };
  reasons_t reasons() const;

  void set_owner(std::int64_t job, std::int32_t uid);
  void set_token(std::int64_t job, std::string token);
  void set_job_addresses(std::int64_t job, std::set<std::string> addrs);
  void set_agent_addresses(std::set<std::string> addrs);
  // The job's running instance is gone (requeued after a node failure): its
  // token and addresses die with it, so a leftover process cannot speak for
  // the job.
  void forget_instance(std::int64_t job);
  // The job ended: nothing of it is kept.
  void forget_job(std::int64_t job);

  std::optional<std::int32_t> owner(std::int64_t job) const;
  // The secret a TCP peer must prove to speak for the job; nullopt if none.
  std::optional<std::string> token(std::int64_t job) const;
  // Whether a role=job peer may speak for its job (on_open). Throws
  // protocol::protocol_error: not_found for a job that is not live,
  // permission_denied for another user's job or (TCP) a host the job does
  // not run on.
  void check_job_peer(const peer_info& p) const;

private:
  // never_fits() of a shaped job on these nodes (the lock held): an adaptive
  // job's bounds by core::adaptive_never_fits, a rigid one's by core::never_fits.
  std::optional<std::string> never_fits_shaped(const core::job_request& r, const std::vector<std::size_t>& nodes) const;
  bool address_allowed(std::int64_t job, const std::string& address) const;  // mu_ held

  const std::string cluster_key_;
  mutable std::mutex mu_;
  std::vector<core::node_span> spans_;
  core::cluster machine_;
  std::vector<core::node_resources> resources_;
  reasons_t reasons_;
  std::unordered_map<std::int64_t, std::int32_t> owners_;              // live job -> uid
  std::unordered_map<std::int64_t, std::string> tokens_;               // job -> shim secret
  std::unordered_map<std::int64_t, std::set<std::string>> job_addrs_;  // job -> IPs (k_any_agent: any agent's)
  std::set<std::string> agent_addrs_;                                  // IPs of connected agents
};

}  // namespace aqs::daemon
