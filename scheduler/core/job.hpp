// job: what the scheduling core knows about one job, and the decisions it makes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/geometry.hpp"
#include "core/job_state.hpp"
#include "core/processor_set.hpp"
#include "core/speedup.hpp"

namespace aqs::core {

using job_id = std::uint64_t;

// What a user asked for. Rigid jobs have min_pe == max_pe; adaptive jobs run
// on any count in [min_pe, max_pe] and accept resizes.
struct job_request {
  job_id id = 0;
  std::string user;
  std::size_t min_pe = 1;
  std::size_t max_pe = 1;
  bool adaptive = false;
  double walltime = 0;     // the user's run-time estimate, seconds (EASY reservations)
  double submit_time = 0;  // seconds, the caller's clock
  int priority = 0;        // higher first; ties by submit time, then id
  bool requeue_on_node_fail = true;  // else a node loss fails the job
  // How the processors must be laid out (tasks, nodes, memory, GPUs); the
  // default places by count alone. A shaped rigid job's min_pe == max_pe is
  // ntasks * cpus_per_task; an exclusive one holds its nodes' every processor.
  job_shape shape{};
  // The partitions it may run in, "a,b" (Slurm's -p); empty: the default one.
  // Ignored while the scheduler has no partitions (scheduler::set_partitions).
  std::string partition;
  // Adaptive jobs only (rigid jobs ignore them). The size the job runs best
  // at, in min_pe..max_pe; 0 when it declares none, and then its minimum
  // (preferred_size): a job with no preference is asked no more than its
  // minimum and given what is idle, as equipartition does. The policies
  // pref_common_pool and payoff start it there and give idle processors to
  // jobs below their preferred size first.
  std::size_t pref_pe = 0;
  // How it scales (linear when it says nothing) and what one resize costs it
  // in seconds without progress (negative: unknown, the policy's default):
  // the payoff policy grows a job only when the time saved beats the cost.
  speedup_model speedup{};
  double resize_cost = -1;
  // The advance reservation it runs in (--reservation, reservation.hpp);
  // empty: none. Such a job runs only on that reservation's processors,
  // only while it is active, and waits while no reservation has the name.
  std::string reservation;
  // Named nodes (Slurm's -w/--nodelist and -x/--exclude, expanded): with a
  // node list the job runs on those nodes only; it never runs on an
  // excluded one. Names not registered count as nodes with no processors.
  // Both empty: any node.
  std::vector<std::string> nodelist;
  std::vector<std::string> exclude;
};

// The preferred size the policies plan with: pref_pe within min..max, or the
// minimum when none was declared.
inline std::size_t preferred_size(const job_request& r) noexcept {
  if (r.pref_pe == 0) return r.min_pe;
  return r.pref_pe < r.min_pe ? r.min_pe : (r.pref_pe > r.max_pe ? r.max_pe : r.pref_pe);
}

struct job {
  job_request req;
  job_state state = job_state::pending;
  processor_set procs;       // held now (during a resize: the old map until acknowledged)
  processor_set target;      // during a resize: the map sent to the job
  double start_time = -1;    // latest start (after a requeue, the new one)
  double estimated_end = 0;  // start_time + walltime: EASY's view of when it frees its processors
  bool frozen = false;       // missed a resize deadline: kept at its size until the next arrival/completion
  std::size_t resizes = 0;
  // When its size last changed (its start, resume or latest resize), on the
  // caller's clock: the payoff policy resizes a job at most once per interval.
  double last_resize_time = -1;
  std::size_t resize_timeouts = 0;
  // procs.count() and target.count(), kept by the scheduler whenever it sets
  // the maps: strategies ask for sizes on every decision, and counting a
  // 9,216-processor map is 144 popcounts.
  std::size_t nprocs = 0;
  std::size_t ntarget = 0;
  // A shaped job's tasks, memory and GPUs per node, taken at its start.
  std::vector<shaped_allocation::on_node> placed;
  // Held (fctl hold): pending but out of the queue until released.
  bool held = false;
  // SUSPENDED: the processors it ran on (it holds none while suspended: its
  // processes are stopped and others may use them). A rigid job resumes on
  // exactly these; an adaptive one on any processors, sent as a new map.
  processor_set home;
  // SUSPENDED and asked to resume: it is in the queue, waiting for room.
  bool resume_wanted = false;
  // Indices of the scheduler's partitions it may run in (none: it waits),
  // and the one it runs in (its processors are there; npos while pending).
  std::vector<std::size_t> partitions;
  std::size_t partition = static_cast<std::size_t>(-1);

  std::size_t size() const noexcept { return nprocs; }
  bool adaptive() const noexcept { return req.adaptive; }
};

// One thing the caller must carry out. The core has already updated its own
// state as if the caller will; a resize is only complete when the caller
// reports the job's acknowledgement (or its timeout).
struct decision {
  enum class kind : unsigned char {
    start,    // run the job on `to`
    resize,   // send the job the map `to` (it holds `from` until it acknowledges)
    requeue,  // the job lost processors with a node: killed, back in the queue
    fail,     // the job lost processors with a node and does not requeue: NODE_FAIL
    resume,   // a suspended job runs again on `to` (rigid: its old processors;
              // adaptive: any, and it is RESIZING until it applies the map)
  };
  kind what = kind::start;
  job_id job = 0;
  processor_set from;  // processors held before (empty for start)
  processor_set to;    // processors held after (empty for requeue/fail)
  // Ranks that must leave their processor: |from \ to|. Zero for starts and
  // pure grows, the shrink amount for pure shrinks (never more).
  std::size_t ranks_moved = 0;
};

std::string_view to_string(decision::kind k) noexcept;

}  // namespace aqs::core
