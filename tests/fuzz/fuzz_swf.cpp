// Fuzz target for the SWF trace parser: any text gives records and counted malformed lines, never a crash.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "sim/swf.hpp"

using namespace aqs::sim;

namespace {
[[noreturn]] void violated() { std::abort(); }
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  constexpr std::size_t max_errors = 5;
  const swf_trace t = parse_swf(text, max_errors);

  std::size_t lines = 0;
  for (const char c : text) lines += c == '\n' ? 1 : 0;
  if (!text.empty() && text.back() != '\n') ++lines;

  if (t.errors.size() > max_errors || t.errors.size() > t.malformed) violated();
  if (t.jobs.size() + t.malformed > lines) violated();
  if (t.max_procs && *t.max_procs <= 0) violated();
  std::size_t last = 0;
  for (const auto& r : t.jobs) {
    if (r.line <= last || r.line > lines) violated();
    last = r.line;
    if (!(r.submit >= 0) || !std::isfinite(r.wait) || !std::isfinite(r.run) || !std::isfinite(r.req_time)) {
      violated();
    }
  }
  for (const auto& e : t.errors) {
    if (e.line == 0 || e.line > lines || e.reason.empty()) violated();
  }
  return 0;
}
