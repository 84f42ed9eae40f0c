// step_table: the processes a running job starts on its other nodes through
// aqs-rsh (one step per job and node), who asked for each, and the nodes
// where a job ran steps (what they left there is killed when the job ends).
// On the strand.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "daemon_base/dispatcher.hpp"

namespace aqs::daemon {

struct step_entry {
  std::weak_ptr<connection> conn;  // the launcher (aqs-rsh) that asked
  std::int64_t request = 0;        // its remote_exec id
  std::int64_t launch = 0;         // our launch request to the node's agent
  bool started = false;
};

class step_table {
public:
  using key = std::pair<std::int64_t, std::size_t>;  // job, node

  bool runs(std::int64_t job, std::size_t node) const { return steps_.count({job, node}) != 0; }
  void add(std::int64_t job, std::size_t node, step_entry s) { steps_[{job, node}] = std::move(s); }
  // The step that node `node`'s answer to our launch `launch_id` is about.
  std::optional<key> by_launch(std::size_t node, std::int64_t launch_id) const;
  step_entry* find(const key& k);
  // Its agent started it: the job has left something on that node.
  void started(const key& k);
  // The step is over (it exited, or could not start); its entry, if any.
  std::optional<step_entry> take(const key& k);
  // The launcher `gone` went (or a launcher of theirs vanished): their steps,
  // which end now.
  std::vector<key> take_of(const connection& gone);
  // The job ended: every node where it ran steps, and its steps still open
  // (node and launcher), removed.
  struct job_end {
    std::set<std::size_t> nodes;
    std::vector<std::pair<std::size_t, std::weak_ptr<connection>>> open;
  };
  job_end take_job(std::int64_t job);
  // Nodes where the job started steps.
  const std::set<std::size_t>* nodes_of(std::int64_t job) const;

private:
  std::map<key, step_entry> steps_;
  std::map<std::int64_t, std::set<std::size_t>> step_nodes_;
};

}  // namespace aqs::daemon
