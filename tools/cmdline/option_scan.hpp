// option_scan: the walk over a command line that the commands' option
// scanners share (fkill, fjobs, fnodes and fctl in commands.cpp; the
// Slurm-compatible commands in slurm/slurm_commands.cpp, which read their
// option words getopt_long's way): options anywhere, "--" makes the rest
// positional, "-" and words not starting with '-' are positionals.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace aqs::cmdline {

struct scanned_words {
  std::vector<std::pair<std::string, std::string>> options;  // the scanner's name for the option, value
  std::vector<std::string> positionals;
};

// on_long(out, i) reads the word args[i] "--NAME[=VALUE]" and on_short(out, i)
// the word "-X..." into out.options; either may take the next word as the
// option's value by advancing i.
template <class OnLong, class OnShort>
scanned_words scan_words(std::span<const std::string> args, OnLong&& on_long, OnShort&& on_short) {
  scanned_words out;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& w = args[i];
    if (w == "--") {
      out.positionals.insert(out.positionals.end(), args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());
      break;
    }
    if (w.size() > 2 && w.starts_with("--")) {
      on_long(out, i);
    } else if (w.size() >= 2 && w[0] == '-') {
      on_short(out, i);
    } else {
      out.positionals.push_back(w);
    }
  }
  return out;
}

}  // namespace aqs::cmdline
