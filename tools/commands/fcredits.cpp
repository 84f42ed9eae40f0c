// fcredits: the Faucets server's ledger (GET /api/v1/ledger): each cluster
// owner's balance of credits (earned running other owners' users' jobs,
// spent when its own users' jobs ran elsewhere), and the entries, each
// naming its job. Through the server like fjobs -M.
#include <cinttypes>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cmdline/run_command.hpp"
#include "cmdline/usage_error.hpp"
#include "faucets_client/faucets_api.hpp"

using namespace aqs;
namespace fc = aqs::client::faucets;

namespace {

constexpr const char* k_usage =
    "usage: fcredits [--entries] [--owner NAME] [--limit N] [--json]\n"
    "                [--faucets URL] [--faucets-ca FILE] [--token-file FILE]\n"
    "\n"
    "Shows the Faucets server's ledger: every cluster owner's balance of credits\n"
    "(earned when its clusters ran other owners' users' jobs, spent when its users'\n"
    "jobs ran elsewhere; they sum to zero), and with --entries the entries, each\n"
    "naming its job (root sees every entry; a user, those of their own jobs).\n"
    "\n"
    "  --entries          list the entries too (newest first)\n"
    "  --owner NAME       only the entries NAME pays or earns\n"
    "  --limit N          at most N entries (default 1000)\n"
    "  --json             the server's answer: {balances, total_micro, entries}\n"
    "  --faucets URL      the server (default $AQS_FAUCETS)\n"
    "  --faucets-ca FILE  its CA certificate (default $AQS_FAUCETS_CA, else the system's)\n"
    "  --token-file FILE  the token, when $AQS_TOKEN is unset (default ~/.aqs/faucets-token)\n"
    "  -h, --help         this text\n";

struct command_line {
  bool entries = false, json = false, help = false;
  std::optional<std::string> owner, url, ca, token_file;
  std::optional<std::int64_t> limit;
};

command_line parse(const std::vector<std::string>& args) {
  command_line c;
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string a = args[i];
    std::optional<std::string> inline_value;
    if (const auto eq = a.find('='); a.starts_with("--") && eq != std::string::npos) {
      inline_value = a.substr(eq + 1);
      a = a.substr(0, eq);
    }
    auto value = [&]() -> std::string {
      std::string v;
      if (inline_value) {
        v = *inline_value;
      } else {
        if (i + 1 >= args.size()) throw cmdline::usage_error(a + " needs a value");
        v = args[++i];
      }
      if (v.empty()) throw cmdline::usage_error("empty value for " + a);
      return v;
    };
    if (a == "-h" || a == "--help") {
      c.help = true;
    } else if (a == "--entries" && !inline_value) {
      c.entries = true;
    } else if (a == "--json" && !inline_value) {
      c.json = true;
    } else if (a == "--owner") {
      c.owner = value();
    } else if (a == "--limit") {
      const std::string v = value();
      std::int64_t n = 0;
      bool ok = v.size() <= 6;
      for (char ch : v) ok = ok && ch >= '0' && ch <= '9';
      if (ok) n = std::stoll(v);
      if (!ok || n < 1 || n > 100000) throw cmdline::usage_error("--limit must be a number in 1..100000, not '" + v + "'");
      c.limit = n;
    } else if (a == "--faucets") {
      c.url = value();
    } else if (a == "--faucets-ca") {
      c.ca = value();
    } else if (a == "--token-file") {
      c.token_file = value();
    } else {
      throw cmdline::usage_error("unknown argument '" + args[i] + "' (see fcredits --help)");
    }
  }
  return c;
}

// "12.5", "-3", from micro-credits.
std::string credits(std::int64_t micro) {
  const bool neg = micro < 0;
  const std::uint64_t m = neg ? static_cast<std::uint64_t>(-(micro + 1)) + 1 : static_cast<std::uint64_t>(micro);
  std::string frac = std::to_string(m % 1000000);
  frac = std::string(6 - frac.size(), '0') + frac;
  while (!frac.empty() && frac.back() == '0') frac.pop_back();
  return (neg ? "-" : "") + std::to_string(m / 1000000) + (frac.empty() ? "" : "." + frac);
}

}  // namespace

int main(int argc, char** argv) {
  return client::run_command("fcredits", [&] {
    const command_line cmd = parse(std::vector<std::string>(argv + 1, argv + argc));
    if (cmd.help) {
      std::fputs(k_usage, stdout);
      return 0;
    }
    fc::client c(fc::resolve_client_options(cmd.url, cmd.ca, cmd.token_file, fc::environment::of_process()));
    std::string target = "/api/v1/ledger?limit=" + std::to_string(cmd.limit.value_or(1000));
    if (cmd.owner) target += "&owner=" + fc::url_encode(*cmd.owner);
    const nlohmann::json r = c.call("GET", target);
    if (!r.is_object() || !r.contains("balances") || !r.contains("entries")) {
      throw std::runtime_error("the faucets server's ledger answer has no balances or entries");
    }
    if (cmd.json) {
      std::printf("%s\n", r.dump().c_str());
      return 0;
    }
    std::printf("%-20s %16s\n", "OWNER", "BALANCE");
    for (const auto& [owner, b] : r["balances"].items()) {
      std::printf("%-20s %16s\n", owner.c_str(), credits(b.value("balance_micro", std::int64_t{0})).c_str());
    }
    std::printf("%-20s %16s\n", "(total)", credits(r.value("total_micro", std::int64_t{0})).c_str());
    if (cmd.entries) {
      std::printf("\n%-6s %-8s %-10s %-12s %-12s %-12s %12s %10s %14s  %s\n", "ENTRY", "JOB", "USER", "PAYER", "PAYEE",
                  "CLUSTER", "PROC_SEC", "PRICE", "AMOUNT", "TIME");
      for (const auto& e : r["entries"]) {
        std::printf("%-6" PRId64 " %-8" PRId64 " %-10s %-12s %-12s %-12s %12.3f %10.6g %14s  %s\n",
                    e.value("id", std::int64_t{0}), e.value("job_id", std::int64_t{0}),
                    e.value("user", "").c_str(), e.value("payer", "").c_str(), e.value("payee", "").c_str(),
                    e.value("cluster", "").c_str(), e.value("proc_seconds", 0.0), e.value("price", 0.0),
                    credits(e.value("amount_micro", std::int64_t{0})).c_str(), e.value("time", "").c_str());
      }
    }
    return 0;
  });
}
