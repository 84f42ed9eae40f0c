// settings: parsing, applying and showing a daemon's tunable numbers.
#include "core/settings.hpp"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <stdexcept>

namespace aqs::core {

namespace {

bool same_key(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  }
  return true;
}

setting make(std::string_view key, std::string_view flag, setting::unit kind, std::string_view help,
             setting::target_ptr target, double least, double most) {
  setting s;
  s.key = key;
  s.flag = flag;
  s.kind = kind;
  s.help = help;
  s.target = target;
  s.least = least;
  s.most = most;
  return s;
}

double current(const setting& s) {
  return std::visit(
      [](auto* p) -> double {
        using T = std::remove_pointer_t<decltype(p)>;
        if constexpr (std::is_same_v<T, std::chrono::milliseconds>) {
          return static_cast<double>(p->count()) / 1000.0;
        } else {
          return static_cast<double>(*p);
        }
      },
      s.target);
}

// A number as short as it reads: 5, 0.5, 1e+06 never (whole numbers in full).
std::string plain(double v) {
  if (v == std::floor(v) && std::fabs(v) < 1e15) return std::to_string(static_cast<std::int64_t>(v));
  std::string t = std::to_string(v);
  while (!t.empty() && t.back() == '0') t.pop_back();
  if (!t.empty() && t.back() == '.') t.pop_back();
  return t;
}

std::string bytes_text(double v) {
  const auto n = static_cast<std::int64_t>(v);
  if (n >= (std::int64_t{1} << 30) && n % (std::int64_t{1} << 30) == 0) return std::to_string(n >> 30) + "G";
  if (n >= (std::int64_t{1} << 20) && n % (std::int64_t{1} << 20) == 0) return std::to_string(n >> 20) + "M";
  if (n >= 1024 && n % 1024 == 0) return std::to_string(n >> 10) + "K";
  return std::to_string(n);
}

std::string bound_text(const setting& s, double v) { return s.kind == setting::unit::bytes ? bytes_text(v) : plain(v); }

}  // namespace

setting count_setting(std::string_view key, std::string_view flag, std::size_t& v, std::string_view help, double least,
                      double most) {
  return make(key, flag, setting::unit::count, help, &v, least, most);
}
setting count_setting(std::string_view key, std::string_view flag, std::int64_t& v, std::string_view help,
                      double least, double most) {
  return make(key, flag, setting::unit::count, help, &v, least, most);
}
setting bytes_setting(std::string_view key, std::string_view flag, std::size_t& v, std::string_view help, double least,
                      double most) {
  return make(key, flag, setting::unit::bytes, help, &v, least, most);
}
setting bytes_setting(std::string_view key, std::string_view flag, std::int64_t& v, std::string_view help,
                      double least, double most) {
  return make(key, flag, setting::unit::bytes, help, &v, least, most);
}
setting seconds_setting(std::string_view key, std::string_view flag, std::chrono::milliseconds& v,
                        std::string_view help, double least, double most) {
  return make(key, flag, setting::unit::seconds, help, &v, least, most);
}

setting number_setting(std::string_view key, std::string_view flag, double& v, std::string_view help, double least,
                       double most) {
  return make(key, flag, setting::unit::number, help, &v, least, most);
}

std::string_view setting_name(const setting& s) { return s.key.empty() ? s.flag : s.key; }

std::string setting_text(const setting& s) {
  return s.kind == setting::unit::bytes ? bytes_text(current(s)) : plain(current(s));
}

std::string setting_help(const setting& s) {
  std::string h = std::string(s.help) + " (default " + setting_text(s);
  if (!s.key.empty()) h += "; aqs.conf " + std::string(s.key) + "=";
  return h + ")";
}

std::variant<double, std::string> setting_value(const setting& s, std::string_view text) {
  const std::string t(text);
  const std::string name(setting_name(s));
  const std::string range = bound_text(s, s.least) + " to " + bound_text(s, s.most);
  if (s.kind == setting::unit::seconds) {
    char* end = nullptr;
    const double d = std::strtod(t.c_str(), &end);
    if (t.empty() || end != t.c_str() + t.size() || !(d >= s.least) || d > s.most) {
      return name + " takes seconds (" + (s.least > 0 ? "more than 0" : std::string("0")) + " to " +
             plain(s.most) + "), not '" + t + "'";
    }
    return d;
  }
  if (s.kind == setting::unit::number) {
    char* end = nullptr;
    const double d = std::strtod(t.c_str(), &end);
    if (t.empty() || end != t.c_str() + t.size() || !std::isfinite(d) || !(d >= s.least) || d > s.most) {
      return name + " takes a number from " + range + ", not '" + t + "'";
    }
    return d;
  }
  std::string_view v = text;
  double mult = 1;
  if (s.kind == setting::unit::bytes && !v.empty()) {
    switch (std::tolower(static_cast<unsigned char>(v.back()))) {
      case 'k': mult = 1024.0; break;
      case 'm': mult = 1024.0 * 1024; break;
      case 'g': mult = 1024.0 * 1024 * 1024; break;
      default: break;
    }
    if (mult != 1) v.remove_suffix(1);
  }
  std::uint64_t n = 0;
  const auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  const double value = static_cast<double>(n) * mult;
  if (v.empty() || ec != std::errc{} || p != v.data() + v.size() || value < s.least || value > s.most) {
    return name + (s.kind == setting::unit::bytes ? " takes a size in bytes (K, M, G) from " : " takes a whole number from ") +
           range + ", not '" + t + "'";
  }
  return value;
}

void store_setting(const setting& s, double value) {
  std::visit(
      [value](auto* p) {
        using T = std::remove_pointer_t<decltype(p)>;
        if constexpr (std::is_same_v<T, std::chrono::milliseconds>) {
          *p = std::chrono::milliseconds(static_cast<std::int64_t>(value * 1000 + 0.5));
        } else if constexpr (std::is_same_v<T, double>) {
          *p = value;
        } else {
          *p = static_cast<T>(value);
        }
      },
      s.target);
}

std::optional<std::string> apply_typed_flags(std::vector<setting>& table) {
  for (const auto& s : table) {
    if (s.typed.empty()) continue;
    const auto v = setting_value(s, s.typed);
    if (const auto* why = std::get_if<std::string>(&v)) return std::string(s.flag) + ": " + *why;
    store_setting(s, std::get<double>(v));
  }
  return std::nullopt;
}

std::string take_setting_lines(std::string_view text, std::string_view file, std::vector<setting>& table, bool apply) {
  auto find = [&](std::string_view key) -> setting* {
    for (auto& s : table) {
      if (!s.key.empty() && same_key(s.key, key)) return &s;
    }
    return nullptr;
  };
  std::string rest;
  rest.reserve(text.size());
  std::size_t line_no = 0;
  while (!text.empty()) {
    const auto nl = text.find('\n');
    const std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    ++line_no;
    const std::string_view body = line.substr(0, line.find('#'));
    std::vector<std::pair<setting*, std::string_view>> words;
    std::string_view other;
    std::size_t i = 0;
    while (i < body.size()) {
      while (i < body.size() && std::isspace(static_cast<unsigned char>(body[i]))) ++i;
      std::size_t j = i;
      while (j < body.size() && !std::isspace(static_cast<unsigned char>(body[j]))) ++j;
      if (j > i) {
        const std::string_view word = body.substr(i, j - i);
        const auto eq = word.find('=');
        if (setting* s = find(word.substr(0, eq))) {
          words.emplace_back(s, eq == std::string_view::npos ? std::string_view{} : word.substr(eq + 1));
        } else if (other.empty()) {
          other = word;
        }
      }
      i = j;
    }
    if (words.empty()) {
      rest.append(line);
      if (nl != std::string_view::npos) rest.push_back('\n');
      continue;
    }
    const std::string where = std::string(file) + ":" + std::to_string(line_no) + ": ";
    if (!other.empty()) {
      throw std::invalid_argument(where + std::string(words.front().first->key) +
                                  "= and the other limits go on lines of their own, not with '" + std::string(other) +
                                  "'");
    }
    for (const auto& [s, value] : words) {
      const auto v = setting_value(*s, value);
      if (const auto* why = std::get_if<std::string>(&v)) throw std::invalid_argument(where + *why);
      if (apply && s->typed.empty()) store_setting(*s, std::get<double>(v));
    }
    if (nl != std::string_view::npos) rest.push_back('\n');  // the line stays, empty
  }
  return rest;
}

}  // namespace aqs::core
