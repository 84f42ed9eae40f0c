// events: a strict line parser for the suspend/resume/range trace extension.
#include "sim/events.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace aqs::sim {

std::string_view to_string(trace_event::kind k) noexcept {
  switch (k) {
    case trace_event::kind::suspend: return "suspend";
    case trace_event::kind::resume: return "resume";
    case trace_event::kind::range: return "range";
  }
  return "?";
}

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

std::string shown(std::string_view token) { return "'" + std::string(token.substr(0, 40)) + "'"; }

// A whole number, digits only (no sign, no exponent), below 2^53 so that
// it survives the trip through a double elsewhere.
bool whole(std::string_view token, std::uint64_t& out) {
  if (token.empty() || token.size() > 15) return false;
  std::uint64_t v = 0;
  for (char c : token) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<std::uint64_t>(c - '0');
  }
  out = v;
  return true;
}

// Returns the reason the line is bad, or "" when it is good (or empty).
std::string parse_line(std::string_view line, std::size_t number, event_file& f) {
  if (std::size_t hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
  std::vector<std::string_view> tok;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && is_space(line[i])) ++i;
    std::size_t j = i;
    while (j < line.size() && !is_space(line[j])) ++j;
    if (j > i) tok.emplace_back(line.substr(i, j - i));
    i = j;
  }
  if (tok.empty()) return "";
  if (tok.size() < 3) return std::to_string(tok.size()) + " fields, expected TIME JOB EVENT [MIN MAX]";
  trace_event e;
  e.line = number;
  std::string t(tok[0]);
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(t.c_str(), &end);
  if (end != t.c_str() + t.size() || errno == ERANGE || !std::isfinite(v) || v < 0 || v > 1e15) {
    return "TIME " + shown(tok[0]) + " is not a number of seconds >= 0";
  }
  e.time = v;
  if (!whole(tok[1], e.job)) return "JOB " + shown(tok[1]) + " is not a job number";
  std::size_t want = 3;
  if (tok[2] == "suspend") {
    e.what = trace_event::kind::suspend;
  } else if (tok[2] == "resume") {
    e.what = trace_event::kind::resume;
  } else if (tok[2] == "range") {
    e.what = trace_event::kind::range;
    want = 5;
  } else {
    return "unknown event " + shown(tok[2]) + " (known: suspend, resume, range)";
  }
  if (tok.size() != want) {
    return std::string(tok[2]) + " takes " + (want == 5 ? "TIME JOB range MIN MAX" : "TIME JOB " + std::string(tok[2])) +
           ", got " + std::to_string(tok.size()) + " fields";
  }
  if (e.what == trace_event::kind::range) {
    std::uint64_t lo = 0, hi = 0;
    if (!whole(tok[3], lo) || !whole(tok[4], hi) || lo < 1 || hi < lo) {
      return "range needs whole numbers 1 <= MIN <= MAX, got " + shown(tok[3]) + " " + shown(tok[4]);
    }
    e.min_pe = static_cast<std::size_t>(lo);
    e.max_pe = static_cast<std::size_t>(hi);
  }
  f.events.push_back(e);
  return "";
}

}  // namespace

event_file parse_events(std::string_view text, std::size_t max_errors) {
  event_file f;
  std::size_t number = 0, pos = 0;
  while (pos < text.size()) {
    std::size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    std::string why = parse_line(text.substr(pos, nl - pos), ++number, f);
    if (!why.empty()) {
      ++f.malformed;
      if (f.errors.size() < max_errors) f.errors.push_back({number, std::move(why)});
    }
    pos = nl + 1;
  }
  return f;
}

event_file read_events(const std::string& path, std::size_t max_errors) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path + ": " + std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw std::runtime_error("cannot read " + path);
  return parse_events(text.str(), max_errors);
}

}  // namespace aqs::sim
