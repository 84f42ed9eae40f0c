// events: the trace extension that makes jobs suspend, resume or change their range at given times.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sim/swf.hpp"

namespace aqs::sim {

// One line of an events file (docs/simulator.md, "Suspend, resume and range
// changes"):
//   TIME JOB suspend
//   TIME JOB resume
//   TIME JOB range MIN MAX
// TIME in the trace's seconds, JOB the SWF job number.
struct trace_event {
  enum class kind : unsigned char { suspend, resume, range };
  double time = 0;
  std::uint64_t job = 0;
  kind what = kind::suspend;
  std::size_t min_pe = 0, max_pe = 0;  // range
  std::size_t line = 0;                // 1-based line in the file (0: synthesised)
};

std::string_view to_string(trace_event::kind k) noexcept;

struct event_file {
  std::vector<trace_event> events;  // in file order
  std::size_t malformed = 0;
  std::vector<swf_error> errors;  // the first few bad lines, with why
};

// Parses an events file: '#' starts a comment (to the end of the line);
// blank lines, spaces, tabs and CRLF ends are accepted. A line with an
// unknown event, a wrong number of fields, a TIME that is not a finite
// number >= 0, a JOB that is not a whole number, or MIN/MAX not whole
// numbers with 1 <= MIN <= MAX is counted as malformed with its line number
// and why (at most `max_errors` kept); it is never an exception. Whether
// the job exists and may take the event is the simulator's business.
event_file parse_events(std::string_view text, std::size_t max_errors = 20);

// Reads and parses a file. Throws std::runtime_error naming the file when it
// cannot be opened or read.
event_file read_events(const std::string& path, std::size_t max_errors = 20);

}  // namespace aqs::sim
