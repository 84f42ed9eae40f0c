// faucets_store: faucetsd's PostgreSQL store (faucets/sql): the jobs users
// submitted, where each is placed, its events, and placements abandoned
// when a cluster went away. One connection, used from faucetsd's one
// network thread; a broken connection is opened again once per call.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <pqxx/connection>

#include "protocol/staged_files.hpp"
#include "server/market.hpp"
#include "store/migrations.hpp"


namespace aqs::faucets {

const std::vector<store::migration>& faucets_migrations();

struct stored_job {
  std::int64_t id = 0;
  std::string owner, name, asked_cluster = "auto";
  std::string submit;  // aqsd's submit message, JSON text
  std::int64_t min_pe = 1, max_pe = 1;
  bool adaptive = false;
  double walltime_s = 3600;
  std::string state = "PENDING";
  std::optional<std::string> cluster;
  std::optional<std::int64_t> local_id;
  std::int64_t nprocs = 0;
  std::optional<std::int64_t> exit_code;
  std::string submit_time;  // ISO 8601
  std::optional<std::string> start_time, end_time;
  std::int64_t attempts = 0;
};
nlohmann::json to_json(const stored_job& j);  // the API's job object

struct history_line {
  std::string time, event, detail;
};

struct abandoned_placement {
  std::int64_t job_id = 0;
  std::string cluster;
  std::optional<std::int64_t> local_id;
};

// A job in this state has ended for good: the core's final states
// (core::is_final over core::k_all_job_states), never a list of faucetsd's
// own. "UNKNOWN" (its cluster is away) is not final.
bool is_final_state(const std::string& state);
// The same states as a PostgreSQL array literal ("{COMPLETED,...}"), bound
// into every query that tells live jobs from ended ones.
const std::string& final_states_array();

// faucetsd's jobs as the job_router changes and reads them: the
// faucets_store below, or an in-memory table in the unit tests. Every call
// may throw the store's errors (pqxx::failure for PostgreSQL).
class job_records {
public:
  virtual ~job_records() = default;
  virtual std::int64_t add_job(const stored_job& j) = 0;  // with its "submitted" event
  virtual void event(std::int64_t id, const std::string& event, const std::string& detail) = 0;
  // A forward is about to be sent: its "dispatched" event, and the job's
  // attempt number (1, 2, ...), which names this forward's copy on the
  // cluster (its submit token), so a copy cancelled there is never mistaken
  // for a later forward's.
  // The forward is recorded (job, cluster, attempt) for forwarded_to.
  virtual std::int64_t dispatched(std::int64_t id, const std::string& cluster, const std::string& detail) = 0;
  // Whether faucetsd ever forwarded job `id` to `cluster` (that attempt, or
  // any when unset): what a cluster may speak about beside its placements.
  virtual bool forwarded_to(std::int64_t id, const std::string& cluster, std::optional<std::int64_t> attempt) = 0;
  virtual void placed(std::int64_t id, const std::string& cluster, std::int64_t local_id, const std::string& detail) = 0;
  // The cluster is about to launch it: from now on it counts as started (it
  // is never placed elsewhere), with this start time if it had none.
  virtual void starting(std::int64_t id, const std::string& detail) = 0;
  virtual void update(std::int64_t id, const std::string& state, std::int64_t nprocs,
                      std::optional<std::int64_t> exit_code, const std::optional<std::string>& start,
                      const std::optional<std::string>& end) = 0;
  virtual void set_state(std::int64_t id, const std::string& state, const std::string& event,
                         const std::string& detail) = 0;
  // Back to the server's queue: its placement on `cluster` is abandoned.
  virtual void unplace(std::int64_t id, const std::string& cluster, std::optional<std::int64_t> local_id,
                       const std::string& why) = 0;
  virtual std::vector<abandoned_placement> abandoned(const std::string& cluster) = 0;
  virtual void forget_abandoned(std::int64_t id, const std::string& cluster) = 0;
  // Not in a final state, oldest first.
  virtual std::vector<stored_job> live_jobs() = 0;
  virtual std::optional<stored_job> job(std::int64_t id) = 0;
};

// The market's records (faucets/sql/003_market.sql): the price each
// placement was agreed at and the ledger. The faucets_store below, or an
// in-memory book in the unit tests. Every call may throw the store's errors.
class ledger_book {
public:
  virtual ~ledger_book() = default;
  // Job `id` runs on `cluster` at `price` (a later call for the same pair replaces it).
  virtual void agree_price(std::int64_t id, const std::string& cluster, double price) = 0;
  virtual std::optional<double> agreed_price(std::int64_t id, const std::string& cluster) = 0;
  // Records the entry (with the job's "charged" event) unless the job has
  // one already: whether it was recorded.
  virtual bool charge(const ledger_entry& e, const std::string& detail) = 0;
  // Every owner in the ledger -> its balance in micro-credits (earned minus
  // spent); they sum to exactly 0.
  virtual std::map<std::string, std::int64_t> balances() = 0;
  // Newest first, at most `limit`; owner set: the entries it pays or earns.
  virtual std::vector<ledger_entry> entries(const std::optional<std::string>& owner, std::int64_t limit) = 0;
};

// Staged files (faucets/sql/004_staged_files.sql): a job's inputs until its
// outputs are back, then its outputs. The faucets_store below, or an
// in-memory book in the unit tests. Every call may throw the store's errors.
struct stage_result {
  std::string outputs = "waiting";  // waiting | back | failed
  std::string detail;
  std::int64_t in_bytes = 0, out_bytes = 0;
};
class stage_book {
public:
  virtual ~stage_book() = default;
  // Job `id` takes these files (its stage_result "waiting").
  virtual void stage_inputs(std::int64_t id, const std::vector<protocol::staged_file>& files) = 0;
  // "in" or "out", by path.
  virtual std::vector<protocol::staged_file> staged(std::int64_t id, const std::string& direction) = 0;
  // nullopt: the job staged nothing.
  virtual std::optional<stage_result> stage_result_of(std::int64_t id) = 0;
  // Its outputs came back (its inputs are dropped), or why they cannot
  // (its inputs are dropped too), with the job's event.
  virtual void outputs_back(std::int64_t id, const std::vector<protocol::staged_file>& files) = 0;
  virtual void outputs_failed(std::int64_t id, const std::string& why) = 0;
  // Jobs that have ended and whose outputs are still "waiting" (asked for
  // again when their cluster connects: the answer may have been lost with
  // the link, or with a restart of faucetsd).
  virtual std::vector<std::int64_t> outputs_waiting() = 0;
};

// The jobs in PostgreSQL. One connection, used from faucetsd's one thread.
class faucets_store final : public job_records, public ledger_book, public stage_book {
public:
  // Connects and applies faucets/sql migrations. Throws pqxx errors or
  // store::schema_mismatch.
  explicit faucets_store(std::string conninfo);
  ~faucets_store() override;

  std::int64_t add_job(const stored_job& j) override;
  void event(std::int64_t id, const std::string& event, const std::string& detail) override;
  std::int64_t dispatched(std::int64_t id, const std::string& cluster, const std::string& detail) override;
  bool forwarded_to(std::int64_t id, const std::string& cluster, std::optional<std::int64_t> attempt) override;
  void placed(std::int64_t id, const std::string& cluster, std::int64_t local_id, const std::string& detail) override;
  void starting(std::int64_t id, const std::string& detail) override;
  void update(std::int64_t id, const std::string& state, std::int64_t nprocs, std::optional<std::int64_t> exit_code,
              const std::optional<std::string>& start, const std::optional<std::string>& end) override;
  void set_state(std::int64_t id, const std::string& state, const std::string& event,
                 const std::string& detail) override;
  void unplace(std::int64_t id, const std::string& cluster, std::optional<std::int64_t> local_id,
               const std::string& why) override;
  std::vector<abandoned_placement> abandoned(const std::string& cluster) override;
  void forget_abandoned(std::int64_t id, const std::string& cluster) override;
  std::vector<stored_job> live_jobs() override;
  std::optional<stored_job> job(std::int64_t id) override;

  // Newest first up to `limit`; owner unset: everyone's; all: finished too.
  std::vector<stored_job> jobs(const std::optional<std::string>& owner, bool all,
                               const std::optional<std::string>& cluster, std::int64_t limit);
  std::vector<history_line> history(std::int64_t id);

  void agree_price(std::int64_t id, const std::string& cluster, double price) override;
  std::optional<double> agreed_price(std::int64_t id, const std::string& cluster) override;
  bool charge(const ledger_entry& e, const std::string& detail) override;
  std::map<std::string, std::int64_t> balances() override;
  std::vector<ledger_entry> entries(const std::optional<std::string>& owner, std::int64_t limit) override;

  void stage_inputs(std::int64_t id, const std::vector<protocol::staged_file>& files) override;
  std::vector<protocol::staged_file> staged(std::int64_t id, const std::string& direction) override;
  std::optional<stage_result> stage_result_of(std::int64_t id) override;
  void outputs_back(std::int64_t id, const std::vector<protocol::staged_file>& files) override;
  void outputs_failed(std::int64_t id, const std::string& why) override;
  std::vector<std::int64_t> outputs_waiting() override;

private:
  template <class F>
  auto with_tx(F&& f);
  std::string conninfo_;
  std::unique_ptr<pqxx::connection> conn_;
};

}  // namespace aqs::faucets
