// array_spec: Slurm's job array index expressions ("0-99%10", "1,3,5-9:2").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace aqs::core {

inline constexpr std::int64_t k_max_array_index = 4'000'000;  // Slurm's MaxArraySize is at most 4,000,001
inline constexpr std::size_t k_max_array_tasks = 100'000;

struct array_spec {
  std::vector<std::int64_t> tasks;  // ascending, each once
  std::int64_t max_running = 0;     // "%K": at most K tasks at once; 0: no limit
};

// Parses a comma-separated list of N, N-M and N-M:STEP items with an
// optional "%K" at the end, as sbatch --array does. Throws
// std::invalid_argument with a one-line reason (a bad item, a reversed
// range, a step of 0, an index above k_max_array_index, more than
// k_max_array_tasks tasks, %0).
array_spec parse_array_spec(std::string_view text);

// The compact form of task indices: {1,2,3,5} -> "1-3,5".
std::string format_array_tasks(const std::vector<std::int64_t>& tasks);

// The pending indices of an array kept compact (issue 28): ascending runs
// first-last by a step, as parse_array_spec reads them back ("5-99999",
// "0-98:2,101"). 100,000 tasks in one run are three numbers, not 100,000.
class task_ranges {
public:
  // From ascending, distinct indices (array_spec::tasks).
  static task_ranges of(const std::vector<std::int64_t>& tasks);
  std::int64_t size() const noexcept;
  bool empty() const noexcept { return runs_.empty(); }
  bool contains(std::int64_t index) const noexcept;
  // Removes one index; false if it was not there.
  bool erase(std::int64_t index);
  // Removes and returns the lowest n indices (fewer if there are fewer).
  std::vector<std::int64_t> take_front(std::size_t n);
  // "5-99999", "0-98:2,101": what parse_array_spec reads; "" when empty.
  std::string to_string() const;
  friend bool operator==(const task_ranges&, const task_ranges&) = default;

private:
  struct run {
    std::int64_t first = 0, last = 0, step = 1;
    friend bool operator==(const run&, const run&) = default;
  };
  std::vector<run> runs_;
};

}  // namespace aqs::core
