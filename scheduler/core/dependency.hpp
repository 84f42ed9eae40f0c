// dependency: Slurm's job dependency expressions ("afterok:12:13",
// "afterany:4,after:5", "afterok:7?afternotok:8") and what they allow.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/job_state.hpp"

namespace aqs::core {

struct dependency {
  enum class kind : unsigned char { after, afterany, afterok, afternotok };
  struct term {
    kind what = kind::afterok;
    std::int64_t job = 0;
    friend bool operator==(const term&, const term&) = default;
  };
  std::vector<term> terms;
  bool any = false;  // joined by '?': one satisfied term is enough; else (',') all
  // "singleton": besides the terms, every earlier job of the same user and
  // name must have ended (the daemon knows which those are).
  bool singleton = false;
  friend bool operator==(const dependency&, const dependency&) = default;

  // Every job named, each once, in order of first mention.
  std::vector<std::int64_t> jobs() const;
  // Only afterok terms joined by ',' and no singleton (what older clients
  // and the store's dependency list alone can say).
  bool plain_afterok() const;
};

// Parses TYPE:ID[:ID...] items joined by ',' (all) or by '?' (any), TYPE one
// of after, afterany, afterok, afternotok, and the item "singleton" (which
// always must hold, whatever the separator). Throws std::invalid_argument
// with a one-line reason (an unknown type such as aftercorr, a bad
// id, ',' and '?' mixed, more than `max_ids` ids).
dependency parse_dependency(std::string_view text, std::size_t max_ids = 65536);
// The canonical text ("afterok:1:2,afterany:3").
std::string to_string(const dependency& d);

// What a dependency allows now, given each job's state (nullopt: not known
// yet, counted as not started).
struct dependency_verdict {
  enum class kind : unsigned char { ready, waiting, never } what = kind::ready;
  std::vector<std::int64_t> waiting;  // the jobs whose start or end may change it
  std::int64_t failed_job = 0;        // never: a job whose end made it impossible
  job_state failed_state = job_state::failed;
};
// after: the job started (or ended); afterany: it ended; afterok: it
// COMPLETED (impossible once it ended otherwise); afternotok: it ended other
// than COMPLETED (impossible once it COMPLETED).
dependency_verdict evaluate(const dependency& d, const std::function<std::optional<job_state>(std::int64_t)>& state_of);

}  // namespace aqs::core
