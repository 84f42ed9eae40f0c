// ftoken: a bearer token for aqsd's HTTP API, acting as you (like Slurm's
// `scontrol token`); or revoking tokens. Over the Unix socket, where the
// kernel vouches for who you are. The token is alone on the last line.
#include <charconv>
#include <cstdio>
#include <ctime>
#include <optional>
#include <string>
#include <vector>

#include "client/client_connection.hpp"
#include "cmdline/run_command.hpp"
#include "cmdline/usage_error.hpp"

using namespace aqs;

namespace {

constexpr const char* k_usage =
    "usage: ftoken [--lifespan SECONDS] [--socket PATH]\n"
    "       ftoken --revoke ID | --revoke-all [--socket PATH]\n"
    "\n"
    "Prints a bearer token for aqsd's HTTP API (aqsd --http) that acts as you,\n"
    "alone on the last line: curl -H \"Authorization: Bearer $(ftoken | tail -n1)\" ...\n"
    "\n"
    "  --lifespan SECONDS  how long the token lasts (default: aqsd's --token-lifespan, 3600;\n"
    "                      at most 31 days)\n"
    "  --revoke ID         revoke your token with this id (root: anyone's)\n"
    "  --revoke-all        revoke every token you were given until now\n"
    "  --socket PATH       aqsd's socket (default $AQS_SOCKET, else /var/lib/aqs/aqsd.sock)\n"
    "  -h, --help          this text\n";

struct command_line {
  std::optional<std::int64_t> lifespan;
  std::optional<std::string> revoke;
  bool revoke_all = false;
  std::optional<std::string> socket;
  bool help = false;
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
      if (inline_value) return *inline_value;
      if (i + 1 >= args.size()) throw cmdline::usage_error(a + " needs a value");
      return args[++i];
    };
    if (a == "-h" || a == "--help") {
      c.help = true;
    } else if (a == "--lifespan") {
      const std::string v = value();
      std::int64_t n = 0;
      const auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
      if (v.empty() || ec != std::errc{} || p != v.data() + v.size() || n < 1 || n > protocol::k_max_token_lifespan_s) {
        throw cmdline::usage_error("--lifespan must be a number of seconds in 1.." +
                                   std::to_string(protocol::k_max_token_lifespan_s) + ", got '" + v + "'");
      }
      c.lifespan = n;
    } else if (a == "--revoke") {
      c.revoke = value();
    } else if (a == "--revoke-all" && !inline_value) {
      c.revoke_all = true;
    } else if (a == "--socket") {
      c.socket = value();
    } else {
      throw cmdline::usage_error("unknown argument '" + args[i] + "' (see ftoken --help)");
    }
  }
  if (static_cast<int>(c.revoke.has_value()) + static_cast<int>(c.revoke_all) + static_cast<int>(c.lifespan.has_value()) > 1) {
    throw cmdline::usage_error("--lifespan, --revoke and --revoke-all go one at a time");
  }
  return c;
}

std::string utc(std::int64_t t) {
  const std::time_t tt = static_cast<std::time_t>(t);
  std::tm tm{};
  ::gmtime_r(&tt, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  return client::run_command("ftoken", [&] {
    const command_line cmd = parse(std::vector<std::string>(argv + 1, argv + argc));
    if (cmd.help) {
      std::fputs(k_usage, stdout);
      return 0;
    }
    client::connection c(client::socket_path(cmd.socket));
    if (cmd.revoke || cmd.revoke_all) {
      c.call(protocol::revoke_token{c.next_id(), cmd.revoke, cmd.revoke_all});
      std::printf("%s\n", cmd.revoke_all ? "revoked every token you were given until now"
                                         : ("revoked token " + *cmd.revoke).c_str());
      return 0;
    }
    const auto r = c.ask(protocol::issue_token{c.next_id(), cmd.lifespan});
    std::printf("token %s for %s (uid %lld), expires %s\n%s\n", r.token_id.c_str(), r.user.c_str(),
                static_cast<long long>(r.uid), utc(r.expires_at).c_str(), r.token.c_str());
    return 0;
  });
}
