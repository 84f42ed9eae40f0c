// scheduler: the incremental scheduling state that events go into and decisions come out of.
#pragma once

#include <array>
#include <cstddef>
#include <map>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/cluster.hpp"
#include "core/geometry.hpp"
#include "core/job.hpp"
#include "core/partition.hpp"
#include "core/reservation.hpp"
#include "core/strategy.hpp"

namespace aqs::core {

// Something that happened, as the daemon or the simulator saw it.
struct event {
  enum class kind : unsigned char {
    arrival,         // request: a new job enters the queue
    completion,      // job ended (final: completed, failed, cancelled, timeout); a pending job is dequeued
    change_request,  // job asks for new min_pe/max_pe
    suspend,         // running job is stopped: its processors go back to the pool
    resume,          // suspended job asks to run again: it queues for room (decision resume)
    hold,            // pending job leaves the queue until released (fctl hold)
    release,         // held job goes back to the queue at its old place
    requeue,         // running or suspended job is killed and queued again (fctl requeue)
    node_down,       // node: its processors are gone, jobs on them requeue or fail
    node_up,         // node: usable again
    node_drain,      // node: keeps running jobs, gets no new ones
    resize_ack,      // job applied the map it was sent: vacated processors become free
    resize_timeout,  // job did not apply it in time: it keeps its old processors
  };
  kind what = kind::arrival;
  job_request request;               // arrival
  job_id job = 0;                    // all job events
  std::size_t node = 0;              // node events (registration index)
  std::size_t min_pe = 0, max_pe = 0;  // change_request
  job_state final_state = job_state::completed;  // completion

  static event arrival(job_request r) { event e; e.what = kind::arrival; e.job = r.id; e.request = std::move(r); return e; }
  static event completion(job_id j, job_state s = job_state::completed) { event e; e.what = kind::completion; e.job = j; e.final_state = s; return e; }
  static event change(job_id j, std::size_t min, std::size_t max) { event e; e.what = kind::change_request; e.job = j; e.min_pe = min; e.max_pe = max; return e; }
  static event on_job(kind k, job_id j) { event e; e.what = k; e.job = j; return e; }
  static event on_node(kind k, std::size_t n) { event e; e.what = k; e.node = n; return e; }
};

// Order of the queue: higher priority first, then earlier submission, then id.
struct queue_key {
  int neg_priority;
  double submit_time;
  job_id id;
  friend auto operator<=>(const queue_key&, const queue_key&) = default;
};

// The scheduler owns the cluster model and every live job; it is pure (no
// clock, no I/O, no threads): `now` comes with each call. Use:
//   auto d = s.handle(event::arrival(req), now);   // apply + decide
// or, for several events at one instant (completions before arrivals, as
// CQSim orders them), apply() each and decide() once.
//
// Resizes are two-phase. A resize decision moves the job to RESIZING; the
// processors it gives up stay reserved (held, not free) and those it gains
// are held for it, until the caller reports resize_ack (the map is applied:
// vacated processors become free) or resize_timeout (the job keeps its old
// map, gained processors are freed, and the job is frozen at its size until
// the next arrival or completion so it is not asked again at once).
//
// Finished jobs are forgotten (the caller keeps history). Misuse (unknown
// job, duplicate id, an event illegal in the job's state, a bad node index)
// throws std::invalid_argument and leaves the state unchanged.
class scheduler {
public:
  scheduler(cluster c, std::unique_ptr<strategy> policy);
  scheduler(scheduler&&) = default;
  scheduler& operator=(scheduler&&) = default;
  // A copy of the whole state (cluster, jobs, queue, partitions) deciding
  // with the same strategy object, which is shared: strategies keep no state
  // (strategy.hpp). Events and decisions on the copy leave this one as it
  // is; for what-if runs (start_estimate.hpp). Not a copy constructor, so
  // that no scheduler is copied by accident.
  scheduler snapshot() const { return scheduler(*this); }

  void apply(const event& e);
  // Asks the strategy for a plan and carries it out, returning the decisions
  // (first those apply() made on node loss). A plan that breaks the strategy
  // contract (strategy.hpp) throws std::invalid_argument before any of it is
  // applied; the node-loss decisions are then returned by the next decide().
  std::vector<decision> decide(double now);

  // A node registering while the scheduler runs (the daemon's aqs-node
  // agents): it gets the next block of processor numbers, UP. Existing maps
  // keep their numbers. Returns the node's index; throws
  // std::invalid_argument like cluster::add_node. Call decide() afterwards
  // to use it.
  std::size_t add_node(std::string name, std::size_t procs);
  // What node `index` has besides processors (memory in MB, 0: unknown, and
  // GPUs), for shaped jobs. Throws std::invalid_argument for a bad index.
  void set_node_resources(std::size_t index, std::uint64_t memory_mb, std::size_t gpus);
  // Partitions (partition.hpp): with none (the default) every job may use
  // every node. With some, a job gets processors only on the nodes of the
  // partitions its request names (job_request::partition, "a,b"; empty: the
  // default one; a name not among them: it waits), and decide() runs the
  // strategy once per partition that starts jobs, in this order, as if each
  // were a machine of its own: queue(), the counts, pinned_count() and
  // adaptive_holding() then answer for that partition (its UP processors,
  // its jobs), and an adaptive job grows only there. Nodes may be in several
  // partitions; a job in several runs in the first that starts it. May be
  // called at any time (a reload): pending jobs follow the new partitions,
  // running ones keep their processors.
  //
  // A partition with a policy of its own (partition::policy, Policy= in
  // aqs.conf) is scheduled by that strategy, made with default
  // strategy_params; the others by the scheduler's. An unknown name throws
  // std::invalid_argument (listing the known ones) and changes nothing.
  void set_partitions(std::vector<partition> parts);
  const std::vector<partition>& partitions() const noexcept { return parts_; }
  // Advance reservations (reservation.hpp says what the scheduler does with
  // them). Replaces the whole set, as a reload; each one's map is sized to
  // the cluster. Called at any time outside decide(); the next decide()
  // acts on it. Throws std::invalid_argument, changing nothing, for a
  // duplicate or empty name, end <= start, or an empty map.
  void set_reservations(std::vector<advance_reservation> rs);
  const std::vector<advance_reservation>& reservations() const noexcept { return resvs_; }
  // How long before a reservation's start adaptive jobs are shrunk off its
  // processors (seconds, default 0: at the start), so that the processors
  // are free at the start although a job takes a while to acknowledge.
  void set_reservation_lead(double seconds) { resv_lead_ = seconds > 0 ? seconds : 0; }
  // The processors of partition i's nodes (registered ones).
  const processor_set& partition_procs(std::size_t i) const { return part_procs_.at(i); }
  // The partition whose strategy run is under way (in decide()), if any.
  std::optional<std::size_t> scope() const noexcept { return scope_; }
  // Recovery (a restarted daemon): puts back a job that already holds
  // `procs`, RUNNING or SUSPENDED, started at `start_time`, without a
  // decision. Throws std::invalid_argument, changing nothing, for a duplicate
  // id, another state, a bad min..max, an empty map or one of the wrong
  // length, or processors another job holds.
  void restore(const job_request& r, job_state state, const processor_set& procs, double start_time);
  // Recovery of a resize the job had claimed (begun to apply) when the
  // daemon stopped: the adaptive job, restored RUNNING on its old map, is
  // RESIZING towards `target` again, holding both maps until it acknowledges
  // or the resize times out. Throws std::invalid_argument, changing nothing,
  // for an unknown, non-adaptive or not RUNNING job, an empty map or one of
  // the wrong length, or processors another job holds.
  void restore_resize(job_id id, const processor_set& target);
  // Gives job `id` a new priority (job_request::priority): a queued job
  // moves to its new place in the queue, a running one keeps it for the
  // policies that rank running jobs (equipartition shrinks the lowest
  // first). Not an event: nothing else changes and no decision is made; the
  // next decide() sees the new order. The multifactor priority
  // (priority.hpp) comes in this way. Throws std::invalid_argument for an
  // unknown job, or when called from inside a strategy run.
  void set_priority(job_id id, int priority);
  std::vector<decision> handle(const event& e, double now) {
    apply(e);
    return decide(now);
  }

  // Read-only state, for strategies, the daemon's status views and tests.
  const cluster& machine() const noexcept { return cluster_; }
  const strategy& policy() const noexcept { return *policy_; }
  // The strategy that schedules partition i (its own Policy=, else policy()).
  const strategy& policy_of(std::size_t i) const {
    return i < part_policies_.size() && part_policies_[i] ? *part_policies_[i] : *policy_;
  }
  const job* find(job_id id) const;
  const job& get(job_id id) const;  // throws std::invalid_argument if unknown
  // Pending jobs that are not held, and suspended jobs asking to resume
  // (within a partition's strategy run: those of that partition).
  const std::set<queue_key>& queue() const noexcept {
    if (!scoped_) return queue_;
    return scope_part_queue_ ? part_queue_[*scope_part_queue_] : scope_queue_;
  }
  // Jobs holding processors, by estimated end (EASY's release order).
  const std::set<std::pair<double, job_id>>& holding_by_end() const noexcept { return by_end_; }
  // Adaptive jobs holding processors.
  const std::set<job_id>& adaptive_holding() const noexcept { return scoped_ ? scope_adaptive_ : adaptive_; }
  const processor_set& usable() const noexcept { return scoped_ ? scope_usable_ : usable_; }  // on UP nodes
  const processor_set& held() const noexcept { return held_; }      // by some job (incl. reserved)
  const processor_set& reserved() const noexcept { return reserved_; }  // vacated, awaiting ack
  processor_set free_procs() const { return usable_ - held_; }
  std::size_t free_count() const noexcept { return counts().free; }
  std::size_t usable_count() const noexcept { return counts().usable; }
  std::size_t reserved_count() const noexcept { return counts().reserved; }
  // Reserved processors on UP nodes: those that become free when their jobs
  // acknowledge (vacated ones on a drained node never do).
  std::size_t reserved_usable_count() const noexcept { return counts().reserved_usable; }
  std::size_t held_count() const noexcept { return counts().held; }
  // An adaptive job the strategy may resize now: running or resizing, not
  // frozen, not suspended. Its planning size is its target during a resize.
  static bool resizable(const job& j) noexcept;
  static std::size_t planning_size(const job& j) noexcept;
  // Processors of j's planning map (its target during a resize) that are not
  // on UP nodes, i.e. on drained ones: j keeps them while it runs, and a
  // shrink gives them back last, but no other job can be given them. Zero
  // without a popcount when no held processor is off an UP node.
  std::size_t pinned_count(const job& j) const noexcept;
  // The processors of one rank of an adaptive job (its cpus_per_task, -c):
  // its sizes are whole ranks and each rank's processors are on one node.
  // 1 for rigid jobs, whose ranks place_shaped lays out.
  static std::size_t rank_size(const job_request& r) noexcept {
    return r.adaptive && r.shape.cpus_per_task > 1 ? r.shape.cpus_per_task : 1;
  }
  // How many nodes an adaptive job may hold processors on (0: any): its own
  // node maximum (shape.max_nodes) and, within a partition's strategy run,
  // the partition's MaxNodes, whichever is smaller. A rigid job's nodes are
  // bounded by its placement (place_shaped) instead.
  std::size_t node_limit(const job& j) const noexcept;
  // The largest size the strategy may plan for an adaptive job: its max_pe,
  // no more than the UP processors (in scope) that hold whole ranks of it,
  // and with a node limit only those of that many of the largest nodes. The scheduler grants it no more nodes than
  // the limit whatever the plan (a grow on nodes others hold stops short).
  std::size_t max_size(const job& j) const;
  std::optional<plan::reservation_t> reservation() const noexcept { return reservation_; }
  // Per node: memory and GPUs, what shaped jobs use of them, exclusive use.
  const std::vector<node_resources>& resources() const noexcept { return res_; }
  // Why a job with this request could never start on the given nodes (all
  // nodes when empty) even on an idle cluster, or nullopt (geometry.hpp).
  std::optional<std::string> never_fits(const job_request& r, const std::vector<std::size_t>& nodes = {}) const;
  // The processors a job's named nodes let it use (job_request::nodelist
  // and exclude), or nullopt when it names none.
  std::optional<processor_set> allowed_procs(const job_request& r) const;

private:
  scheduler(const scheduler&) = default;  // snapshot()
  scheduler& operator=(const scheduler&) = delete;
  job& get_mut(job_id id);
  void release(job& j);  // drops all processors the job holds or was promised
  void forget(job_id id);  // erases a job from jobs_ (and from named_jobs_)
  // queue_ and the partitions' queues together: a job enters or leaves both.
  void enqueue(const job& j);
  void dequeue(const job& j);
  void refresh_part_queues();  // after the partitions or a job's partitions changed
  void start_job(job& j, const processor_set& procs, double now, std::vector<decision>& out);
  // A suspended job runs again on procs (n of them).
  void resume_job(job& j, const processor_set& procs, std::size_t n, double now, std::vector<decision>& out);
  // A shaped job's placement (tasks, memory, GPUs per node) from the map it
  // holds, taken as at its start (recovery, resume).
  void restore_placement(job& j);
  // Up to n more processors for adaptive job j holding `held`, out of
  // `free` (n <= its count), within j's node limit: place_grow's choice when
  // that stays within the limit, else the same out of within_nodes(). May
  // give fewer than n when the nodes j may use are busy. The result holds
  // `held`.
  processor_set place_adaptive(const job& j, const processor_set& held, const processor_set& free, std::size_t n) const;
  // Throws std::invalid_argument, changing nothing, unless every start and
  // target of the plan may be carried out (or skipped) as decide() does.
  void check_plan(const plan& p) const;
  // Sends j the map `to` of ntarget processors: RESIZING until acknowledged.
  // The caller has already reserved what a shrink vacates or held what a grow gains.
  void begin_resize(job& j, const processor_set& to, std::size_t ntarget, std::vector<decision>& out);
  // The counts are recomputed lazily, once per change of the sets rather
  // than after every event (a simulator feeds hundreds of thousands).
  struct counts_t {
    std::size_t free = 0, usable = 0, reserved = 0, reserved_usable = 0, held = 0, held_usable = 0;
  };
  const counts_t& counts() const noexcept;
  void refresh_counts() noexcept { counts_dirty_ = true; }
  void refresh_usable();
  void new_epoch();  // arrival or completion: frozen jobs may be asked again
  // An adaptive job that takes memory, GPUs or whole nodes: what it takes
  // per node becomes what it takes with `map` (its map, or during a grow
  // its map and its target together). Nothing for other jobs.
  void follow_map(job& j, const processor_set& map);
  // Whether `map` keeps an adaptive job's bounds per node (whole ranks, whole
  // nodes for --exclusive, at most its ranks a node, its node count).
  bool keeps_bounds(const job& j, const processor_set& map) const;
  // Takes (or gives back) the memory and GPUs of a shaped job's placement.
  void take_resources(job& j);
  void give_back_resources(job& j);
  // Partitions: each one's processors, a job's partitions from its request,
  // and the strategy's view narrowed to one partition (decide()).
  void refresh_partition_procs();
  void assign_partitions(job& j) const;
  // A strategy run over part of the machine: partition `part` (none: every
  // node) and, for reservations, `resv` (an index in resvs_): `inside` runs
  // an active one's jobs on its processors, `before` backfills a future
  // one's processors with jobs that end by its start; without `resv`, the
  // jobs without a reservation on the processors no live reservation has.
  enum class scope_kind : unsigned char { general, inside, before };
  void enter_scope(std::optional<std::size_t> part, std::optional<std::size_t> resv, scope_kind kind, double now);
  void leave_scope();
  // Whether queued job j belongs to the scope being entered.
  bool in_scope_queue(const job& j, std::optional<std::size_t> resv, scope_kind kind, double now) const;
  // At an active reservation's start: adaptive jobs of others on its
  // processors are sent maps without them (reservation.hpp).
  void evict_from_reservations(double now, std::vector<decision>& out);
  // The processors of the reservations that have not ended by `now`.
  processor_set live_reserved(double now) const;
  std::vector<decision> decide_in_scope(double now);

  cluster cluster_;
  std::shared_ptr<const strategy> policy_;  // shared only by snapshots
  std::unordered_map<job_id, job> jobs_;
  std::set<queue_key> queue_;
  std::set<std::pair<double, job_id>> by_end_;
  std::set<job_id> adaptive_;
  processor_set usable_, held_, reserved_;
  mutable counts_t counts_;
  mutable bool counts_dirty_ = true;
  std::vector<decision> pending_;  // decisions made by apply() (node loss), returned by decide()
  std::optional<plan::reservation_t> reservation_;
  std::vector<node_resources> res_;  // one per node
  std::size_t named_jobs_ = 0;       // jobs in jobs_ that name a reservation
  // max_size() of jobs bounded by nodes, by (node limit, rank size, ranks
  // per node, memory per node, memory per cpu, GPUs per node).
  using size_key = std::array<std::uint64_t, 6>;
  mutable std::map<size_key, std::size_t> max_sizes_;
  std::set<job_id> suspended_;       // SUSPENDED jobs (their home maps)
  std::vector<partition> parts_;
  std::vector<processor_set> part_procs_;  // one per partition
  std::vector<std::shared_ptr<const strategy>> part_policies_;  // one per partition: its own, or null (policy_)
  std::optional<std::size_t> scope_;  // the partition of the scope (none: every node)
  bool scoped_ = false;               // within a strategy run over part of the machine
  std::vector<advance_reservation> resvs_;
  double resv_lead_ = 0;
  processor_set scope_usable_;       // usable_ within the scope's partition
  std::set<queue_key> scope_queue_;  // its pending jobs (unless scope_part_queue_)
  // Per partition, the queued jobs in it that name no reservation (what a
  // partition's general scope runs), kept by enqueue()/dequeue(); a scope
  // that is exactly that uses it in place of scope_queue_.
  std::vector<std::set<queue_key>> part_queue_;
  std::optional<std::size_t> scope_part_queue_;
  std::set<job_id> scope_adaptive_;  // adaptive jobs running in it
};

}  // namespace aqs::core
