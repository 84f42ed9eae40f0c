// usage: processor-second integrals and their half-life decay.
#include "core/usage.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace aqs::core {

namespace {

void check_finite(double t) {
  if (!std::isfinite(t)) throw std::invalid_argument("usage: a time in the map history is not finite");
}

// Integral of 2^(-(now - t)/H) dt over [a, b] (a <= b).
double decayed_span(double a, double b, double now, double half_life) {
  if (half_life <= 0) return b - a;
  const double k = std::log(2.0) / half_life;
  // Times in the future weigh 1: split at now.
  double future = 0;
  if (b > now) {
    future = b - std::max(a, now);
    b = std::max(a, now);
    if (b <= a) return future;
  }
  return future + (std::exp(-k * (now - b)) - std::exp(-k * (now - a))) / k;
}

template <class Span>
double integrate(const std::vector<held_segment>& history, double end, Span span) {
  check_finite(end);
  double total = 0;
  for (std::size_t i = 0; i < history.size(); ++i) {
    const held_segment& s = history[i];
    check_finite(s.from);
    double to = i + 1 < history.size() ? history[i + 1].from : end;
    check_finite(to);
    to = std::min(to, end);
    if (s.suspended || s.procs == 0 || to <= s.from) continue;
    total += static_cast<double>(s.procs) * span(s.from, to);
  }
  return total;
}

}  // namespace

double processor_seconds(const std::vector<held_segment>& history, double end) {
  return integrate(history, end, [](double a, double b) { return b - a; });
}

double decay_weight(double age, double half_life) {
  if (half_life <= 0 || age <= 0) return 1;
  return std::exp2(-age / half_life);
}

double decayed_processor_seconds(const std::vector<held_segment>& history, double end, double now,
                                 double half_life) {
  return integrate(history, end, [&](double a, double b) { return decayed_span(a, b, now, half_life); });
}

void usage_ledger::add(const std::string& key, double amount, double at) {
  entry& e = entries_[key];
  if (at >= e.when) {
    e.value = e.value * decay_weight(at - e.when, half_life_) + amount;
    e.when = at;
  } else {
    e.value += amount * decay_weight(e.when - at, half_life_);
  }
}

void usage_ledger::charge(const std::string& key, double procs, double from, double to) {
  if (!(to >= from) || !std::isfinite(from) || !std::isfinite(to)) {
    throw std::invalid_argument("usage_ledger: a charge must end at or after its start");
  }
  add(key, procs * decayed_span(from, to, to, half_life_), to);
}

double usage_ledger::at(const std::string& key, double now) const {
  auto it = entries_.find(key);
  if (it == entries_.end()) return 0;
  return it->second.value * decay_weight(now - it->second.when, half_life_);
}

std::unordered_map<std::string, double> usage_ledger::all_at(double now) const {
  std::unordered_map<std::string, double> out;
  out.reserve(entries_.size());
  for (const auto& [k, e] : entries_) out.emplace(k, e.value * decay_weight(now - e.when, half_life_));
  return out;
}

}  // namespace aqs::core
