// bench_results: how an in-process benchmark writes its results file,
// written once. Header only, on the include path of every benchmark.
#pragma once

#include <fmt/core.h>

#include <fstream>
#include <string>

namespace aqs::bench {

// Writes `json` to <results>/<name>.json. 0 when written; otherwise 1 (the
// program's exit status) after saying so on stderr as bench_<name>.
inline int write_results(const std::string& results, const std::string& name, const std::string& json) {
  std::ofstream out(results + "/" + name + ".json");
  out << json;
  if (!out) {
    fmt::print(stderr, "bench_{}: cannot write {}/{}.json\n", name, results, name);
    return 1;
  }
  return 0;
}

}  // namespace aqs::bench
