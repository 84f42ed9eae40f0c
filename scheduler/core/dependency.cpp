// dependency: parsing Slurm dependency expressions and judging them.
#include "core/dependency.hpp"

#include <algorithm>
#include <set>
#include <stdexcept>

#include "core/enum_names.hpp"

namespace aqs::core {

namespace {

constexpr enum_table<dependency::kind, 4> k_kinds = {{
    {dependency::kind::after, "after"},
    {dependency::kind::afterany, "afterany"},
    {dependency::kind::afterok, "afterok"},
    {dependency::kind::afternotok, "afternotok"},
}};

std::string shown(std::string_view s) { return std::string(s.substr(0, 40)); }

}  // namespace

std::vector<std::int64_t> dependency::jobs() const {
  std::vector<std::int64_t> out;
  std::set<std::int64_t> seen;
  for (const auto& t : terms) {
    if (seen.insert(t.job).second) out.push_back(t.job);
  }
  return out;
}

bool dependency::plain_afterok() const {
  if (singleton || (any && terms.size() > 1)) return false;
  return std::all_of(terms.begin(), terms.end(), [](const term& t) { return t.what == kind::afterok; });
}

dependency parse_dependency(std::string_view text, std::size_t max_ids) {
  dependency d;
  const bool has_any = text.find('?') != std::string_view::npos;
  const bool has_all = text.find(',') != std::string_view::npos;
  if (has_any && has_all) throw std::invalid_argument("dependency '" + shown(text) + "' mixes ',' and '?'");
  d.any = has_any;
  const char sep = has_any ? '?' : ',';
  std::set<std::pair<int, std::int64_t>> seen;
  while (true) {
    const auto cut = text.find(sep);
    const std::string_view item = text.substr(0, cut);
    if (item.empty()) throw std::invalid_argument("empty item in dependency list");
    if (item == "singleton") {
      d.singleton = true;
      if (cut == std::string_view::npos) break;
      text = text.substr(cut + 1);
      continue;
    }
    const auto colon = item.find(':');
    const std::string_view type = item.substr(0, colon);
    const auto k = value_in(k_kinds, type);
    if (!k) {
      throw std::invalid_argument("dependency type '" + shown(type) +
                                  "' is not supported (AQS supports after, afterany, afterok, afternotok and singleton)");
    }
    if (colon == std::string_view::npos) throw std::invalid_argument("dependency '" + shown(item) + "' names no job");
    std::string_view ids = item.substr(colon + 1);
    while (true) {
      const auto c = ids.find(':');
      const std::string_view f = ids.substr(0, c);
      std::int64_t v = 0;
      bool ok = !f.empty() && f.size() <= 15;
      for (const char ch : f) {
        if (ch < '0' || ch > '9') ok = false;
        if (ok) v = v * 10 + (ch - '0');
      }
      // Slurm allows "ID+TIME" for after; AQS does not wait extra time.
      if (!ok || v < 1) throw std::invalid_argument("invalid job id '" + shown(f) + "' in dependency");
      if (seen.insert({static_cast<int>(*k), v}).second) d.terms.push_back({*k, v});
      if (d.terms.size() > max_ids) {
        throw std::invalid_argument("too many dependencies (at most " + std::to_string(max_ids) + ")");
      }
      if (c == std::string_view::npos) break;
      ids = ids.substr(c + 1);
    }
    if (cut == std::string_view::npos) break;
    text = text.substr(cut + 1);
  }
  return d;
}

std::string to_string(const dependency& d) {
  std::string out = d.singleton ? "singleton" : "";
  for (std::size_t i = 0; i < d.terms.size();) {
    std::size_t j = i;
    if (!out.empty()) out += d.any ? '?' : ',';
    out += std::string(name_in(k_kinds, d.terms[i].what, "afterok"));
    while (j < d.terms.size() && d.terms[j].what == d.terms[i].what && (j == i || !d.any)) {
      out += ":" + std::to_string(d.terms[j].job);
      ++j;
    }
    i = j;
  }
  return out;
}

dependency_verdict evaluate(const dependency& d, const std::function<std::optional<job_state>(std::int64_t)>& state_of) {
  dependency_verdict v;
  std::size_t satisfied = 0, impossible = 0;
  std::optional<std::pair<std::int64_t, job_state>> first_impossible;
  for (const auto& t : d.terms) {
    const auto st = state_of(t.job);
    const bool ended = st && is_final(*st);
    const bool started = st && *st != job_state::pending;
    bool sat = false, never = false;
    switch (t.what) {
      case dependency::kind::after: sat = started; break;
      case dependency::kind::afterany: sat = ended; break;
      case dependency::kind::afterok:
        sat = ended && *st == job_state::completed;
        never = ended && !sat;
        break;
      case dependency::kind::afternotok:
        sat = ended && *st != job_state::completed;
        never = ended && !sat;
        break;
    }
    if (sat) {
      ++satisfied;
    } else if (never) {
      ++impossible;
      if (!first_impossible) first_impossible = {t.job, *st};
    } else {
      v.waiting.push_back(t.job);
    }
  }
  const bool ready = d.any ? satisfied > 0 || d.terms.empty() : satisfied == d.terms.size();
  const bool hopeless = d.any ? impossible == d.terms.size() && !d.terms.empty() : impossible > 0;
  if (ready) {
    v.what = dependency_verdict::kind::ready;
    v.waiting.clear();
  } else if (hopeless) {
    v.what = dependency_verdict::kind::never;
    v.failed_job = first_impossible->first;
    v.failed_state = first_impossible->second;
    v.waiting.clear();
  } else {
    v.what = dependency_verdict::kind::waiting;
    std::sort(v.waiting.begin(), v.waiting.end());
    v.waiting.erase(std::unique(v.waiting.begin(), v.waiting.end()), v.waiting.end());
  }
  return v;
}

}  // namespace aqs::core
