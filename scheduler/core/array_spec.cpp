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

std::string format_array_tasks(const std::vector<std::int64_t>& tasks) {
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

}  // namespace aqs::core
