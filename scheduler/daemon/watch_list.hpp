// watch_list: who watches which job (frun, fsub --wait), what they are sent
// (state changes, output), and output kept for an interactive job until its
// first watcher comes. On the strand.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include "core/job_state.hpp"
#include "core/processor_set.hpp"
#include "daemon_base/dispatcher.hpp"

namespace aqs::daemon {

class watch_list {
public:
  // Output kept per job while nobody watches (the oldest goes first).
  static constexpr std::size_t k_early_output_max = std::size_t{1} << 20;

  // `c` watches `job` under its request `request_id`; output that came
  // before is sent to it now.
  void add(std::int64_t job, const std::shared_ptr<connection>& c, std::int64_t request_id);
  // A job_event to each watcher of the job; after a final state the job's
  // watchers are dropped.
  void notify(std::int64_t job, core::job_state state, std::optional<std::int32_t> code,
              std::optional<std::int32_t> signal, const core::processor_set* procs);
  // The job's output, to its watchers; kept (bounded) if none is there.
  void output(const protocol::output& m);
  // The connection `gone` closed: it watches nothing now. Returns the jobs
  // it was the last watcher of.
  std::vector<std::int64_t> drop(const connection& gone);
  // The job ended: its watchers and kept output go.
  void forget(std::int64_t job);
  std::size_t watchers_of(std::int64_t job) const;
  std::size_t early_bytes(std::int64_t job) const;

private:
  struct watcher {
    std::weak_ptr<connection> conn;
    std::int64_t request_id = 0;
  };
  struct early {
    std::deque<protocol::output> kept;
    std::size_t bytes = 0;
  };
  std::unordered_map<std::int64_t, std::vector<watcher>> watchers_;
  std::unordered_map<std::int64_t, early> early_;
};

}  // namespace aqs::daemon
