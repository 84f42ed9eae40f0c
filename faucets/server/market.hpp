// market: the pure rules of faucetsd's market (docs/faucets.md "Contracts"
// and "Ledger"): a submission's contract as the users' API takes it, the
// owners table (who owns each cluster, each user's home cluster, each
// owner's debt limit), a finished job's charge, and the debt-limit rule.
// No I/O beyond reading the owners file; the clock comes in as `now`.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "broker/broker.hpp"

namespace aqs::faucets {

// A contract as stored with its job: the deadline absolute (Unix seconds),
// so that its terms can be worked out again at any later placement.
struct job_contract {
  double deadline = 0;  // Unix seconds
  double max_price = 0;  // credits per processor-second
  double value = 0;      // credits
  double decay_s = 0;    // after the deadline, value falls linearly to 0 over this
  bool best_effort = false;
  friend bool operator==(const job_contract&, const job_contract&) = default;
};
// The API's "contract" object: {"deadline": UNIX_SECONDS, "max_price": P,
// "value": V, "decay_s": D (default 0), "best_effort": B (default false)}.
// Every number finite, deadline after `now`, the others >= 0, no other key.
// Returns the contract, or the one-line reason it is refused:
//   "the contract's deadline is in the past (12 s ago)",
//   "the contract's max_price must be a number >= 0, not -1", ...
std::variant<job_contract, std::string> parse_contract(const nlohmann::json& j, double now);
nlohmann::json to_json(const job_contract& c);
// The terms the broker weighs, `now` being the placement's time.
contract_terms terms_at(const job_contract& c, double now);

// Credits are kept in whole micro-credits, so that entries add up exactly
// and balances sum to exactly zero.
inline constexpr std::int64_t k_micro = 1'000'000;
// processor-seconds x price, in micro-credits, rounded to the nearest.
// Throws std::invalid_argument for a negative or non-finite input, or an
// amount past 2^53 micro-credits.
std::int64_t charge_micro(double proc_seconds, double price);

// The admin's owners table (faucetsd --owners FILE), three words a line:
//   cluster NAME OWNER     the cluster's owner (earns when it runs others' jobs)
//   home    USER CLUSTER   the server user's home cluster ("*" for every user
//                          without a line of their own); its owner pays
//   limit   OWNER CREDITS  how far into debt OWNER may go before clusters of
//                          other owners refuse its users' work (CREDITS >= 0)
class owners_table {
public:
  owners_table() = default;
  // Throws std::runtime_error naming ORIGIN:LINE.
  static owners_table parse(const std::string& text, const std::string& origin);
  static owners_table load(const std::filesystem::path& file);

  std::optional<std::string> owner_of(const std::string& cluster) const;
  std::optional<std::string> home_of(const std::string& user) const;
  // The owner who pays for `user`'s jobs: the owner of their home cluster.
  std::optional<std::string> payer_of(const std::string& user) const;
  // Micro-credits; nullopt: no limit.
  std::optional<std::int64_t> limit_of(const std::string& owner) const;
  bool empty() const noexcept { return owners_.empty(); }

private:
  std::map<std::string, std::string> owners_;  // cluster -> owner
  std::map<std::string, std::string> homes_;   // user -> cluster
  std::map<std::string, std::int64_t> limits_; // owner -> micro-credits
};

// One ledger entry: what job `job_id` cost, from `payer` to `payee`.
struct ledger_entry {
  std::int64_t id = 0;  // set by the store
  std::int64_t job_id = 0;
  std::string time;     // set by the store (ISO 8601)
  std::string user, payer, payee, home_cluster, cluster;
  double proc_seconds = 0, price = 0;
  std::int64_t amount_micro = 0;
};
nlohmann::json to_json(const ledger_entry& e);

// The entry for job `job_id` of `user`, finished on `cluster` after
// `proc_seconds` at `price`: nullopt with `why` set when nothing moves (no
// home cluster or owner known, or the job ran on a cluster of its own owner).
std::optional<ledger_entry> entry_for(const owners_table& owners, std::int64_t job_id, const std::string& user,
                                      const std::string& cluster, double proc_seconds, double price, std::string* why);

// Why `cluster` refuses work from `user` whose paying owner has balance
// `balance_micro` (negative: in debt), or nullopt. Clusters of the payer's
// own owner never refuse it.
std::optional<std::string> debt_refusal(const owners_table& owners, const std::string& user, const std::string& cluster,
                                        std::int64_t balance_micro);

// "12.5" for 12500000 micro-credits; "-0.000001" for -1.
std::string credits_text(std::int64_t micro);

}  // namespace aqs::faucets
