// job_accounting: aqsd's accounting part (issue 32): the account tree and
// usage in PostgreSQL (store::account_store), core::accounting over them,
// and where aqsd asks it: a submission's account, QOS and submission limits
// (before the job is stored), a job's running limits before it enters the
// core (it waits outside the core with Slurm's reason otherwise, and an
// adaptive job's largest size is lowered to what the CPU limits leave), the
// multifactor priority of the queue (on arrival and every
// PriorityCalcPeriod), and each job's charge, written when it ends: the
// integral of the maps it held, suspended time excluded.
//
// A job counts against its running limits from the moment it enters the
// core (pending there or running) until it ends, at its largest size for an
// adaptive job: the core may start or grow it at any decision, and no
// decision may take it over a limit.
//
// Rule: on the scheduling strand, except load() (before the server starts)
// and the account_store calls, which run on the pipeline's readers.
#pragma once

#include <chrono>
#include <cstdint>
#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>

#include "core/accounting.hpp"
#include "core/scheduler.hpp"
#include "daemon/clock.hpp"
#include "daemon/job_table.hpp"
#include "daemon/observe.hpp"
#include "daemon/pipeline.hpp"
#include "daemon/write_pipeline.hpp"
#include "protocol/messages.hpp"

namespace aqs::store {
class account_store;
}

namespace aqs::daemon {

// aqs.conf: AccountingStorageEnforce (Slurm's words: associations, limits,
// qos, safe, nojobs...; "none" or absent: nothing is refused or held),
// PriorityWeight* and the other priority keys (core/priority.hpp),
// PriorityCalcPeriod.
struct accounting_options {
  // Submissions name an account the user is in (or the user has a default).
  bool enforce_associations = false;
  // The limits hold and refuse jobs (implies associations, as in Slurm).
  bool enforce_limits = false;
  core::priority_weights weights;
  // How often the whole queue's priority is computed again (Slurm's
  // PriorityCalcPeriod; default 5 minutes there, 60 s here).
  std::chrono::milliseconds calc_period{60'000};
  // Where the accounts are kept; empty: in memory only (unit tests), empty tree.
  std::string conninfo;
};

// Reads the accounting keys out of an aqs.conf text, each line replaced by an
// empty one (so that the partitions' parser names the right lines). Throws
// std::invalid_argument "FILE:LINE: why".
std::string take_accounting_lines(std::string_view text, std::string_view file, accounting_options& out);

class job_accounting {
public:
  // `readmit(id)`: a job that waited for a limit may go now (job_intake::admit_or_hold).
  job_accounting(accounting_options o, write_pipeline& pipe, clock& time, core::scheduler& core);
  ~job_accounting();
  job_accounting(const job_accounting&) = delete;
  job_accounting& operator=(const job_accounting&) = delete;

  void set_readmit(std::function<void(std::int64_t)> f) { readmit_ = std::move(f); }
  // Before the server starts (blocking): the tree and the usage that still
  // weighs, from the store. Throws what the store throws.
  void load();
  // Starts the periodic priority computation (strand).
  void start();
  void stop();
  const accounting_options& options() const noexcept { return o_; }

  // ---- submission ----------------------------------------------------------
  // Whether a submission must come to the strand to be checked (any user has
  // an account, or enforcement is on). Any thread.
  bool checks_submissions() const noexcept { return checks_.load(); }
  // Strand, before the job is stored: chooses its account (written into the
  // spec as "account=NAME"), checks its QOS and the submission limits, gives
  // a job without a time limit its MaxWall. "" and a ticket holding its
  // place until stored()/unstored(), or the one-line refusal.
  std::string check_submission(protocol::job_spec& spec, const std::string& user, std::uint64_t& ticket);
  void stored(std::uint64_t ticket, std::int64_t id);
  void unstored(std::uint64_t ticket);

  // ---- admission into the core --------------------------------------------
  // "" when the job may enter the core now (it is then counted; an adaptive
  // job's req.max_pe may be lowered to its CPU limits), else Slurm's reason
  // it waits for (it is kept and admitted again when a job ends).
  std::string admit(std::int64_t id, job_entry& e);
  // After its arrival in the core: its multifactor priority.
  void prioritise(std::int64_t id);
  // Recovery: a job already in the core (running or suspended) since `start`.
  void restored(std::int64_t id, const job_entry& e, std::size_t procs, double start, bool suspended);

  // ---- what happens to jobs (a change sink) --------------------------------
  void on_change(const job_change& ch);

  // ---- reading and changing the tree (the `accounts` message) --------------
  // show, shares and priority for anyone; add, modify and delete for root
  // (stored and audited through the account store, then acted on). Strand.
  void handle_accounts(const std::shared_ptr<connection>& c, const protocol::accounts& m);
  const core::accounting& state() const noexcept { return *acc_; }
  // A new tree (strand): jobs keep their accounts by name; held jobs are
  // looked at again. Throws std::invalid_argument (nothing changes).
  void replace_tree(core::account_tree t);
  // After the store changed the tree: loads it again (readers, then strand).
  void reload_tree(std::function<void(std::string)> done);
  store::account_store* store() noexcept { return store_.get(); }
  // Jobs waiting for a limit, and why.
  const std::map<std::int64_t, std::string>& held() const noexcept { return held_; }

private:
  core::accounting_job job_of(std::int64_t id, const job_entry& e) const;
  void rebuild_admitted();
  void release_held();
  void schedule_priorities();
  void charge_final(std::int64_t id, const job_change& ch);
  // Node-seconds: the job holds the nodes of `map` from t on (none: "").
  void hold_nodes(std::int64_t id, const core::processor_set& map, double t);
  void hold_nodes(std::int64_t id, const std::string& map, double t);
  void change_tree(const std::shared_ptr<connection>& c, const protocol::accounts& m);

  accounting_options o_;
  write_pipeline& pipe_;
  clock& clock_;
  core::scheduler& core_;
  std::unique_ptr<store::account_store> store_;
  std::unique_ptr<core::accounting> acc_;
  std::atomic<bool> checks_{false};
  std::function<void(std::int64_t)> readmit_;
  std::uint64_t next_ticket_ = std::uint64_t{1} << 62;
  // What each job in the core counts against the running limits, and the tally of them.
  std::unordered_map<std::int64_t, std::size_t> in_core_;
  std::unique_ptr<core::limit_tally> admitted_;
  std::map<std::int64_t, std::string> held_;  // waiting for a limit: the reason
  std::unordered_map<std::int64_t, std::size_t> running_;  // what a started job holds (charged)
  // Geometry of tracked jobs for memory- and GPU-seconds.
  std::unordered_map<std::int64_t, std::optional<protocol::job_geometry>> shapes_;
  // The nodes a running job holds and since when, and the node-seconds it
  // held before (--mem and GPUs are per node: an adaptive job's nodes
  // change with its map, a suspended job holds none).
  struct node_time {
    std::size_t nodes = 0;
    double since = 0;
    double seconds = 0;
  };
  std::unordered_map<std::int64_t, node_time> node_time_;
  std::unique_ptr<timer_handle> timer_;
  std::unordered_map<std::uint64_t, core::accounting_job> tickets_;
  std::atomic<bool> stopped_{false};
};

}  // namespace aqs::daemon
