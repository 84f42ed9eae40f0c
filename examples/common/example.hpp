// example.hpp: what the example apps share that is not the point of either:
// stopping on an AQS error, the safe point, reading --name=value options, and
// rank 0's --out/--checksum output. The adaptive part of each app (what it
// registers, the loop around MPI_Migrate()) stays in the app.
//
// Include it before anything that includes mpi.h: it keeps the deprecated
// MPI C++ bindings out, as the runtime's own build does.
#pragma once

#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#ifndef MPICH_SKIP_MPICXX
#define MPICH_SKIP_MPICXX 1
#endif
#include <aqs/adaptive.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <string>
#include <string_view>

namespace example {

// What every message of the app starts with ("jacobi2d: ..."); main() sets it
// first thing.
inline const char* program_name = "example";

[[noreturn]] inline void fail(const char* what, const char* why) {
  std::fprintf(stderr, "%s: %s: %s\n", program_name, what, why);
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::abort();  // not reached
}

// Stops the whole job when an AQS call fails.
inline void check(int rc, const char* what) {
  if (rc != AQS_SUCCESS) fail(what, AQS_Error_string());
}

// The safe point. A failed expansion (AQS_ERR_SPAWN) leaves the job on its old
// ranks, which simply go on.
inline void migrate() {
  int rc = MPI_Migrate();
  if (rc != AQS_SUCCESS && rc != AQS_ERR_SPAWN) fail("MPI_Migrate", AQS_Error_string());
}

// One command-line argument, argv[i]: a flag (one of `flags`, exactly as
// given, value empty), or an option of `with_value` as --name=value or
// --name value (then its value is argv[i + 1] and i moves on to it). Returns
// false with a one-line reason in `err` for anything else, or for an option
// whose value is missing.
struct Option {
  std::string_view name, value;
};
inline bool read_option(int argc, char** argv, int& i, std::initializer_list<std::string_view> flags,
                        std::initializer_list<std::string_view> with_value, Option& o, std::string& err) {
  std::string_view arg = argv[i];
  o = Option{arg, {}};
  if (std::find(flags.begin(), flags.end(), arg) != flags.end()) return true;
  bool has_value = false;
  if (auto eq = arg.find('='); arg.starts_with("--") && eq != std::string_view::npos) {
    o.name = arg.substr(0, eq);
    o.value = arg.substr(eq + 1);
    has_value = true;
  }
  if (std::find(with_value.begin(), with_value.end(), o.name) == with_value.end()) {
    err = "unknown option '" + std::string(arg) + "' (try --help)";
    return false;
  }
  if (!has_value) {
    if (i + 1 >= argc) {
      err = "option " + std::string(o.name) + " needs a value";
      return false;
    }
    o.value = argv[++i];
  }
  return true;
}

// For --help (`err` empty) or a bad command line: rank 0 prints the usage on
// stdout, or the reason on stderr, and the app ends (MPI_Finalize) with exit
// status 0 or 2. main() returns what this returns.
inline int end_at_command_line(const char* usage, const std::string& err) {
  int world_rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  if (world_rank == 0) {
    if (err.empty())
      std::fputs(usage, stdout);
    else
      std::fprintf(stderr, "%s: %s\n", program_name, err.c_str());
  }
  MPI_Finalize();
  return err.empty() ? 0 : 2;
}

// A whole decimal integer in [min, max].
inline bool parse_int(std::string_view s, int64_t min, int64_t max, int64_t& v) {
  const char* end = s.data() + s.size();
  auto [p, ec] = std::from_chars(s.data(), end, v);
  return ec == std::errc() && p == end && v >= min && v <= max;
}

// Rank 0's --out and --checksum: the bytes of the final state, added in order,
// hashed with 64-bit FNV-1a and, when `path` is not empty, written there. A
// file that cannot be opened or written is said on stderr and makes finish()
// false, but the hashing goes on: rank 0 still receives every rank's part, so
// that no rank is left blocked.
class RawOutput {
public:
  explicit RawOutput(const std::string& path) : path_(path) {
    if (!path.empty() && !(f_ = std::fopen(path.c_str(), "wb"))) {
      std::fprintf(stderr, "%s: cannot open %s: %s\n", program_name, path.c_str(), std::strerror(errno));
      ok_ = false;
    }
  }
  ~RawOutput() {
    if (f_) std::fclose(f_);
  }
  RawOutput(const RawOutput&) = delete;
  RawOutput& operator=(const RawOutput&) = delete;

  void add(const void* data, size_t bytes) {
    const auto* b = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < bytes; ++i) {
      hash_ ^= b[i];
      hash_ *= 1099511628211ull;
    }
    if (f_ && std::fwrite(data, 1, bytes, f_) != bytes) {
      std::fprintf(stderr, "%s: cannot write %s: %s\n", program_name, path_.c_str(), std::strerror(errno));
      ok_ = false;
      std::fclose(f_);
      f_ = nullptr;
    }
  }
  // Closes the file; false if it could not be opened, written or closed.
  bool finish() {
    if (f_ && std::fclose(f_) != 0) {
      std::fprintf(stderr, "%s: cannot write %s: %s\n", program_name, path_.c_str(), std::strerror(errno));
      ok_ = false;
    }
    f_ = nullptr;
    return ok_;
  }
  uint64_t hash() const { return hash_; }

private:
  std::string path_;
  std::FILE* f_ = nullptr;
  bool ok_ = true;
  uint64_t hash_ = 14695981039346656037ull;
};

}  // namespace example
