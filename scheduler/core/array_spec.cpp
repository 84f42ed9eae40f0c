// array_spec: parsing and printing job array index lists.
#include "core/array_spec.hpp"

#include <algorithm>
#include <stdexcept>

namespace aqs::core {

namespace {

std::int64_t index_of(std::string_view v, std::string_view whole) {
  if (v.empty() || v.size() > 10) throw std::invalid_argument("invalid array index '" + std::string(v) + "' in '" + std::string(whole) + "'");
  std::int64_t n = 0;
  for (const char c : v) {
    if (c < '0' || c > '9') {
      throw std::invalid_argument("invalid array index '" + std::string(v) + "' in '" + std::string(whole) + "'");
    }
    n = n * 10 + (c - '0');
  }
  if (n > k_max_array_index) {
    throw std::invalid_argument("array index " + std::to_string(n) + " is above " + std::to_string(k_max_array_index));
  }
  return n;
}

}  // namespace

array_spec parse_array_spec(std::string_view text) {
  array_spec out;
  std::string_view list = text;
  if (const auto pct = text.find('%'); pct != std::string_view::npos) {
    list = text.substr(0, pct);
    out.max_running = index_of(text.substr(pct + 1), text);
    if (out.max_running == 0) throw std::invalid_argument("'%0' in '" + std::string(text) + "' would run no task");
  }
  if (list.empty()) throw std::invalid_argument("empty array index list");
  while (!list.empty()) {
    const auto comma = list.find(',');
    const std::string_view item = list.substr(0, comma);
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
    if (item.empty()) throw std::invalid_argument("empty item in array index list '" + std::string(text) + "'");
    const auto colon = item.find(':');
    const std::string_view range = item.substr(0, colon);
    const std::int64_t step = colon == std::string_view::npos ? 1 : index_of(item.substr(colon + 1), text);
    if (step == 0) throw std::invalid_argument("array step 0 in '" + std::string(text) + "'");
    const auto dash = range.find('-');
    const std::int64_t lo = index_of(range.substr(0, dash), text);
    const std::int64_t hi = dash == std::string_view::npos ? lo : index_of(range.substr(dash + 1), text);
    if (hi < lo) throw std::invalid_argument("reversed array range '" + std::string(range) + "'");
    if (static_cast<std::size_t>((hi - lo) / step) + out.tasks.size() >= k_max_array_tasks) {
      throw std::invalid_argument("an array of more than " + std::to_string(k_max_array_tasks) + " tasks");
    }
    for (std::int64_t i = lo; i <= hi; i += step) out.tasks.push_back(i);
  }
  std::sort(out.tasks.begin(), out.tasks.end());
  out.tasks.erase(std::unique(out.tasks.begin(), out.tasks.end()), out.tasks.end());
  return out;
}

std::string format_array_tasks(const std::vector<std::int64_t>& given) {
  // In index order, each once, whatever order the tasks were listed in
  // ("3_[0-5]", not "3_[0,2-5,1]").
  std::vector<std::int64_t> tasks = given;
  std::sort(tasks.begin(), tasks.end());
  tasks.erase(std::unique(tasks.begin(), tasks.end()), tasks.end());
  std::string out;
  for (std::size_t i = 0; i < tasks.size();) {
    std::size_t j = i;
    while (j + 1 < tasks.size() && tasks[j + 1] == tasks[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(tasks[i]);
    if (j > i) out += "-" + std::to_string(tasks[j]);
    i = j + 1;
  }
  return out;
}

task_ranges task_ranges::of(const std::vector<std::int64_t>& tasks) {
  task_ranges r;
  for (std::size_t i = 0; i < tasks.size();) {
    run x{tasks[i], tasks[i], 1};
    std::size_t j = i + 1;
    if (j < tasks.size() && tasks[j] > tasks[i]) {
      x.step = tasks[j] - tasks[i];
      while (j < tasks.size() && tasks[j] == x.last + x.step) x.last = tasks[j++];
    }
    if (x.first == x.last) x.step = 1;
    r.runs_.push_back(x);
    i = j;
  }
  return r;
}

std::int64_t task_ranges::size() const noexcept {
  std::int64_t n = 0;
  for (const run& x : runs_) n += (x.last - x.first) / x.step + 1;
  return n;
}

bool task_ranges::contains(std::int64_t index) const noexcept {
  for (const run& x : runs_) {
    if (index >= x.first && index <= x.last && (index - x.first) % x.step == 0) return true;
  }
  return false;
}

bool task_ranges::erase(std::int64_t index) {
  for (std::size_t k = 0; k < runs_.size(); ++k) {
    run& x = runs_[k];
    if (index < x.first || index > x.last || (index - x.first) % x.step != 0) continue;
    if (x.first == x.last) {
      runs_.erase(runs_.begin() + static_cast<std::ptrdiff_t>(k));
    } else if (index == x.first) {
      x.first += x.step;
    } else if (index == x.last) {
      x.last -= x.step;
    } else {
      const run after{index + x.step, x.last, x.step};
      x.last = index - x.step;
      runs_.insert(runs_.begin() + static_cast<std::ptrdiff_t>(k) + 1, after);
    }
    return true;
  }
  return false;
}

std::vector<std::int64_t> task_ranges::take_front(std::size_t n) {
  std::vector<std::int64_t> out;
  while (out.size() < n && !runs_.empty()) {
    run& x = runs_.front();
    out.push_back(x.first);
    if (x.first == x.last) {
      runs_.erase(runs_.begin());
    } else {
      x.first += x.step;
    }
  }
  return out;
}

std::string task_ranges::to_string() const {
  std::string out;
  for (const run& x : runs_) {
    if (!out.empty()) out += ',';
    out += std::to_string(x.first);
    if (x.last != x.first) {
      out += "-" + std::to_string(x.last);
      if (x.step != 1) out += ":" + std::to_string(x.step);
    }
  }
  return out;
}

}  // namespace aqs::core
