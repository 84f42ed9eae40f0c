// ftoken: a bearer token for aqsd's HTTP API, acting as you (like Slurm's
// `scontrol token`); or revoking tokens; or (--login) a one-time code that
// opens the dashboard signed in, so that no long-lived token goes into a
// URL. Over the Unix socket, where the kernel vouches for who you are. The
// token (or the dashboard's address with the code) is alone on the last line.
#include <charconv>
#include <cstdio>
#include <cstdlib>
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
    "       ftoken --login [--url URL] [--lifespan SECONDS] [--socket PATH]\n"
    "       ftoken --revoke ID | --revoke-all [--socket PATH]\n"
    "\n"
    "Prints a bearer token for aqsd's HTTP API (aqsd --http) that acts as you,\n"
    "alone on the last line: curl -H \"Authorization: Bearer $(ftoken | tail -n1)\" ...\n"
    "\n"
    "  --lifespan SECONDS  how long the token lasts (default: aqsd's --token-lifespan, 3600;\n"
    "                      at most 31 days)\n"
    "  --login             print the dashboard's address with a one-time login code\n"
    "                      (URL/#login=CODE, good once, for 60 s): opened in a browser it signs\n"
    "                      you in with a token of --lifespan, which never appears in an address\n"
    "  --url URL           the dashboard (aqsd --http), e.g. https://head:8443/ (default\n"
    "                      $AQS_HTTP_URL; without either only #login=CODE is printed)\n"
    "  --revoke ID         revoke your token with this id (root: anyone's)\n"
    "  --revoke-all        revoke every token you were given until now\n"
    "  --socket PATH       aqsd's socket (default $AQS_SOCKET, else /var/lib/aqs/aqsd.sock)\n"
    "  -h, --help          this text\n";

struct command_line {
  std::optional<std::int64_t> lifespan;
  std::optional<std::string> revoke;
  bool revoke_all = false;
  bool login = false;
  std::optional<std::string> url;
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
    } else if (a == "--login" && !inline_value) {
      c.login = true;
    } else if (a == "--url") {
      c.url = value();
      if (!c.url->starts_with("http://") && !c.url->starts_with("https://")) {
        throw cmdline::usage_error("--url must start with http:// or https://, got '" + *c.url + "'");
      }
    } else if (a == "--socket") {
      c.socket = value();
    } else {
      throw cmdline::usage_error("unknown argument '" + args[i] + "' (see ftoken --help)");
    }
  }
  if (static_cast<int>(c.revoke.has_value()) + static_cast<int>(c.revoke_all) + static_cast<int>(c.lifespan.has_value()) > 1) {
    throw cmdline::usage_error("--lifespan, --revoke and --revoke-all go one at a time");
  }
  if (c.login && (c.revoke || c.revoke_all)) throw cmdline::usage_error("--login does not go with --revoke or --revoke-all");
  if (c.url && !c.login) throw cmdline::usage_error("--url goes with --login");
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
    if (cmd.login) {
      protocol::issue_token it{c.next_id(), cmd.lifespan};
      it.login = true;
      const auto r = c.ask(it);
      std::string url = cmd.url.value_or(std::getenv("AQS_HTTP_URL") != nullptr ? std::getenv("AQS_HTTP_URL") : "");
      if (const auto hash = url.find('#'); hash != std::string::npos) url.resize(hash);
      if (!url.empty() && !url.ends_with("/")) url += "/";
      std::printf("login code for %s (uid %lld), good once, until %s: open in a browser\n%s#login=%s\n",
                  r.user.c_str(), static_cast<long long>(r.uid), utc(r.expires_at).c_str(), url.c_str(),
                  r.token.c_str());
      return 0;
    }
    const auto r = c.ask(protocol::issue_token{c.next_id(), cmd.lifespan});
    std::printf("token %s for %s (uid %lld), expires %s\n%s\n", r.token_id.c_str(), r.user.c_str(),
                static_cast<long long>(r.uid), utc(r.expires_at).c_str(), r.token.c_str());
    return 0;
  });
}
