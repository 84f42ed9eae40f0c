// job_intake: the submission and admission part of aqsd: a submission
// checked (admission, partitions, per-user caps), stored durably, then
// arrived: in the core, or held while its dependencies are unfinished, its
// array's throttle is full or the Faucets gate is closed. It owns the live
// job table (job_table), the dependency gate, the array table (job arrays'
// compact records and throttles) and the per-user ledger, and gives each
// job's place back when it ends (finish).
//
// Rule: on the scheduling strand, except handle_submit, which runs on the
// session thread it was called on and posts to the strand. Other parts get
// the job table through jobs() (they read entries and set the per-instance
// fields of the jobs they launch, resize or control); the dependency gate,
// the arrays and the ledger are changed only here and through the calls
// below. What it stores goes through the pipeline; it tells watchers of a
// job's arrival through pipeline::notify.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <mutex>
#include <string>
#include <vector>

#include "core/partition.hpp"
#include "core/scheduler.hpp"
#include "daemon/access_view.hpp"
#include "daemon/array_table.hpp"
#include "daemon/clock.hpp"
#include "daemon/dependency_gate.hpp"
#include "daemon/job_accounting.hpp"
#include "daemon/job_records.hpp"
#include "daemon/job_table.hpp"
#include "daemon/metrics.hpp"
#include "daemon/user_limits.hpp"
#include "daemon/write_pipeline.hpp"
#include "protocol/messages.hpp"
#include "protocol/replies.hpp"

namespace aqs::daemon {

class job_intake {
public:
  // `partitions` is the daemon's configuration (aqs.conf; set_partitions
  // replaces it on a reload); `faucets_admits(id)` is the Faucets gate's say on a
  // job a Faucets server placed here (false: it waits behind the gate);
  // `ended(id, state)` is called once a job it ended itself (a dependency
  // that can never be met) is committed, for every part to let it go.
  // `accounts`: a submission's account and limits, a job's running limits
  // before it enters the core (job_accounting.hpp).
  job_intake(core::scheduler& core, write_pipeline& pipe, access_view& view, metrics& stats, clock& time,
             job_accounting& accounts, core::site_config partitions, user_limits limits,
             std::function<bool(std::int64_t)> faucets_admits,
             std::function<void(std::int64_t, core::job_state)> ended);

  // The partitions (aqs.conf): the intake owns them. Any thread may read
  // them: a snapshot, which a reload does not change under the reader (a
  // submission on its session thread, a listing on the read pool); a reload
  // swaps in new ones (on the strand).
  std::shared_ptr<const core::site_config> partitions() const;
  void set_partitions(core::site_config partitions);

  job_table& jobs() noexcept { return jobs_; }
  const job_table& jobs() const noexcept { return jobs_; }
  // Recovery only (controller_recover.cpp fills them from the store); at
  // run time the other parts ask the functions below.
  dependency_gate& deps() noexcept { return deps_; }
  array_table& arrays() noexcept { return arrays_; }
  user_ledger& ledger() noexcept { return ledger_; }

  // A submission (session thread): checked, stored, answered, arrived.
  void handle_submit(const std::shared_ptr<connection>& c, const protocol::submit& s);
  // A submission that names a reservation is checked on the strand before
  // it is stored: "" or the one-line refusal (job_reservations).
  using reservation_check = std::function<std::string(const protocol::job_spec&, const std::string& user, bool root)>;
  void set_reservation_check(reservation_check f) { reservation_check_ = std::move(f); }
  // The job goes to the core, or waits (dependencies, Faucets gate, hold).
  void admit_or_hold(std::int64_t id);
  // admit_or_hold for many jobs (those an ended dependency released), a
  // bounded slice per turn of the strand.
  void admit_in_slices(std::vector<std::int64_t> ids);
  // The job started: jobs waiting with `after:ID` may go.
  // ---- what job_control asks (fkill, fctl) -----------------------------
  // The jobs `fkill ID` reaches: the job itself, or an array's live tasks
  // and the compact record of its tasks not yet split off.
  std::vector<std::int64_t> cancel_targets(std::int64_t id);
  // `fkill ARRAY_INDEX` by peer `p` (named `caller`): a task still in its
  // array's compact record leaves it (the record ends CANCELLED with its
  // last index); a task already split off is returned, to be cancelled as
  // a job; or why not.
  struct task_cancel {
    std::vector<std::int64_t> split_off;
    std::optional<protocol::cancel_failure> refused;
  };
  task_cancel cancel_array_task(const std::string& task, const peer_info& p, const std::string& caller);
  // A pending job was cancelled: the jobs that depend on it are told.
  void pending_cancelled(std::int64_t id) { deps_.release(id); }
  // Whether a job waits outside the core: for its --begin time, for its
  // dependencies, for its
  // array's throttle, or for an accounting limit.
  bool waits_outside_core(std::int64_t id) const {
    return deps_.is_held(id) || arrays_.is_waiting(id) || accounts_.held().count(id) != 0 ||
           begin_waits_.count(id) != 0;
  }
  bool waits_for_dependencies(std::int64_t id) const { return deps_.is_held(id); }

  void started(std::int64_t id) { admit_in_slices(deps_.started(id)); }
  // After a final transition committed: its place in the ledger, its array
  // and its dependents; the entry becomes a finished one.
  void finish(std::int64_t id, core::job_state state, std::optional<std::int32_t> code,
              std::optional<std::int32_t> signal);
  std::optional<core::job_state> known_state(std::int64_t id) const;
  // Splits the next tasks off an eligible array's compact record, within
  // its throttle or window, k_split_slice at most per turn.
  void split_array(std::int64_t array_id);
  // `keep_spec`: keep the job's text in memory until launch (else it is
  // read from the store then: array tasks, big scripts). `charged_bytes`:
  // the job text it holds of its user's MaxScriptBytesPerUser.
  void arrive(std::int64_t id, protocol::job_spec spec, submitter who,
              std::map<std::int64_t, core::job_state> dep_states, bool keep_spec = true,
              std::int64_t charged_bytes = 0, std::int64_t charged_jobs = 1);

private:
  // One submission being worked on: where its answer goes, what of its
  // per-user reservation no job holds yet (given back when it is answered),
  // and its token (a resend while it is worked on waits for its answer).
  struct submit_call;
  using call_ptr = std::shared_ptr<submit_call>;
  // With partitions configured: their checks (partition_gate.hpp), which may
  // set the job's time limit and narrow its partition list.
  void handle_partition_submit(const call_ptr& call, const protocol::submit& s, const submitter& who);
  // After the checks: dependencies looked up, then stored.
  void submit_checked(const call_ptr& call, const protocol::submit& s, const submitter& who);
  protocol::submit_reply submit_reply_for(const protocol::job_spec& job, std::int64_t id) const;
  // The answer to a submission (and to every resend of it that waited);
  // gives back what of its reservation no job took. Any thread.
  // sbatch --test-only: the estimate instead of the stored job.
  void answer_test_only(const call_ptr& call, const protocol::submit& s, const submitter& who);
  void answer_submit(const call_ptr& call, protocol::submit_reply r);
  void answer_submit_error(const call_ptr& call, protocol::error_code code, std::string message);
  // Queues the submission for group commit; the reply follows the arrival.
  void store_submission(const call_ptr& call, const protocol::submit& s, const submitter& who,
                        std::map<std::int64_t, core::job_state> deps);
  // A submission the store did not take: store_unavailable (retry) or refused.
  void reply_store_refusal(const call_ptr& call, std::exception_ptr error);
  // The submission's place in the accounting (its ticket) is given back: it was not stored.
  void forget_ticket(const call_ptr& call);
  // A job array: one compact record (its id is the array's) holding the
  // pending indices, whatever the array's size (issue 28).
  void store_array(const call_ptr& call, const protocol::submit& s, const submitter& who,
                   std::map<std::int64_t, core::job_state> deps);
  struct split_run {
    std::int64_t array_id = 0;
    store::array_split split;             // split.array_id: the record
    std::vector<std::int64_t> ids;
    core::task_ranges rest;               // the indices left in a record afterwards
    std::optional<std::int64_t> becomes;  // the record became this task
    std::string error;
  };
  void on_split(split_run run);
  // A store refusal of a submission: marks its token in doubt when the
  // commit may have happened (see in_doubt_), then answers the client.
  void store_refused(const call_ptr& call, const std::string& scoped_token, std::exception_ptr error);
  // Whether a stored row the store found for a resent token should arrive
  // now: it was created, or an earlier attempt's commit was in doubt and the
  // job is not here. Strand only.
  bool arrives_now(std::int64_t id, bool created, const std::string& scoped_token);
  // A job of the array made from its record (its text is the record's, in the store).
  job_entry copy_for(const job_entry& record, std::int64_t id) const;
  void arrive_task(std::int64_t id, std::int64_t record, std::int64_t array_id, std::int64_t index);
  double now() const { return clock_.wall_seconds(); }
  // sbatch --begin: the job waits outside the core (reason BeginTime) until
  // a timer brings it back to admit_or_hold at its time (at most an hour
  // at a time, so that a wall-clock step is noticed).
  void wait_for_begin(std::int64_t id, std::int64_t begin);

  core::scheduler& core_;
  write_pipeline& pipe_;
  access_view& view_;
  metrics& metrics_;
  clock& clock_;
  job_accounting& accounts_;
  mutable std::mutex partitions_mu_;
  std::shared_ptr<const core::site_config> partitions_;  // partitions_mu_
  std::function<bool(std::int64_t)> faucets_admits_;
  std::function<void(std::int64_t, core::job_state)> ended_;
  reservation_check reservation_check_;
  job_table jobs_;
  // Strand: the (scoped) submit tokens of submissions whose commit failed in
  // doubt: the client was told to submit again, yet the row may be stored.
  // A resend that finds its row stored then brings the job in (it never
  // arrived here); without the mark, a resend that finds a row is only
  // answered (the job arrived with the first attempt).
  std::set<std::string> in_doubt_;
  // Strand: jobs waiting for their --begin time, and the timer of each.
  std::map<std::int64_t, std::unique_ptr<timer_handle>> begin_waits_;
  dependency_gate deps_;
  array_table arrays_;
  user_ledger ledger_;
};

}  // namespace aqs::daemon
