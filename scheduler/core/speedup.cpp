// speedup: the linear, Amdahl and table models and their text form.
#include "core/speedup.hpp"

#include <algorithm>
#include <cstdlib>
#include <stdexcept>

namespace aqs::core {

namespace {

double number(const std::string& text, const std::string& whole) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size()) {
    throw std::invalid_argument("speedup model '" + whole + "': '" + text + "' is not a number");
  }
  return v;
}

}  // namespace

speedup_model speedup_model::amdahl(double f) {
  if (!(f >= 0 && f <= 1)) throw std::invalid_argument("speedup model: the parallel fraction must be in [0, 1]");
  speedup_model m;
  m.what = kind::amdahl;
  m.parallel_fraction = f;
  return m;
}

speedup_model speedup_model::parse(const std::string& text) {
  if (text == "linear") return {};
  if (text.rfind("amdahl:", 0) == 0) {
    const double f = number(text.substr(7), text);
    if (!(f >= 0 && f <= 1)) {
      throw std::invalid_argument("speedup model '" + text + "': the parallel fraction must be in [0, 1]");
    }
    return amdahl(f);
  }
  if (text.rfind("table:", 0) == 0) {
    speedup_model m;
    m.what = kind::table;
    std::string rest = text.substr(6);
    while (!rest.empty()) {
      const auto comma = rest.find(',');
      const std::string item = rest.substr(0, comma);
      rest = comma == std::string::npos ? "" : rest.substr(comma + 1);
      const auto eq = item.find('=');
      if (eq == std::string::npos) throw std::invalid_argument("speedup model '" + text + "': points are P=S");
      const double p = number(item.substr(0, eq), text), s = number(item.substr(eq + 1), text);
      if (!(p >= 1) || !(s > 0)) throw std::invalid_argument("speedup model '" + text + "': need P >= 1 and S > 0");
      if (!m.points.empty() && p <= m.points.back().first) {
        throw std::invalid_argument("speedup model '" + text + "': processor counts must ascend");
      }
      m.points.emplace_back(p, s);
    }
    if (m.points.empty()) throw std::invalid_argument("speedup model '" + text + "': no points");
    return m;
  }
  throw std::invalid_argument("unknown speedup model '" + text + "' (known: linear, amdahl:F, table:P=S,...)");
}

std::string speedup_model::to_string() const {
  switch (what) {
    case kind::linear: return "linear";
    case kind::amdahl: {
      std::string f = std::to_string(parallel_fraction);
      while (f.size() > 1 && f.back() == '0') f.pop_back();
      if (!f.empty() && f.back() == '.') f.pop_back();
      return "amdahl:" + f;
    }
    case kind::table: {
      std::string out = "table:";
      for (std::size_t i = 0; i < points.size(); ++i) {
        auto num = [](double v) {
          std::string t = std::to_string(v);
          while (t.size() > 1 && t.back() == '0') t.pop_back();
          if (!t.empty() && t.back() == '.') t.pop_back();
          return t;
        };
        out += (i ? "," : "") + num(points[i].first) + "=" + num(points[i].second);
      }
      return out;
    }
  }
  return "linear";
}

double speedup_model::speedup(double p) const noexcept {
  if (p <= 0) return 0;
  switch (what) {
    case kind::linear: return p;
    case kind::amdahl: return 1.0 / ((1.0 - parallel_fraction) + parallel_fraction / p);
    case kind::table: {
      if (p <= points.front().first) return points.front().second * p / points.front().first;
      if (p >= points.back().first) return points.back().second;
      auto hi = std::lower_bound(points.begin(), points.end(), p,
                                 [](const std::pair<double, double>& pt, double v) { return pt.first < v; });
      auto lo = hi - 1;
      const double t = (p - lo->first) / (hi->first - lo->first);
      return lo->second + t * (hi->second - lo->second);
    }
  }
  return p;
}

double speedup_model::rescale(double seconds, std::size_t p, std::size_t q) const noexcept {
  const double sq = speedup(static_cast<double>(q));
  if (sq <= 0) return seconds;
  return seconds * speedup(static_cast<double>(p)) / sq;
}

}  // namespace aqs::core
