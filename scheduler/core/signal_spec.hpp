// signal_spec: Slurm's --signal=[{R|B}:]SIG[@TIME]: which signal a job gets
// TIME seconds before its time limit, and whether only its batch shell gets
// it (B:) or its steps (everything it started) do. aqsd checks it at
// submission; the agent acts on it (tools/node/job_supervisor.hpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace aqs::core {

struct signal_spec {
  int signal = 0;                   // 1..64
  std::int64_t before_s = 60;       // seconds before the time limit (Slurm's default 60; 0..65535)
  bool batch_only = false;          // B: the batch shell alone
  friend bool operator==(const signal_spec&, const signal_spec&) = default;
};

// "USR1", "SIGUSR1", "usr1", "10", "B:USR1@90", "R:TERM", "RB:2@30". The
// error (one line, naming the text) when it is none of these.
std::variant<signal_spec, std::string> parse_signal_spec(std::string_view text);

// The spec among a job's recorded Slurm options ("signal=B:USR1@90"; the
// last one given counts), nullopt when there is none or it is malformed.
std::optional<signal_spec> signal_spec_of(const std::vector<std::string>& recorded);

// A signal by name ("USR1", "SIGUSR1", any case) or number; nullopt if neither.
std::optional<int> signal_number(std::string_view name);

}  // namespace aqs::core
