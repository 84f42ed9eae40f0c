// map_display: compact per-node processor map text.
#include "core/map_display.hpp"

#include <stdexcept>

#include <algorithm>

namespace aqs::core {

std::string format_processor_map(std::span<const node_span> nodes, const processor_set& procs) {
  std::vector<const node_span*> sorted;
  sorted.reserve(nodes.size());
  for (const auto& n : nodes) {
    if (n.nprocs > 0) sorted.push_back(&n);
  }
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const node_span* a, const node_span* b) { return a->first_proc < b->first_proc; });

  // The node holding global processor p, or nullptr. Nodes are few and the
  // walk below is in increasing p, so a moving cursor keeps this linear.
  std::size_t cursor = 0;
  auto owner = [&](std::size_t p) -> const node_span* {
    while (cursor < sorted.size() && sorted[cursor]->first_proc + sorted[cursor]->nprocs <= p) ++cursor;
    for (std::size_t k = cursor; k < sorted.size() && sorted[k]->first_proc <= p; ++k) {
      if (p < sorted[k]->first_proc + sorted[k]->nprocs) return sorted[k];
    }
    return nullptr;
  };

  std::string out;
  const node_span* run_node = nullptr;
  bool in_run = false;
  std::size_t run_first = 0, run_last = 0;  // global numbers
  auto flush = [&]() {
    if (!in_run) return;
    const std::size_t base = run_node != nullptr ? run_node->first_proc : 0;
    if (!out.empty()) out.push_back(',');
    out += run_node != nullptr ? run_node->name : std::string("?");
    out.push_back(':');
    out += std::to_string(run_first - base);
    if (run_last != run_first) out += "-" + std::to_string(run_last - base);
    in_run = false;
  };
  // A node with several runs gets "a-b,name:c" rather than "a-b,c" (see header).
  procs.for_each([&](std::size_t p) {
    const node_span* n = owner(p);
    if (in_run && n == run_node && p == run_last + 1) {
      run_last = p;
      return;
    }
    flush();
    run_node = n;
    run_first = run_last = p;
    in_run = true;
  });
  flush();
  return out;
}

processor_set parse_processor_map(std::span<const node_span> nodes, std::string_view text, std::size_t size,
                                  std::vector<std::string>* missing) {
  processor_set out(size);
  const auto bad = [&](std::string_view why) {
    throw std::invalid_argument("processor map '" + std::string(text) + "': " + std::string(why));
  };
  const auto number = [&](std::string_view t) {
    if (t.empty() || t.size() > 9) bad("a processor number is missing or too long");
    std::size_t v = 0;
    for (char c : t) {
      if (c < '0' || c > '9') bad("a processor number is not a number");
      v = v * 10 + static_cast<std::size_t>(c - '0');
    }
    return v;
  };
  std::size_t at = 0;
  while (at < text.size()) {
    const std::size_t comma = text.find(',', at);
    const std::string_view item = text.substr(at, comma == std::string_view::npos ? std::string_view::npos : comma - at);
    at = comma == std::string_view::npos ? text.size() : comma + 1;
    const std::size_t colon = item.rfind(':');
    if (colon == std::string_view::npos || colon == 0) bad("each item is NODE:RANGE");
    const std::string_view name = item.substr(0, colon);
    const std::string_view range = item.substr(colon + 1);
    const std::size_t dash = range.find('-');
    const std::size_t first = number(range.substr(0, dash));
    const std::size_t last = dash == std::string_view::npos ? first : number(range.substr(dash + 1));
    if (last < first) bad("a range ends before it starts");
    const node_span* node = nullptr;
    for (const node_span& n : nodes) {
      if (n.name == name) node = &n;
    }
    if (node == nullptr || last >= node->nprocs || node->first_proc + last >= size) {
      if (missing != nullptr) missing->emplace_back(name);
      if (node == nullptr) continue;
    }
    for (std::size_t p = first; p <= last && p < node->nprocs && node->first_proc + p < size; ++p) out.set(node->first_proc + p);
  }
  return out;
}

}  // namespace aqs::core
