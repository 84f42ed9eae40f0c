// job_table: the live jobs as aqsd knows them beyond the core (owner, script
// until launch, host, launch confirmation, token, cancel request), and the
// final states of the jobs that ended while it ran. On the strand.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/job.hpp"
#include "protocol/messages.hpp"

namespace aqs::daemon {

struct job_entry {
  core::job_request req;  // what the core schedules (kept for dependencies and requeues)
  std::string user;
  std::int32_t uid = 0;
  std::int32_t gid = 0;
  std::optional<protocol::job_spec> spec;  // until launched (fetched again when needed)
  std::vector<std::int64_t> deps;          // afterok
  bool interactive = false;
  std::optional<std::size_t> host;  // node running its script
  bool launch_confirmed = false;    // the agent said it runs it
  // Recovered RUNNING: its agent must list it or report its end; if it does
  // neither by its first heartbeat, the launch never reached it (aqsd died
  // with it unsent) and it is launched again.
  bool recovered = false;
  int misses = 0;         // heartbeats of its host without it
  std::string token;      // the shim's TCP secret
  bool cancel_requested = false;
  // fctl's mark, as stored (store::job_status::control): "held-user",
  // "held-admin", "resume" or "".
  std::string control;
  // fctl requeue: who asked; the job is requeued when its agent reports it ended.
  std::optional<std::string> requeue_by;
  // A step of this instance on another node ran out of memory (why, in one
  // line): the job ends OUT_OF_MEMORY when its script ends, as Slurm's job
  // does when one of its steps did.
  std::optional<std::string> step_oom;
  std::map<std::int64_t, core::job_state> dep_known;  // dependencies' states read at submit
  // Kept after launch for its steps on other nodes (their Slurm variables).
  std::string name;
  std::optional<protocol::job_geometry> geometry;
  // A Faucets server placed it here (its submit token says so): after a
  // restart, or while the server is unreachable, it waits for the server.
  bool faucets = false;
  std::string submit_token;  // as the submitter gave it (without the owner's scope)
  // Which of its launches last asked the Faucets server for a start grant
  // (an answer to an older ask is ignored).
  std::uint64_t faucets_start_ask = 0;
  // Bytes of its job text it holds of its user's MaxScriptBytesPerUser
  // (user_limits.hpp): given back when it ends.
  std::int64_t charged_bytes = 0;
  // Of its user's MaxJobsPerUser: 1, or for an array's compact record the
  // tasks not yet split off (array_table.hpp).
  std::int64_t charged_jobs = 1;
};

// How a job ended, for those who ask after it left the live table.
struct final_info {
  core::job_state state = core::job_state::completed;
  std::int32_t uid = 0;  // its owner (who may watch it)
  std::optional<std::int32_t> exit_code;
  std::optional<std::int32_t> signal;
};

class job_table {
public:
  // Keeps the final states of the newest `finished_kept` ended jobs (older
  // ones are looked up in the store when asked about).
  explicit job_table(std::size_t finished_kept = 100'000) : finished_kept_(finished_kept) {}

  job_entry* find(std::int64_t id);
  const job_entry* find(std::int64_t id) const;
  job_entry& at(std::int64_t id) { return live_.at(id); }
  bool is_live(std::int64_t id) const { return live_.count(id) != 0; }
  // Live or ended while aqsd ran.
  bool is_known(std::int64_t id) const { return is_live(id) || finished_.count(id) != 0; }
  // Adds a live job; false (and nothing changes) if it is known already.
  bool add(std::int64_t id, job_entry e);
  // The job ended: it leaves the live table and its final state is kept.
  void finish(std::int64_t id, core::job_state state, std::optional<std::int32_t> code,
              std::optional<std::int32_t> signal);
  // How an ended job ended, if it is still kept.
  const final_info* finished(std::int64_t id) const;

  std::size_t live_count() const noexcept { return live_.size(); }
  const std::unordered_map<std::int64_t, job_entry>& live() const noexcept { return live_; }
  // Live jobs of `user`, by id.
  std::vector<std::int64_t> of_user(const std::string& user) const;

private:
  std::size_t finished_kept_;
  std::unordered_map<std::int64_t, job_entry> live_;
  std::unordered_map<std::int64_t, final_info> finished_;
  std::deque<std::int64_t> finished_order_;
};

}  // namespace aqs::daemon
