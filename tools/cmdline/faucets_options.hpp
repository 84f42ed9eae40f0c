// faucets_options: the options with which fsub, fjobs and fkill talk to a
// Faucets server (faucetsd, docs/user-guide.md "Submitting through a Faucets
// server") instead of this cluster's aqsd. Parsing and checks only (part of
// aqs::cmdline: no sockets, no environment); the environment is read and the
// server asked in faucets_commands.hpp.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace aqs::cmdline {

//   -M, --clusters NAME     fsub: auto (the server chooses) or a cluster's name;
//                           fjobs: all or a cluster's name; fkill: either
//   --faucets URL           the server (else $AQS_FAUCETS)
//   --faucets-ca FILE       its CA certificate (else $AQS_FAUCETS_CA, else the system's)
//   --token-file FILE       the token's file when $AQS_TOKEN is unset
//   --broker NAME           fsub: rank the clusters with the server's plugin NAME
//                           (where the admin allows it: faucetsd --allow-job-plugins)
// Any of -M or --faucets sends the command through the server; --faucets-ca
// and --token-file go with one of them.
// fsub's QoS contract through a Faucets server (docs/user-guide.md
// "Contracts"): --deadline WHEN (sbatch --begin's forms: now+30minutes,
// 16:00, 2026-12-01T08:00), --max-price CREDITS (per processor-second),
// --value CREDITS, --value-decay SECONDS (after the deadline the value falls
// to 0 over this; default 0: at once), --best-effort (run even if no
// cluster can finish by the deadline). The first three go together.
struct contract_options {
  std::optional<std::int64_t> deadline;  // Unix seconds
  std::optional<double> max_price, value, decay_s;
  bool best_effort = false;
  bool given() const noexcept { return deadline || max_price || value || decay_s || best_effort; }
  friend bool operator==(const contract_options&, const contract_options&) = default;
};

struct faucets_options {
  std::optional<std::string> cluster;     // -M as given
  std::optional<std::string> url;         // --faucets
  std::optional<std::string> ca_file;     // --faucets-ca
  std::optional<std::string> token_file;  // --token-file
  std::optional<std::string> broker;      // fsub --broker: the server's broker plugin for this job
  contract_options contract;              // fsub only
  // fsub --stage-in PATH (repeatable): files (or directories, walked) under
  // the submit directory sent with the job to its own directory on the
  // cluster (docs/user-guide.md "Staged files").
  std::vector<std::string> stage_in;
  // Whether the command goes through a Faucets server.
  bool used() const noexcept { return cluster.has_value() || url.has_value(); }
  friend bool operator==(const faucets_options&, const faucets_options&) = default;
};

// What -M may name for each command.
enum class cluster_choice {
  submit,  // auto or NAME (fsub)
  list,    // all or NAME (fjobs)
  any,     // auto, all or NAME (fkill: ignored there; the ids are the server's)
};

// Checks the options of a command line that may go through a server: the
// -M value (one name of letters, digits, '.', '_', '-', at most 64; Slurm's
// lists "a,b" are refused), --faucets-ca/--token-file without -M or
// --faucets, and --socket with them (aqsd's socket and a Faucets server are
// two different ways), contract options without -M or --faucets, or
// without all of --deadline, --max-price and --value. `cmd` names the
// command in messages. Throws usage_error.
void check_faucets_options(const faucets_options& o, cluster_choice what, bool socket_given, std::string_view cmd);

// Lines for the --help texts (each ends in '\n').
std::string faucets_usage(cluster_choice what);

}  // namespace aqs::cmdline
