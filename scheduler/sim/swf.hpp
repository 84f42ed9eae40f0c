// swf: reads Standard Workload Format logs, plain or gzip-compressed, as real files are.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace aqs::sim {

// One job line of an SWF file, the fields the simulator uses (-1 = unknown).
struct swf_record {
  std::size_t line = 0;  // 1-based line number in the file
  long long id = -1;
  double submit = -1;         // field 2
  double wait = -1;           // field 3
  double run = -1;            // field 4
  long long alloc_procs = -1;  // field 5
  long long req_procs = -1;    // field 8
  double req_time = -1;        // field 9
  long long status = -1;       // field 11
  long long user = -1;         // field 12
};

struct swf_error {
  std::size_t line;
  std::string reason;
};

struct swf_trace {
  std::optional<long long> max_procs;  // "; MaxProcs: N" header
  std::vector<swf_record> jobs;
  std::size_t malformed = 0;
  std::vector<swf_error> errors;  // the first few malformed lines, for the report
};

// Parses SWF text: ';' header lines (MaxProcs is read), blank lines, leading
// spaces, tabs and runs of spaces. A job line must have 18 numeric fields;
// any other line is counted as malformed (with its line number and why), never
// fatal. Keeps at most `max_errors` error records.
swf_trace parse_swf(const std::string& text, std::size_t max_errors = 20);

// Reads a file, gzip-compressed or plain (zlib detects which), and parses it.
// Throws std::runtime_error naming the file when it cannot be opened or read.
swf_trace read_swf(const std::string& path, std::size_t max_errors = 20);

}  // namespace aqs::sim
