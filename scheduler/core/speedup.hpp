// speedup: how a job's declared speedup model turns processor counts into progress rates (pure).
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace aqs::core {

// What an adaptive job says about its scaling, for the policies that weigh a
// resize's gain against its cost (payoff). S(p) is the speedup on p
// processors relative to one; only ratios S(q) / S(p) are ever used.
//  - linear (the default when a job declares nothing): S(p) = p;
//  - amdahl F: S(p) = 1 / ((1 - F) + F / p), F the parallel fraction in [0, 1];
//  - table: points (p, S) with p ascending and S > 0, linear between points,
//    S(p) * p / p0 below the first (linear scaling up to it), flat beyond the last.
struct speedup_model {
  enum class kind : unsigned char { linear, amdahl, table };
  kind what = kind::linear;
  double parallel_fraction = 1.0;
  std::vector<std::pair<double, double>> points;

  static speedup_model amdahl(double f);
  // Text form: "linear", "amdahl:F", "table:P=S,P=S,...". Throws
  // std::invalid_argument with a one-line reason for anything else.
  static speedup_model parse(const std::string& text);
  std::string to_string() const;

  double speedup(double p) const noexcept;
  // Seconds on q processors of work that takes `seconds` on p processors.
  double rescale(double seconds, std::size_t p, std::size_t q) const noexcept;
};

}  // namespace aqs::core
