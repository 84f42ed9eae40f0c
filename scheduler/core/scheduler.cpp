// scheduler: applies events to the state and turns a strategy's plan into placed decisions.
#include "core/scheduler.hpp"

#include "core/adaptive_placement.hpp"
#include "core/placement.hpp"

#include <algorithm>
#include <functional>
#include <stdexcept>
#include <string>

namespace aqs::core {

std::string_view to_string(decision::kind k) noexcept {
  switch (k) {
    case decision::kind::start: return "start";
    case decision::kind::resize: return "resize";
    case decision::kind::requeue: return "requeue";
    case decision::kind::fail: return "fail";
    case decision::kind::resume: return "resume";
  }
  return "?";
}

namespace {

queue_key key_of(const job_request& r) { return {-r.priority, r.submit_time, r.id}; }

[[noreturn]] void misuse(const std::string& what) { throw std::invalid_argument(what); }

std::string job_name(job_id id) { return "job " + std::to_string(id); }

// Every adaptive job is placed by scheduler::place_adaptive, in whole ranks
// within its node limit and, with a shape, within its bounds per node
// (adaptive_placement.hpp); a rigid job with a shape by place_shaped.
bool placed_by_count(const job_request& r) { return r.adaptive; }

}  // namespace

scheduler::scheduler(cluster c, std::unique_ptr<strategy> policy)
    : cluster_(std::move(c)), policy_(std::move(policy)) {
  if (!policy_) misuse("scheduler: no strategy");
  held_ = processor_set(cluster_.size());
  reserved_ = processor_set(cluster_.size());
  res_.resize(cluster_.nodes().size());
  refresh_usable();
}

const job* scheduler::find(job_id id) const {
  auto it = jobs_.find(id);
  return it == jobs_.end() ? nullptr : &it->second;
}

const job& scheduler::get(job_id id) const {
  const job* j = find(id);
  if (j == nullptr) misuse(job_name(id) + " is not known");
  return *j;
}

job& scheduler::get_mut(job_id id) { return const_cast<job&>(get(id)); }

bool scheduler::resizable(const job& j) noexcept {
  return j.req.adaptive && !j.frozen &&
         (j.state == job_state::running || j.state == job_state::resizing);
}

std::size_t scheduler::planning_size(const job& j) noexcept {
  return j.state == job_state::resizing ? j.ntarget : j.nprocs;
}

std::size_t scheduler::pinned_count(const job& j) const noexcept {
  const counts_t& c = counts();
  if (c.held == c.held_usable) return 0;
  const processor_set& map = j.state == job_state::resizing ? j.target : j.procs;
  return planning_size(j) - map.count_common(scoped_ ? scope_usable_ : usable_);
}

std::size_t scheduler::node_limit(const job& j) const noexcept {
  std::size_t limit = j.req.shape.max_nodes;
  if (scope_ && parts_[*scope_].max_nodes > 0 && (limit == 0 || parts_[*scope_].max_nodes < limit)) {
    limit = parts_[*scope_].max_nodes;
  }
  return limit;
}

std::size_t scheduler::max_size(const job& j) const {
  const std::size_t limit = node_limit(j);
  const std::size_t per_rank = rank_size(j.req);
  if (!j.req.adaptive) return j.req.max_pe;
  // The partition's MaxCPUsPerJob, in whole ranks: a -c job never holds
  // part of a rank. (The minimum is refused at submission when over it; a
  // reload that lowers the limit leaves running jobs at least their minimum.)
  std::size_t most = j.req.max_pe;
  if (scope_ && parts_[*scope_].max_cpus_per_job > 0) {
    most = std::min(most, parts_[*scope_].max_cpus_per_job / per_rank * per_rank);
  }
  const job_shape& shape = j.req.shape;
  const bool bound = node_bound(shape);
  if (limit == 0 && per_rank == 1 && !bound) return most;
  // Only for jobs with a limit, ranks of several processors or bounds per
  // node (rare): the node sizes, in whole ranks, are sorted once per such
  // bounds and machine (cached until the usable processors, the scope or a
  // node's resources change: the strategy asks for every adaptive job). A
  // node that could never hold its memory or GPUs counts for nothing, one
  // with a ranks-per-node bound for no more than that many ranks.
  const size_key key{limit, per_rank, bound ? shape.tasks_per_node : 0, bound ? shape.mem_per_node_mb : 0,
                     bound ? shape.mem_per_cpu_mb : 0, bound ? shape.gpus_per_node : 0};
  if (const auto it = max_sizes_.find(key); it != max_sizes_.end()) return std::min(most, it->second);
  const processor_set& usable = scoped_ ? scope_usable_ : usable_;
  std::vector<std::size_t> sizes;
  for (std::size_t i = 0; i < cluster_.nodes().size(); ++i) {
    const node& nd = cluster_.at(i);
    std::size_t n = usable.count_range(nd.first_proc, nd.first_proc + nd.procs);
    if (bound) {
      if (res_[i].memory_mb < shape.mem_per_node_mb || res_[i].gpus < shape.gpus_per_node) n = 0;
      if (shape.mem_per_cpu_mb != 0) n = std::min<std::size_t>(n, res_[i].memory_mb / shape.mem_per_cpu_mb);
      if (shape.tasks_per_node != 0) n = std::min(n, shape.tasks_per_node * per_rank);
    }
    n = n / per_rank * per_rank;
    if (n > 0) sizes.push_back(n);
  }
  const std::size_t k = limit == 0 ? sizes.size() : std::min(limit, sizes.size());
  std::partial_sort(sizes.begin(), sizes.begin() + static_cast<std::ptrdiff_t>(k), sizes.end(), std::greater<>());
  std::size_t total = 0;
  for (std::size_t i = 0; i < k; ++i) total += sizes[i];
  max_sizes_.emplace(key, total);
  return std::min(most, total);
}

void scheduler::set_priority(job_id id, int priority) {
  if (scoped_) misuse("set_priority during decide()");
  job& j = get_mut(id);
  if (j.req.priority == priority) return;
  // In the queue: pending and not held, or suspended and asking to resume.
  // The node is moved, not freed and made again (100,000 re-keyed jobs per
  // recomputation: bench_priority).
  const queue_key old_key = key_of(j.req);
  auto node = queue_.extract(old_key);
  j.req.priority = priority;
  if (!node.empty()) {
    node.value() = key_of(j.req);
    queue_.insert(std::move(node));
    if (j.req.reservation.empty()) {
      for (const std::size_t i : j.partitions) {
        auto pn = part_queue_[i].extract(old_key);
        if (pn.empty()) continue;
        pn.value() = key_of(j.req);
        part_queue_[i].insert(std::move(pn));
      }
    }
  }
}

std::size_t scheduler::add_node(std::string name, std::size_t procs) {
  std::size_t index = cluster_.add_node(std::move(name), procs);
  res_.resize(cluster_.nodes().size());
  held_.resize(cluster_.size());
  reserved_.resize(cluster_.size());
  for (auto& [id, j] : jobs_) {
    j.procs.resize(cluster_.size());
    j.target.resize(cluster_.size());
  }
  for (advance_reservation& r : resvs_) r.procs.resize(cluster_.size());
  refresh_partition_procs();
  refresh_usable();
  return index;
}

void scheduler::set_partitions(std::vector<partition> parts) {
  if (scoped_) misuse("set_partitions during decide()");
  std::vector<std::shared_ptr<const strategy>> policies(parts.size());
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (!parts[i].policy.empty() && parts[i].policy != policy_->name()) policies[i] = make_strategy(parts[i].policy);
  }
  part_policies_ = std::move(policies);
  parts_ = std::move(parts);
  refresh_partition_procs();
  for (auto& [id, j] : jobs_) assign_partitions(j);
  refresh_part_queues();
  for (auto& [id, j] : jobs_) {
    if (j.state == job_state::pending) continue;
    // A running job stays where its processors are.
    j.partition = static_cast<std::size_t>(-1);
    for (std::size_t i : j.partitions) {
      if ((j.procs | j.target).is_subset_of(part_procs_[i])) {
        j.partition = i;
        break;
      }
    }
  }
}

void scheduler::enqueue(const job& j) {
  const queue_key k = key_of(j.req);
  queue_.insert(k);
  if (j.req.reservation.empty()) {
    for (const std::size_t i : j.partitions) part_queue_[i].insert(k);
  }
}

void scheduler::dequeue(const job& j) {
  const queue_key k = key_of(j.req);
  if (queue_.erase(k) == 0) return;
  if (j.req.reservation.empty()) {
    for (const std::size_t i : j.partitions) part_queue_[i].erase(k);
  }
}

void scheduler::refresh_part_queues() {
  part_queue_.assign(parts_.size(), {});
  for (const queue_key& k : queue_) {
    const job& j = jobs_.at(k.id);
    if (!j.req.reservation.empty()) continue;
    for (const std::size_t i : j.partitions) part_queue_[i].insert(k);
  }
}

void scheduler::refresh_partition_procs() {
  part_procs_.assign(parts_.size(), processor_set(cluster_.size()));
  for (std::size_t n = 0; n < cluster_.nodes().size(); ++n) {
    const node& nd = cluster_.at(n);
    for (std::size_t i = 0; i < parts_.size(); ++i) {
      if (parts_[i].has_node(nd.name)) part_procs_[i] |= processor_set::range(cluster_.size(), nd.first_proc, nd.first_proc + nd.procs);
    }
  }
}

void scheduler::assign_partitions(job& j) const {
  j.partitions.clear();
  if (parts_.empty()) return;
  std::string_view rest = j.req.partition;
  if (rest.empty()) {
    for (std::size_t i = 0; i < parts_.size(); ++i) {
      if (parts_[i].is_default) j.partitions.push_back(i);
    }
    if (j.partitions.empty()) j.partitions.push_back(0);
    return;
  }
  while (true) {
    const std::size_t comma = rest.find(',');
    const std::string_view name = rest.substr(0, comma);
    for (std::size_t i = 0; i < parts_.size(); ++i) {
      if (parts_[i].name == name && std::find(j.partitions.begin(), j.partitions.end(), i) == j.partitions.end()) {
        j.partitions.push_back(i);
      }
    }
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
}

void scheduler::set_reservations(std::vector<advance_reservation> rs) {
  if (scoped_) misuse("set_reservations during decide()");
  for (std::size_t i = 0; i < rs.size(); ++i) {
    advance_reservation& r = rs[i];
    if (r.name.empty()) misuse("a reservation needs a name");
    if (!(r.end > r.start)) misuse("reservation " + r.name + " ends before it starts");
    r.procs.resize(cluster_.size());
    if (!r.procs.any()) misuse("reservation " + r.name + " has no processors");
    for (std::size_t k = 0; k < i; ++k) {
      if (rs[k].name == r.name) misuse("reservation " + r.name + " is given twice");
    }
  }
  resvs_ = std::move(rs);
}

processor_set scheduler::live_reserved(double now) const {
  processor_set out(cluster_.size());
  for (const advance_reservation& r : resvs_) {
    if (r.end > now) out |= r.procs;
  }
  return out;
}

bool scheduler::in_scope_queue(const job& j, std::optional<std::size_t> resv, scope_kind kind, double now) const {
  switch (kind) {
    case scope_kind::general: return j.req.reservation.empty();
    case scope_kind::inside: return j.req.reservation == resvs_[*resv].name;
    case scope_kind::before:
      // Only what surely ends by the start: a time limit, and no resume
      // (a suspended job's time already ran).
      return j.req.reservation.empty() && j.state == job_state::pending && j.req.walltime > 0 &&
             now + j.req.walltime <= resvs_[*resv].start;
  }
  return false;
}

void scheduler::enter_scope(std::optional<std::size_t> part, std::optional<std::size_t> resv, scope_kind kind,
                            double now) {
  scope_ = part;
  scoped_ = true;
  max_sizes_.clear();
  scope_usable_ = part ? usable_ & part_procs_[*part] : usable_;
  if (kind == scope_kind::general) {
    scope_usable_ -= live_reserved(now);
  } else if (kind == scope_kind::inside) {
    scope_usable_ &= resvs_[*resv].procs;
  } else {
    // A future reservation's processors, less those an active one or one
    // that starts earlier has: jobs backfilled there end by its start.
    const advance_reservation& r = resvs_[*resv];
    scope_usable_ &= r.procs;
    for (std::size_t k = 0; k < resvs_.size(); ++k) {
      const advance_reservation& o = resvs_[k];
      if (k != *resv && o.end > now && o.start <= r.start) scope_usable_ -= o.procs;
    }
  }
  scope_queue_.clear();
  scope_part_queue_.reset();
  if (part && kind == scope_kind::general) {
    // A partition's jobs without a reservation: kept as the queue changes
    // (building it here walked the whole queue at every decision).
    scope_part_queue_ = *part;
  } else {
    for (const queue_key& k : queue_) {
      const job& j = jobs_.at(k.id);
      if (part && std::find(j.partitions.begin(), j.partitions.end(), *part) == j.partitions.end()) continue;
      if (in_scope_queue(j, resv, kind, now)) scope_queue_.insert(k);
    }
  }
  scope_adaptive_.clear();
  if (kind != scope_kind::before) {
    for (job_id id : adaptive_) {
      const job& j = jobs_.at(id);
      if (part && j.partition != *part) continue;
      if (kind == scope_kind::inside) {
        if (j.req.reservation != resvs_[*resv].name) continue;
      } else if (!j.req.reservation.empty()) {
        // A job of an active reservation resizes in it; one whose
        // reservation ended (or was deleted) with everyone else.
        bool in_active = false;
        for (const advance_reservation& r : resvs_) in_active = in_active || (r.name == j.req.reservation && r.active(now));
        if (in_active) continue;
      }
      scope_adaptive_.insert(id);
    }
  }
  refresh_counts();
}

void scheduler::leave_scope() {
  scope_.reset();
  scoped_ = false;
  max_sizes_.clear();
  scope_usable_ = processor_set();
  scope_queue_.clear();
  scope_part_queue_.reset();
  scope_adaptive_.clear();
  refresh_counts();
}

void scheduler::evict_from_reservations(double now, std::vector<decision>& out) {
  const std::vector<job_id> adaptive(adaptive_.begin(), adaptive_.end());
  for (job_id id : adaptive) {
    job& j = jobs_.at(id);
    // A job in the middle of a resize is looked at again once it answers;
    // one that missed its last deadline is not asked again until it may be.
    if (j.state != job_state::running || j.frozen) continue;
    processor_set barred(cluster_.size());
    for (const advance_reservation& r : resvs_) {
      if (r.start - resv_lead_ <= now && now < r.end && r.name != j.req.reservation) barred |= r.procs;
    }
    if (!j.procs.intersects(barred)) continue;
    const processor_set keep = j.procs - barred;
    // Free processors no live reservation has, in the job's partition.
    processor_set room = usable_ - held_ - live_reserved(now);
    if (j.partition < part_procs_.size()) room &= part_procs_[j.partition];
    if (const auto allowed = allowed_procs(j.req)) room &= *allowed;
    const std::size_t kept = keep.count();
    const std::size_t want = j.size() - kept;
    processor_set to = want > 0 && room.any() ? place_adaptive(j, keep, room, std::min(want, room.count())) : keep;
    const std::size_t n = to.count();
    // Never below its minimum, nor outside its bounds per node (a part of a
    // whole node, fewer nodes than its -N): then it keeps them, like a rigid
    // job, until processors elsewhere let it move.
    if (n < j.req.min_pe || n == 0) continue;
    if (node_bound(j.req.shape) && !keeps_bounds(j, to)) continue;
    reserved_ |= j.procs - to;
    held_ |= to - j.procs;
    j.last_resize_time = now;
    const std::size_t moved = (j.procs - to).count();
    begin_resize(j, to, n, out);
    out.back().ranks_moved = moved;
    refresh_counts();
  }
}

void scheduler::set_node_resources(std::size_t index, std::uint64_t memory_mb, std::size_t gpus) {
  if (index >= res_.size()) misuse("node " + std::to_string(index) + " is not registered");
  res_[index].memory_mb = memory_mb;
  max_sizes_.clear();
  res_[index].gpus = gpus;
}

std::optional<processor_set> scheduler::allowed_procs(const job_request& r) const {
  if (r.nodelist.empty() && r.exclude.empty()) return std::nullopt;
  processor_set out(cluster_.size());
  for (std::size_t i = 0; i < cluster_.nodes().size(); ++i) {
    const node& n = cluster_.at(i);
    const bool listed = r.nodelist.empty() || std::find(r.nodelist.begin(), r.nodelist.end(), n.name) != r.nodelist.end();
    const bool excluded = std::find(r.exclude.begin(), r.exclude.end(), n.name) != r.exclude.end();
    if (listed && !excluded) out.set_range(n.first_proc, n.first_proc + n.procs);
  }
  return out;
}

std::optional<std::string> scheduler::never_fits(const job_request& r, const std::vector<std::size_t>& nodes) const {
  std::vector<std::size_t> all = nodes;
  if (all.empty()) {
    all.resize(cluster_.nodes().size());
    for (std::size_t i = 0; i < all.size(); ++i) all[i] = i;
  }
  if (!r.nodelist.empty() || !r.exclude.empty()) {
    // Only the nodes it names (or does not exclude).
    const processor_set allowed = *allowed_procs(r);
    std::erase_if(all, [&](std::size_t i) {
      return i >= cluster_.nodes().size() || !allowed.test(cluster_.at(i).first_proc) || cluster_.at(i).procs == 0;
    });
    if (all.empty()) return std::string("none of the nodes it may use (--nodelist, --exclude) is in the cluster");
  }
  if (r.adaptive && node_bound(r.shape)) return adaptive_never_fits(cluster_, res_, all, r.shape, r.min_pe, r.max_pe);
  if (r.shape.plain()) {
    std::size_t total = 0;
    for (const std::size_t i : all) total += i < cluster_.nodes().size() ? cluster_.at(i).procs : 0;
    if (r.min_pe > total) {
      return "it needs " + std::to_string(r.min_pe) + " processors; there are " + std::to_string(total);
    }
    return std::nullopt;
  }
  return core::never_fits(cluster_, res_, all, r.shape, r.min_pe);
}

bool scheduler::keeps_bounds(const job& j, const processor_set& map) const {
  const job_shape& s = j.req.shape;
  const std::size_t per_rank = rank_size(j.req);
  std::size_t nodes = 0;
  for (std::size_t i = 0; i < cluster_.nodes().size(); ++i) {
    const node& nd = cluster_.at(i);
    const std::size_t here = map.count_range(nd.first_proc, nd.first_proc + nd.procs);
    if (here == 0) continue;
    ++nodes;
    if (here % per_rank != 0) return false;
    if (s.exclusive && here != nd.procs) return false;
    if (s.tasks_per_node != 0 && here > s.tasks_per_node * per_rank) return false;
  }
  return nodes >= s.min_nodes && (s.max_nodes == 0 || nodes <= s.max_nodes);
}

void scheduler::follow_map(job& j, const processor_set& map) {
  if (!j.req.adaptive || !takes_node_resources(j.req.shape)) return;
  give_back_resources(j);
  j.placed = adaptive_allocation(cluster_, j.req.shape, rank_size(j.req), map);
  take_resources(j);
}

void scheduler::take_resources(job& j) {
  for (const auto& on : j.placed) {
    node_resources& r = res_.at(on.node);
    r.memory_used_mb += on.memory_mb;
    r.gpus_used += on.gpus;
    ++r.jobs;
    if (j.req.shape.exclusive) r.exclusive_owner = true;
  }
}

void scheduler::give_back_resources(job& j) {
  for (const auto& on : j.placed) {
    node_resources& r = res_.at(on.node);
    r.memory_used_mb -= std::min(r.memory_used_mb, on.memory_mb);
    r.gpus_used -= std::min(r.gpus_used, on.gpus);
    if (r.jobs > 0) --r.jobs;
    if (j.req.shape.exclusive) r.exclusive_owner = false;
  }
  j.placed.clear();
}

void scheduler::refresh_usable() {
  usable_ = cluster_.procs_in(node_state::up);
  max_sizes_.clear();
  refresh_counts();
}

const scheduler::counts_t& scheduler::counts() const noexcept {
  if (counts_dirty_) {
    // Within a partition's strategy run, "usable" is its UP processors.
    const processor_set& usable = scoped_ ? scope_usable_ : usable_;
    counts_.usable = usable.count();
    counts_.held = held_.count();
    counts_.reserved = reserved_.count();
    counts_.reserved_usable = usable.count_common(reserved_);
    // Held processors may sit on drained nodes, so free is not usable - held.
    counts_.held_usable = usable.count_common(held_);
    counts_.free = counts_.usable - counts_.held_usable;
    counts_dirty_ = false;
  }
  return counts_;
}

void scheduler::forget(job_id id) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return;
  if (!it->second.req.reservation.empty()) --named_jobs_;
  jobs_.erase(it);
}

void scheduler::new_epoch() {
  for (job_id id : adaptive_) jobs_.at(id).frozen = false;
}

void scheduler::release(job& j) {
  give_back_resources(j);
  processor_set all = j.procs | j.target;
  held_ -= all;
  reserved_ -= all;
  j.procs = processor_set(cluster_.size());
  j.target = processor_set(cluster_.size());
  j.nprocs = j.ntarget = 0;
  by_end_.erase({j.estimated_end, j.req.id});
  adaptive_.erase(j.req.id);
}

void scheduler::apply(const event& e) {
  using k = event::kind;
  switch (e.what) {
    case k::arrival: {
      const job_request& r = e.request;
      if (jobs_.count(r.id) != 0) misuse(job_name(r.id) + " already exists");
      if (r.min_pe == 0 || r.max_pe < r.min_pe) misuse(job_name(r.id) + ": need 1 <= min_pe <= max_pe");
      if (!r.adaptive && r.min_pe != r.max_pe) misuse(job_name(r.id) + ": a rigid job has min_pe == max_pe");
      if (r.adaptive && r.pref_pe != 0 && (r.pref_pe < r.min_pe || r.pref_pe > r.max_pe)) {
        misuse(job_name(r.id) + ": its preferred size must be within min_pe..max_pe");
      }
      if (const std::size_t g = rank_size(r); r.min_pe % g != 0 || r.max_pe % g != 0) {
        misuse(job_name(r.id) + ": min_pe and max_pe must be whole ranks of " + std::to_string(g) + " processors");
      }
      if (r.adaptive && r.shape.min_nodes > 1 && r.min_pe < r.shape.min_nodes * rank_size(r)) {
        misuse(job_name(r.id) + ": its minimum must be at least one rank on each of its " +
               std::to_string(r.shape.min_nodes) + " nodes");
      }
      job j;
      j.req = r;
      j.procs = processor_set(cluster_.size());
      j.target = processor_set(cluster_.size());
      assign_partitions(j);
      if (!r.reservation.empty()) ++named_jobs_;
      jobs_.emplace(r.id, std::move(j));
      enqueue(jobs_.at(r.id));
      new_epoch();
      break;
    }
    case k::completion: {
      job& j = get_mut(e.job);
      if (!is_final(e.final_state)) misuse("completion of " + job_name(e.job) + " needs a final state");
      if (!is_legal_transition(j.state, e.final_state)) {
        misuse(job_name(e.job) + ": " + std::string(to_string(j.state)) + " -> " +
               std::string(to_string(e.final_state)) + " is not a legal transition");
      }
      if (j.state == job_state::pending) {
        dequeue(j);
      } else if (j.state == job_state::suspended) {
        if (j.resume_wanted) dequeue(j);
        suspended_.erase(e.job);
      } else {
        release(j);
      }
      forget(e.job);
      refresh_counts();
      new_epoch();
      break;
    }
    case k::change_request: {
      job& j = get_mut(e.job);
      if (e.min_pe == 0 || e.max_pe < e.min_pe) misuse(job_name(e.job) + ": need 1 <= min_pe <= max_pe");
      if (!j.req.adaptive && (e.min_pe != e.max_pe || j.state != job_state::pending)) {
        misuse(job_name(e.job) + " is rigid: only a pending rigid job may change its size");
      }
      if (is_final(j.state)) misuse(job_name(e.job) + " has finished");
      // A job of ranks of several processors (the runtime asks in
      // processors) gets whole ranks: never fewer than it asked at least.
      const std::size_t g = rank_size(j.req);
      const std::size_t min = (e.min_pe + g - 1) / g * g, max = e.max_pe / g * g;
      if (max < min) {
        misuse(job_name(e.job) + ": no whole number of ranks of " + std::to_string(g) + " processors is in " +
               std::to_string(e.min_pe) + ".." + std::to_string(e.max_pe));
      }
      j.req.min_pe = min;
      j.req.max_pe = max;
      // A rigid job sized in tasks (-n N) keeps them in step with its size:
      // its tasks are laid out by that count when it starts.
      if (!j.req.adaptive && j.req.shape.ntasks != 0) {
        j.req.shape.ntasks = min / std::max<std::size_t>(j.req.shape.cpus_per_task, 1);
      }
      j.frozen = false;
      break;
    }
    case k::suspend: {
      job& j = get_mut(e.job);
      if (j.state == job_state::resizing) misuse(job_name(e.job) + " is being resized; suspend it once it has applied its map");
      if (j.state != job_state::running) misuse(job_name(e.job) + " is not running");
      processor_set home = j.procs;
      release(j);
      j.home = std::move(home);
      j.state = job_state::suspended;
      j.resume_wanted = false;
      j.partition = static_cast<std::size_t>(-1);  // it runs nowhere until it resumes
      suspended_.insert(e.job);
      refresh_counts();
      break;
    }
    case k::resume: {
      job& j = get_mut(e.job);
      if (j.state != job_state::suspended) misuse(job_name(e.job) + " is not suspended");
      if (j.resume_wanted) misuse(job_name(e.job) + " is already waiting to resume");
      j.resume_wanted = true;
      enqueue(j);
      break;
    }
    case k::hold: {
      job& j = get_mut(e.job);
      if (j.state != job_state::pending) misuse(job_name(e.job) + " is not pending");
      if (j.held) misuse(job_name(e.job) + " is already held");
      j.held = true;
      dequeue(j);
      break;
    }
    case k::release: {
      job& j = get_mut(e.job);
      if (!j.held) misuse(job_name(e.job) + " is not held");
      j.held = false;
      enqueue(j);
      new_epoch();
      break;
    }
    case k::requeue: {
      job& j = get_mut(e.job);
      if (!is_legal_transition(j.state, job_state::pending) || j.state == job_state::node_fail) {
        misuse(job_name(e.job) + " is not running or suspended");
      }
      if (j.state == job_state::suspended) {
        suspended_.erase(e.job);
        if (j.resume_wanted) dequeue(j);
      } else {
        release(j);
      }
      j.home = processor_set(cluster_.size());
      j.resume_wanted = false;
      j.frozen = false;
      j.state = job_state::pending;
      j.partition = static_cast<std::size_t>(-1);
      enqueue(j);
      refresh_counts();
      new_epoch();
      break;
    }
    case k::resize_ack:
    case k::resize_timeout: {
      job& j = get_mut(e.job);
      if (j.state != job_state::resizing) misuse(job_name(e.job) + " has no resize in progress");
      processor_set vacated = j.procs - j.target;
      processor_set gained = j.target - j.procs;
      reserved_ -= vacated;
      if (e.what == k::resize_ack) {
        held_ -= vacated;
        j.procs = j.target;
        j.nprocs = j.ntarget;
      } else {
        held_ -= gained;
        j.frozen = true;
        ++j.resize_timeouts;
      }
      follow_map(j, j.procs);
      j.target = processor_set(cluster_.size());
      j.ntarget = 0;
      j.state = job_state::running;
      refresh_counts();
      break;
    }
    case k::node_down:
    case k::node_up:
    case k::node_drain: {
      if (e.node >= cluster_.nodes().size()) misuse("node " + std::to_string(e.node) + " is not registered");
      node_state s = e.what == k::node_down ? node_state::down
                     : e.what == k::node_up ? node_state::up
                                            : node_state::drained;
      cluster_.set_state(e.node, s);
      if (s == node_state::down) {
        // MPI jobs do not survive losing ranks, adaptive or not: every job
        // with a processor (held or promised) on the node is killed.
        processor_set lost = cluster_.procs_of(e.node);
        std::vector<job_id> victims;
        for (const auto& [end, id] : by_end_) {
          const job& j = jobs_.at(id);
          if (j.procs.intersects(lost) || j.target.intersects(lost)) victims.push_back(id);
        }
        std::sort(victims.begin(), victims.end());
        for (job_id id : victims) {
          job& j = jobs_.at(id);
          decision d;
          d.job = id;
          d.from = j.procs;
          d.to = processor_set(cluster_.size());
          d.ranks_moved = 0;
          release(j);
          j.state = job_state::node_fail;
          if (j.req.requeue_on_node_fail) {
            d.what = decision::kind::requeue;
            j.state = job_state::pending;  // NODE_FAIL -> PENDING, the requeue transition
            j.frozen = false;
            j.partition = static_cast<std::size_t>(-1);
            enqueue(j);
          } else {
            d.what = decision::kind::fail;
            forget(id);
          }
          pending_.push_back(std::move(d));
        }
        // A suspended job's processes live on its old processors: losing
        // one of them ends it too.
        std::vector<job_id> stopped;
        for (job_id id : suspended_) {
          if (jobs_.at(id).home.intersects(lost)) stopped.push_back(id);
        }
        for (job_id id : stopped) {
          job& j = jobs_.at(id);
          suspended_.erase(id);
          if (j.resume_wanted) dequeue(j);
          decision d;
          d.job = id;
          d.from = j.home;
          d.to = processor_set(cluster_.size());
          j.home = processor_set(cluster_.size());
          j.resume_wanted = false;
          if (j.req.requeue_on_node_fail) {
            d.what = decision::kind::requeue;
            j.state = job_state::pending;
            enqueue(j);
          } else {
            d.what = decision::kind::fail;
            forget(id);
          }
          pending_.push_back(std::move(d));
        }
      }
      refresh_usable();
      break;
    }
  }
}

void scheduler::restore(const job_request& r, job_state state, const processor_set& procs, double start_time) {
  if (jobs_.count(r.id) != 0) misuse(job_name(r.id) + " already exists");
  if (state != job_state::running && state != job_state::suspended) {
    misuse(job_name(r.id) + ": only RUNNING or SUSPENDED jobs are restored with processors");
  }
  if (r.min_pe == 0 || r.max_pe < r.min_pe) misuse(job_name(r.id) + ": need 1 <= min_pe <= max_pe");
  if (procs.size() != cluster_.size()) misuse(job_name(r.id) + ": its map does not match the cluster's size");
  const std::size_t n = procs.count();
  if (n == 0) misuse(job_name(r.id) + " holds no processors");
  if (procs.intersects(held_)) misuse(job_name(r.id) + " holds processors another job holds");
  job j;
  j.req = r;
  j.state = state;
  if (state == job_state::suspended) {
    // Its processes are stopped; it holds nothing until it resumes.
    j.procs = processor_set(cluster_.size());
    j.target = processor_set(cluster_.size());
    j.home = procs;
    j.start_time = start_time;
    j.estimated_end = start_time + r.walltime;
    assign_partitions(j);
    if (!r.reservation.empty()) ++named_jobs_;
    jobs_.emplace(r.id, std::move(j));
    suspended_.insert(r.id);
    return;
  }
  j.procs = procs;
  j.nprocs = n;
  j.target = processor_set(cluster_.size());
  j.start_time = start_time;
  j.estimated_end = start_time + r.walltime;
  held_ |= procs;
  by_end_.insert({j.estimated_end, r.id});
  if (r.adaptive) adaptive_.insert(r.id);
  assign_partitions(j);
  for (std::size_t i : j.partitions) {
    if (procs.is_subset_of(part_procs_[i])) {
      j.partition = i;
      break;
    }
  }
  if (!r.shape.plain() && !placed_by_count(r)) restore_placement(j);
  follow_map(j, procs);
  if (!r.reservation.empty()) ++named_jobs_;
  jobs_.emplace(r.id, std::move(j));
  refresh_counts();
}

void scheduler::restore_resize(job_id id, const processor_set& target) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) misuse(job_name(id) + " does not exist");
  job& j = it->second;
  if (j.state != job_state::running || !j.req.adaptive) misuse(job_name(id) + " is not a running adaptive job");
  if (target.size() != cluster_.size()) misuse(job_name(id) + ": its map does not match the cluster's size");
  const std::size_t n = target.count();
  if (n == 0) misuse(job_name(id) + ": an empty map");
  const processor_set gained = target - j.procs;
  if (gained.intersects(held_)) misuse(job_name(id) + "'s new map holds processors another job holds");
  // As begin_resize left it: the gained processors held, the vacated ones
  // reserved until the acknowledgement.
  held_ |= gained;
  reserved_ |= j.procs - target;
  j.target = target;
  j.ntarget = n;
  j.state = job_state::resizing;
  follow_map(j, j.procs | target);
  refresh_counts();
}

void scheduler::restore_placement(job& j) {
  // What its start took, from the map it holds: tasks, memory and GPUs on
  // each of its nodes.
  const job_request& r = j.req;
  const std::size_t n = j.nprocs;
  std::vector<std::size_t> nodes, counts;
  for (std::size_t i = 0; i < cluster_.nodes().size(); ++i) {
    const node& nd = cluster_.at(i);
    const std::size_t here = j.procs.count_range(nd.first_proc, nd.first_proc + nd.procs);
    if (here == 0) continue;
    nodes.push_back(i);
    counts.push_back(here);
  }
  const auto tasks = task_layout(counts, r.shape.cpus_per_task,
                                 r.shape.ntasks != 0 ? r.shape.ntasks : n / std::max<std::size_t>(r.shape.cpus_per_task, 1),
                                 r.shape.tasks_per_node);
  j.placed.clear();
  for (std::size_t k = 0; k < nodes.size(); ++k) {
    j.placed.push_back({nodes[k], tasks[k], r.shape.memory_on_node(counts[k]), r.shape.gpus_per_node});
  }
  take_resources(j);
}

void scheduler::start_job(job& j, const processor_set& procs, double now, std::vector<decision>& out) {
  dequeue(j);
  j.procs = procs;
  j.nprocs = procs.count();
  j.state = job_state::running;
  j.start_time = now;
  j.estimated_end = now + j.req.walltime;
  j.last_resize_time = now;
  if (scope_) j.partition = *scope_;
  held_ |= procs;
  by_end_.insert({j.estimated_end, j.req.id});
  if (j.req.adaptive) adaptive_.insert(j.req.id);
  follow_map(j, procs);
  decision d;
  d.what = decision::kind::start;
  d.job = j.req.id;
  d.from = processor_set(cluster_.size());
  d.to = procs;
  out.push_back(std::move(d));
}

void scheduler::resume_job(job& j, const processor_set& procs, std::size_t n, double now,
                           std::vector<decision>& out) {
  dequeue(j);
  suspended_.erase(j.req.id);
  decision d;
  d.what = decision::kind::resume;
  d.job = j.req.id;
  d.from = j.home;
  d.to = procs;
  j.resume_wanted = false;
  j.home = processor_set(cluster_.size());
  j.last_resize_time = now;
  j.procs = procs;
  j.nprocs = n;
  held_ |= procs;
  j.partition = static_cast<std::size_t>(-1);
  for (std::size_t i : j.partitions) {
    if (procs.is_subset_of(part_procs_[i])) {
      j.partition = i;
      break;
    }
  }
  // Time limits do not run while suspended; EASY's estimate starts again.
  j.estimated_end = now + j.req.walltime;
  by_end_.insert({j.estimated_end, j.req.id});
  if (j.req.adaptive) {
    adaptive_.insert(j.req.id);
    // Its ranks still sit where they were stopped: it applies `procs` as a
    // new map, RESIZING until it acknowledges (nothing to reserve: the map
    // it holds is already the new one).
    j.target = procs;
    j.ntarget = n;
    j.state = job_state::resizing;
    ++j.resizes;
    follow_map(j, procs);
  } else {
    j.state = job_state::running;
    if (!j.req.shape.plain()) {
      // Its memory and GPUs, as at its start.
      restore_placement(j);
    }
  }
  out.push_back(std::move(d));
}

void scheduler::check_plan(const plan& p) const {
  // Each job at most once in the whole plan: a second entry would be judged
  // against a state the first one changed, so a plan could not be checked as
  // a whole before it is applied.
  std::vector<job_id> named;
  named.reserve(p.starts.size() + p.targets.size());
  for (const plan::sized& s : p.starts) {
    const job& j = get(s.job);
    const bool resuming = j.state == job_state::suspended && j.resume_wanted;
    if (j.state != job_state::pending && !resuming) misuse("strategy started " + job_name(s.job) + ", which is not queued");
    if (j.held) misuse("strategy started " + job_name(s.job) + ", which is held");
    if (scoped_ && queue().count(key_of(j.req)) == 0) {
      misuse("strategy started " + job_name(s.job) + (scope_ ? " in partition " + parts_[*scope_].name : std::string(" here")) +
             ", not one of its");
    }
    if (s.procs < j.req.min_pe || s.procs > j.req.max_pe) misuse("strategy sized " + job_name(s.job) + " outside its min..max");
    named.push_back(s.job);
  }
  for (const plan::sized& t : p.targets) {
    const job& j = get(t.job);
    // Targets of jobs that cannot be resized now (or not from this
    // partition) are skipped, not refused.
    if (j.state == job_state::running && resizable(j) && (!scoped_ || scope_adaptive_.count(j.req.id) != 0)) {
      if (t.procs < j.size() && t.procs < j.req.min_pe) misuse("strategy shrank " + job_name(t.job) + " below its minimum");
      if (t.procs > j.size() && t.procs > j.req.max_pe) misuse("strategy grew " + job_name(t.job) + " beyond its maximum");
    }
    named.push_back(t.job);
  }
  std::sort(named.begin(), named.end());
  auto twice = std::adjacent_find(named.begin(), named.end());
  if (twice != named.end()) misuse("strategy planned " + job_name(*twice) + " more than once");
}

processor_set scheduler::place_adaptive(const job& j, const processor_set& held, const processor_set& free,
                                        std::size_t n) const {
  const std::size_t limit = node_limit(j);
  if (node_bound(j.req.shape)) {
    return place_adaptive_shaped(cluster_, res_, j.req.shape, rank_size(j.req), limit, held, free, n,
                                 j.req.max_pe > held.count() ? j.req.max_pe - held.count() : 0);
  }
  if (const std::size_t per_rank = rank_size(j.req); per_rank > 1) {
    return place_ranks(cluster_, held, free, n, per_rank, limit);
  }
  processor_set first = place_grow(held, free, n);
  if (limit == 0 || nodes_spanned(cluster_, first) <= limit) return first;
  const processor_set room = within_nodes(cluster_, held, free, limit);
  return place_grow(held, room, std::min(n, room.count()));
}

void scheduler::begin_resize(job& j, const processor_set& to, std::size_t ntarget, std::vector<decision>& out) {
  decision d;
  d.what = decision::kind::resize;
  d.job = j.req.id;
  d.from = j.procs;
  d.to = to;
  // A shrink moves exactly the ranks it drops, a grow none.
  d.ranks_moved = ntarget < j.size() ? j.size() - ntarget : 0;
  // Memory, GPUs and whole nodes it enters are its own from now on; those of
  // nodes it leaves only once it has left them (the acknowledgement).
  if ((to - j.procs).any()) follow_map(j, j.procs | to);
  j.target = to;
  j.ntarget = ntarget;
  j.state = job_state::resizing;
  ++j.resizes;
  out.push_back(std::move(d));
}

std::vector<decision> scheduler::decide(double now) {
  if (parts_.empty() && resvs_.empty()) {
    // A job that names a reservation waits while none has its name. The
    // queue is walked only when some job names one (rare): a walk of 100,000
    // queued jobs at every decision cost 8 ms (bench_policies).
    bool named = false;
    if (named_jobs_ != 0) {
      for (const queue_key& k : queue_) named = named || !jobs_.at(k.id).req.reservation.empty();
    }
    if (!named) return decide_in_scope(now);
  }
  // One strategy run per partition (and, with reservations, per part of
  // it: reservation.hpp), each carried out before the next looks, so a
  // node shared by two partitions is never given twice.
  std::vector<decision> out;
  std::optional<plan::reservation_t> first_reservation;
  const auto run = [&](std::optional<std::size_t> part, std::optional<std::size_t> resv, scope_kind kind) {
    enter_scope(part, resv, kind, now);
    auto d = decide_in_scope(now);
    out.insert(out.end(), std::make_move_iterator(d.begin()), std::make_move_iterator(d.end()));
    if (kind == scope_kind::general && !first_reservation) first_reservation = reservation_;
  };
  const auto run_part = [&](std::optional<std::size_t> part) {
    for (std::size_t r = 0; r < resvs_.size(); ++r) {
      if (resvs_[r].active(now)) run(part, r, scope_kind::inside);
    }
    run(part, std::nullopt, scope_kind::general);
    for (std::size_t r = 0; r < resvs_.size(); ++r) {
      if (resvs_[r].future(now)) run(part, r, scope_kind::before);
    }
  };
  try {
    if (!resvs_.empty()) evict_from_reservations(now, out);
    if (parts_.empty()) {
      run_part(std::nullopt);
    } else {
      for (std::size_t i = 0; i < parts_.size(); ++i) {
        if (parts_[i].starts_jobs()) run_part(i);
      }
    }
  } catch (...) {
    // What earlier runs carried out is returned by the next decide().
    leave_scope();
    out.insert(out.end(), std::make_move_iterator(pending_.begin()), std::make_move_iterator(pending_.end()));
    pending_ = std::move(out);
    throw;
  }
  leave_scope();
  reservation_ = first_reservation;
  // Node-loss decisions when no partition ran.
  if (!pending_.empty()) {
    out.insert(out.begin(), std::make_move_iterator(pending_.begin()), std::make_move_iterator(pending_.end()));
    pending_.clear();
  }
  return out;
}

std::vector<decision> scheduler::decide_in_scope(double now) {
  plan p = (scope_ ? policy_of(*scope_) : *policy_).schedule(*this, now);
  check_plan(p);
  // Nothing below throws for a checked plan, so the node-loss decisions are
  // only taken now: a refused plan leaves them for the next decide().
  std::vector<decision> out = std::move(pending_);
  pending_.clear();
  reservation_ = p.reservation;

  // Shrinks first: what they vacate is reserved until the jobs acknowledge.
  // They give back processors on UP nodes first: those are what the plan
  // hands to others (equipartition, policies.hpp), while a processor given back on a
  // drained node is lost to everyone.
  processor_set off_up = held_ - usable_;
  // Rigid jobs waiting to resume need their old processors back: nobody else
  // is given those, and shrinking jobs give them back first.
  processor_set promised(cluster_.size());
  for (job_id id : suspended_) {
    const job& q = jobs_.at(id);
    if (q.resume_wanted && !q.req.adaptive) promised |= q.home;
  }
  const bool any_promised = promised.any();
  for (const plan::sized& t : p.targets) {
    job& j = jobs_.at(t.job);
    if (j.state != job_state::running || !resizable(j) || t.procs >= j.size()) continue;
    if (scoped_ && scope_adaptive_.count(j.req.id) == 0) continue;
    // (Not for ranks of several processors: a rigid job's old processors
    // are no whole ranks, and a shrink must leave whole ranks on each node.)
    const processor_set keep = any_promised && rank_size(j.req) == 1 && j.procs.intersects(promised)
                                   ? off_up | (j.procs - promised)
                                   : off_up;
    // Bounded per node: whole ranks, whole nodes first, never below its node minimum.
    processor_set to = node_bound(j.req.shape) ? shrink_adaptive_shaped(cluster_, j.req.shape, rank_size(j.req), j.req.min_pe,
                                                                        j.procs, j.size() - t.procs, off_up)
                                               : place_shrink(j.procs, j.size() - t.procs, keep);
    if (to.count() == j.size()) continue;
    reserved_ |= j.procs - to;
    j.last_resize_time = now;
    begin_resize(j, to, to.count(), out);
  }

  processor_set free = (scoped_ ? scope_usable_ : usable_) - held_;
  processor_set promised_free = any_promised ? free & promised : processor_set(cluster_.size());
  if (any_promised) free -= promised;
  std::size_t free_n = free.count();
  // Starts, in the strategy's order. A start whose processors are still being
  // vacated waits for the acknowledgements (the next decide() redoes the plan).
  // A shaped job that does not fit the nodes' free room now (the strategy
  // counts processors only) waits, and so do the starts planned after it:
  // later, smaller jobs must not take the room it is waiting for.
  bool shape_blocked = false;
  // A rigid job waiting to resume whose processors are all free resumes now,
  // whatever the plan: nobody else may have them, so a job the strategy put
  // ahead of it (counting them as free) must not keep it waiting.
  if (any_promised) {
    std::vector<job_id> ready;
    for (job_id id : suspended_) {
      const job& q = jobs_.at(id);
      if (q.resume_wanted && !q.req.adaptive && !(q.home - promised_free).any()) ready.push_back(id);
    }
    std::sort(ready.begin(), ready.end(), [&](job_id a, job_id b) { return key_of(jobs_.at(a).req) < key_of(jobs_.at(b).req); });
    for (job_id id : ready) {
      job& q = jobs_.at(id);
      if ((q.home - promised_free).any()) continue;  // an earlier one's home overlapped
      promised_free -= q.home;
      resume_job(q, processor_set(q.home), q.home.count(), now, out);  // a copy: resume_job clears home
    }
  }
  for (const plan::sized& s : p.starts) {
    job& j = jobs_.at(s.job);
    if (j.state == job_state::suspended) {
      if (!j.resume_wanted) continue;
      if (!j.req.adaptive) continue;  // resumed above once its processors are free
      if (shape_blocked || s.procs > free_n) continue;
      const auto allowed = allowed_procs(j.req);
      const processor_set jfree = allowed ? free & *allowed : free;
      if (jfree.count() < j.req.min_pe) continue;
      processor_set procs = place_adaptive(j, processor_set(cluster_.size()), jfree, std::min(s.procs, jfree.count()));
      const std::size_t n = procs.count();
      if (n < j.req.min_pe) continue;  // the nodes it may use are busy: never smaller than its minimum
      free -= procs;
      free_n -= n;
      resume_job(j, procs, n, now, out);
      continue;
    }
    if (j.state != job_state::pending) continue;  // resumed above
    if (shape_blocked) continue;
    if (s.procs > free_n) {
      if (p.keep_order) free_n = 0;  // it waits for vacated processors: nobody behind takes the free ones
      continue;
    }
    // A job on named nodes (--nodelist, --exclude) takes only their free
    // processors; when they are busy it waits, and does not hold up the
    // starts planned after it (its nodes are not theirs).
    const auto allowed = allowed_procs(j.req);
    const processor_set jfree = allowed ? free & *allowed : free;
    if (allowed && jfree.count() < (placed_by_count(j.req) ? j.req.min_pe : s.procs)) continue;
    if (placed_by_count(j.req)) {
      // Within its node limit it may get fewer than planned, never fewer
      // than its minimum: then it waits (the strategy plans the same again).
      processor_set procs = place_adaptive(j, processor_set(cluster_.size()), jfree, std::min(s.procs, jfree.count()));
      const std::size_t n = procs.count();
      if (n < j.req.min_pe) continue;
      free -= procs;
      free_n -= n;
      start_job(j, procs, now, out);
      continue;
    }
    // A partition's MaxNodes bounds a rigid job's nodes: placed as shaped.
    job_shape shape = j.req.shape;
    if (scope_ && parts_[*scope_].max_nodes > 0 && !j.req.adaptive &&
        (shape.max_nodes == 0 || shape.max_nodes > parts_[*scope_].max_nodes)) {
      shape.max_nodes = parts_[*scope_].max_nodes;
    }
    if (!shape.plain()) {
      auto placed = place_shaped(cluster_, jfree, res_, shape, s.procs);
      if (!placed) {
        if (allowed) continue;  // its named nodes are busy: others may go on
        // Unless it could not run even on idle UP nodes (some are down):
        // then nothing it waits for can come from the jobs behind it.
        std::vector<std::size_t> up;
        for (std::size_t i = 0; i < cluster_.nodes().size(); ++i) {
          const node& n = cluster_.at(i);
          if (n.state == node_state::up && (!scoped_ || scope_usable_.test(n.first_proc))) up.push_back(i);
        }
        shape_blocked = !up.empty() && !core::never_fits(cluster_, res_, up, shape, s.procs);
        continue;
      }
      free -= placed->procs;
      free_n -= std::min(free_n, placed->procs.count());
      j.placed = std::move(placed->nodes);
      take_resources(j);
      start_job(j, placed->procs, now, out);
      continue;
    }
    processor_set procs = place_new(jfree, s.procs);
    free -= procs;
    free_n -= s.procs;
    start_job(j, procs, now, out);
  }

  // Grows last, from what is free now; a grow waits until all of it is free
  // rather than growing twice.
  for (const plan::sized& t : p.targets) {
    job& j = jobs_.at(t.job);
    if (j.state != job_state::running || !resizable(j) || t.procs <= j.size()) continue;
    if (scoped_ && scope_adaptive_.count(j.req.id) == 0) continue;  // an adaptive job grows only in its scope
    std::size_t delta = t.procs - j.size();
    if (delta > free_n) continue;
    const auto allowed = allowed_procs(j.req);
    const processor_set gfree = allowed ? free & *allowed : free;
    if (allowed) delta = std::min(delta, gfree.count());
    if (delta == 0) continue;
    // Within its node limit a grow may stop short (others hold the rest of
    // the nodes it may use): it takes what it may have now.
    processor_set to = place_adaptive(j, j.procs, gfree, delta);
    processor_set gained = to - j.procs;
    const std::size_t got = gained.count();
    if (got == 0) continue;
    free -= gained;
    free_n -= got;
    held_ |= gained;
    j.last_resize_time = now;
    begin_resize(j, to, j.size() + got, out);
  }
  refresh_counts();
  return out;
}

}  // namespace aqs::core
