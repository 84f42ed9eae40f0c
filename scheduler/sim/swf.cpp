// swf: tolerant line parser plus a zlib reader for .swf and .swf.gz alike.
#include "sim/swf.hpp"

#include <zlib.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string_view>

namespace aqs::sim {

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

void note(swf_trace& t, std::size_t line, std::string reason, std::size_t max_errors) {
  ++t.malformed;
  if (t.errors.size() < max_errors) t.errors.push_back({line, std::move(reason)});
}

void parse_header(swf_trace& t, std::string_view body) {
  // "; MaxProcs: 100" (case as in the archive; spaces are optional)
  std::size_t k = body.find("MaxProcs:");
  if (k == std::string_view::npos) return;
  std::string rest(body.substr(k + 9));
  char* end = nullptr;
  long long v = std::strtoll(rest.c_str(), &end, 10);
  if (end != rest.c_str() && v > 0) t.max_procs = v;
}

void parse_line(swf_trace& t, std::string_view line, std::size_t number, std::size_t max_errors) {
  std::size_t i = 0;
  while (i < line.size() && is_space(line[i])) ++i;
  if (i == line.size()) return;  // blank
  if (line[i] == ';') {
    parse_header(t, line.substr(i + 1));
    return;
  }
  double f[18];
  std::size_t n = 0;
  while (i < line.size()) {
    std::size_t j = i;
    while (j < line.size() && !is_space(line[j])) ++j;
    if (n == 18) {
      note(t, number, "more than 18 fields", max_errors);
      return;
    }
    std::string token(line.substr(i, j - i));
    char* end = nullptr;
    errno = 0;
    double v = std::strtod(token.c_str(), &end);
    if (end != token.c_str() + token.size() || errno == ERANGE || !std::isfinite(v)) {
      note(t, number, "field " + std::to_string(n + 1) + " is not a number: '" + token.substr(0, 40) + "'",
           max_errors);
      return;
    }
    if (std::fabs(v) > 1e15) {  // also keeps the integer conversions below defined
      note(t, number, "field " + std::to_string(n + 1) + " is out of range: '" + token.substr(0, 40) + "'", max_errors);
      return;
    }
    f[n++] = v;
    i = j;
    while (i < line.size() && is_space(line[i])) ++i;
  }
  if (n != 18) {
    note(t, number, std::to_string(n) + " fields, expected 18", max_errors);
    return;
  }
  swf_record r;
  r.line = number;
  r.id = static_cast<long long>(f[0]);
  r.submit = f[1];
  r.wait = f[2];
  r.run = f[3];
  r.alloc_procs = static_cast<long long>(f[4]);
  r.req_procs = static_cast<long long>(f[7]);
  r.req_time = f[8];
  r.status = static_cast<long long>(f[10]);
  r.user = static_cast<long long>(f[11]);
  if (r.submit < 0) {
    note(t, number, "negative submit time", max_errors);
    return;
  }
  t.jobs.push_back(r);
}

}  // namespace

swf_trace parse_swf(const std::string& text, std::size_t max_errors) {
  swf_trace t;
  std::size_t number = 0, pos = 0;
  while (pos < text.size()) {
    std::size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    parse_line(t, std::string_view(text).substr(pos, nl - pos), ++number, max_errors);
    pos = nl + 1;
  }
  return t;
}

swf_trace read_swf(const std::string& path, std::size_t max_errors) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) throw std::runtime_error("cannot open " + path + ": " + std::strerror(errno));
  std::string text;
  char buf[1 << 16];
  int n;
  while ((n = gzread(f, buf, sizeof buf)) > 0) text.append(buf, static_cast<std::size_t>(n));
  int err = 0;
  std::string msg = n < 0 ? gzerror(f, &err) : "";
  gzclose(f);
  if (n < 0) throw std::runtime_error("cannot read " + path + ": " + msg);
  return parse_swf(text, max_errors);
}

}  // namespace aqs::sim
