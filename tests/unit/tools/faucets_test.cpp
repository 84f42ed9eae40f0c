// Unit tests of fsub/fjobs/fkill through a Faucets server: the server's URL,
// where the token comes from, the one-line errors of HTTP answers, -M and
// --faucets on the command lines, and fjobs' tables of the server's jobs.
#include <doctest/doctest.h>

#include <ctime>

#include <fstream>
#include <string>
#include <vector>

#include "cmdline/commands.hpp"
#include "faucets_client/faucets_api.hpp"
#include "faucets_client/faucets_commands.hpp"
#include "cmdline/job_options.hpp"
#include "cmdline/usage_error.hpp"
#include "temp_dir.hpp"
#include "thrown.hpp"

using namespace aqs;
using namespace aqs::client;
using args = std::vector<std::string>;

namespace {

template <class E = faucets::error, class F>
std::string error_of(F&& f) {
  return aqs::test::thrown<E>(std::forward<F>(f));
}

void write_file(const std::filesystem::path& p, const std::string& text) {
  std::filesystem::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

}  // namespace

TEST_CASE("the server's URL: https anywhere, http only to this machine") {
  const auto u = faucets::parse_base_url("https://faucets.example.org:8443");
  CHECK(u.tls);
  CHECK(u.host == "faucets.example.org");
  CHECK(u.port == 8443);
  CHECK(u.prefix.empty());
  CHECK(u.text() == "https://faucets.example.org:8443");
  CHECK(faucets::parse_base_url("HTTPS://f.example/").port == 443);
  CHECK(faucets::parse_base_url("https://f.example/").prefix.empty());
  CHECK(faucets::parse_base_url("https://f.example:9/faucets/").prefix == "/faucets");
  CHECK(faucets::parse_base_url("https://f.example:9/faucets/").text() == "https://f.example:9/faucets");
  const auto v6 = faucets::parse_base_url("https://[2001:db8::1]:8443");
  CHECK(v6.host == "2001:db8::1");
  CHECK(v6.text() == "https://[2001:db8::1]:8443");

  for (const char* ok : {"http://127.0.0.1:8080", "http://localhost:8080", "http://[::1]:8080", "http://127.3.2.1",
                         "http://LOCALHOST:1"}) {
    CAPTURE(ok);
    CHECK_FALSE(faucets::parse_base_url(ok).tls);
  }
  CHECK(faucets::parse_base_url("http://127.0.0.1").port == 80);
  const std::string plain = error_of([] { faucets::parse_base_url("http://faucets.example.org:8080"); });
  CHECK(plain.find("refusing plain http:// to 'faucets.example.org'") == 0);
  CHECK(plain.find("use https://faucets.example.org:PORT") != std::string::npos);
  CHECK(error_of([] { faucets::parse_base_url("http://10.0.0.1:80"); }).find("refusing plain http://") == 0);
  CHECK(error_of([] { faucets::parse_base_url("http://[2001:db8::1]:80"); }).find("refusing plain http://") == 0);

  CHECK(error_of([] { faucets::parse_base_url("ftp://f.example"); }) ==
        "unsupported scheme 'ftp' in the faucets server URL 'ftp://f.example' (expected https://HOST:PORT, or "
        "http://127.0.0.1:PORT for a server on this machine)");
  CHECK(error_of([] { faucets::parse_base_url("f.example:8443"); }).find("invalid faucets server URL 'f.example:8443'") == 0);
  CHECK(error_of([] { faucets::parse_base_url("https://:8443"); }).find("no host") == 0);
  CHECK(error_of([] { faucets::parse_base_url("https://f.example:0"); }).find("invalid port '0'") == 0);
  CHECK(error_of([] { faucets::parse_base_url("https://f.example:65536"); }).find("invalid port") == 0);
  CHECK(error_of([] { faucets::parse_base_url("https://f.example:84x3"); }).find("invalid port") == 0);
  CHECK(error_of([] { faucets::parse_base_url("https://f.example:"); }).find("empty port") == 0);
  CHECK(error_of([] { faucets::parse_base_url("https://alice@f.example"); }).find("user name") != std::string::npos);
  CHECK(error_of([] { faucets::parse_base_url("https://f.example/?a=1"); }).find("query") != std::string::npos);
  CHECK(error_of([] { faucets::parse_base_url("https://[::1"); }).find("IPv6") != std::string::npos);

  CHECK(faucets::is_loopback_host("127.0.0.1"));
  CHECK(faucets::is_loopback_host("::1"));
  CHECK(faucets::is_loopback_host("[::1]"));
  CHECK(faucets::is_loopback_host("::ffff:127.0.0.1"));
  CHECK_FALSE(faucets::is_loopback_host("localhost.example.org"));
  CHECK_FALSE(faucets::is_loopback_host("128.0.0.1"));
  CHECK(faucets::url_encode("a b/c&d") == "a%20b%2Fc%26d");
}

TEST_CASE("the token: $AQS_TOKEN, else --token-file, else ~/.aqs/faucets-token") {
  test::temp_dir dir("aqs-faucets-token");
  const auto home = dir.path() / "home";
  const auto other = dir.path() / "other-token";
  write_file(home / ".aqs" / "faucets-token", "home-token\n");
  write_file(other, "  file-token \r\nsecond line ignored\n");

  faucets::environment env;
  env.home = home.string();
  env.token = "env-token";
  auto t = faucets::find_token(env, other.string());
  CHECK(t.token == "env-token");
  CHECK(t.source == "$AQS_TOKEN");

  env.token.reset();
  t = faucets::find_token(env, other.string());
  CHECK(t.token == "file-token");
  CHECK(t.source == other.string());

  t = faucets::find_token(env, std::nullopt);
  CHECK(t.token == "home-token");
  CHECK(t.source == (home / ".aqs" / "faucets-token").string());

  // A named file that is not there is an error, not a fall back to the default.
  CHECK(error_of([&] { faucets::find_token(env, (dir.path() / "nope").string()); }) ==
        "cannot read the token file '" + (dir.path() / "nope").string() +
            "' (--token-file): No such file or directory");

  env.home = (dir.path() / "empty-home").string();
  const std::string none = error_of([&] { faucets::find_token(env, std::nullopt); });
  CHECK(none.find("no token for the faucets server: set AQS_TOKEN, pass --token-file FILE, or save one in "
                  "~/.aqs/faucets-token") == 0);
  CHECK(none.find('\n') == std::string::npos);
  env.home.reset();
  CHECK(error_of([&] { faucets::find_token(env, std::nullopt); }).find("no token") == 0);

  write_file(dir.path() / "blank", "\n");
  CHECK(error_of([&] { faucets::find_token(env, (dir.path() / "blank").string()); }).find("is empty") !=
        std::string::npos);
  env.token = "two words";
  CHECK(error_of([&] { faucets::find_token(env, std::nullopt); }) ==
        "the token in $AQS_TOKEN is not one word of printable characters");
}

TEST_CASE("the server and CA: the option, else the environment; no server is one clear line") {
  faucets::environment env;
  env.token = "t";
  env.faucets = "https://env.example:1";
  env.faucets_ca = "/env/ca.pem";
  auto o = faucets::resolve_client_options(std::nullopt, std::nullopt, std::nullopt, env);
  CHECK(o.url.host == "env.example");
  CHECK(o.ca_file == "/env/ca.pem");
  CHECK(o.token == "t");
  o = faucets::resolve_client_options(std::string("https://opt.example:2"), std::string("/opt/ca.pem"), std::nullopt, env);
  CHECK(o.url.host == "opt.example");
  CHECK(o.ca_file == "/opt/ca.pem");
  env.faucets.reset();
  env.faucets_ca.reset();
  CHECK(error_of([&] { faucets::resolve_client_options(std::nullopt, std::nullopt, std::nullopt, env); }) ==
        "no Faucets server given: set AQS_FAUCETS=https://HOST:PORT or pass --faucets URL");
  CHECK_FALSE(faucets::resolve_client_options(std::string("http://127.0.0.1:9"), std::nullopt, std::nullopt, env).ca_file);
}

TEST_CASE("HTTP errors are one line with the server's own text") {
  CHECK(faucets::http_error_message(401, R"({"error":"token revoked"})") ==
        "the faucets server refused the token: token revoked");
  CHECK(faucets::http_error_message(401, "") == "the faucets server refused the token (HTTP 401)");
  CHECK(faucets::http_error_message(403, R"({"error":"job 3 is bob's"})") ==
        "the faucets server does not allow it: job 3 is bob's");
  CHECK(faucets::http_error_message(404, R"({"error":"no job 12"})") == "no job 12");
  CHECK(faucets::http_error_message(409, R"({"error":"job 12 has ended"})") == "job 12 has ended");
  CHECK(faucets::http_error_message(400, R"({"error":"job.min_pe: must be at least 1"})") ==
        "job.min_pe: must be at least 1");
  CHECK(faucets::http_error_message(503, R"({"error":"no cluster is connected"})") ==
        "the faucets server is unavailable: no cluster is connected");
  CHECK(faucets::http_error_message(500, R"({"error":"database away"})") == "the faucets server failed: database away");
  CHECK(faucets::http_error_message(502, "<html>bad gateway</html>", "Bad Gateway") ==
        "the faucets server answered HTTP 502 Bad Gateway");
  CHECK(faucets::http_error_message(404, "") == "the faucets server answered HTTP 404 Not Found");
  CHECK(faucets::http_error_message(400, "{\"error\":\"two\\nlines\"}") == "two lines");
  const std::string long_text = faucets::http_error_message(400, R"({"error":")" + std::string(1000, 'x') + "\"}");
  CHECK(long_text.size() == 303);
}

TEST_CASE("fsub --broker NAME: a plugin's name, with -M or --faucets only") {
  using namespace aqs::cmdline;
  auto c = parse_fsub_command_line(args{"-M", "auto", "--broker", "last-name", "job.sh"});
  CHECK(c.options.faucets.broker == "last-name");
  c = parse_fsub_command_line(args{"--faucets", "https://f.example", "--broker=rank.v2", "--wrap", "true"});
  CHECK(c.options.faucets.broker == "rank.v2");
  CHECK_FALSE(parse_fsub_command_line(args{"-M", "auto", "job.sh"}).options.faucets.broker);
  CHECK(error_of<usage_error>([] { parse_fsub_command_line(args{"--broker", "x", "j.sh"}); }) ==
        "--broker goes with -M or --faucets (a Faucets server's broker plugin)");
  CHECK(error_of<usage_error>([] { parse_fsub_command_line(args{"-M", "auto", "--broker", "../x", "j.sh"}); })
            .find("invalid broker plugin '../x'") == 0);
  CHECK(error_of<usage_error>([] { parse_frun_command_line(args{"--broker", "x", "ls"}); }) ==
        "option '--broker' is for fsub: frun runs on this cluster only");
}

TEST_CASE("fsub's contract: --deadline, --max-price and --value together, with -M; bad numbers are one line") {
  using namespace aqs::cmdline;
  const auto c = parse_fsub_command_line(args{"-M", "auto", "--deadline", "now+600", "--max-price", "2.5", "--value",
                                              "10", "--value-decay", "60", "--best-effort", "job.sh"});
  const auto& k = c.options.faucets.contract;
  REQUIRE(k.deadline);
  CHECK(*k.deadline >= static_cast<std::int64_t>(std::time(nullptr)) + 590);
  CHECK(k.max_price == 2.5);
  CHECK(k.value == 10);
  CHECK(k.decay_s == 60);
  CHECK(k.best_effort);
  CHECK_FALSE(parse_fsub_command_line(args{"-M", "auto", "job.sh"}).options.faucets.contract.given());
  CHECK(error_of<usage_error>([] { parse_fsub_command_line(args{"-M", "a", "--max-price", "-1", "j.sh"}); }) ==
        "--max-price must be a number >= 0, not '-1'");
  CHECK(error_of<usage_error>([] { parse_fsub_command_line(args{"-M", "a", "--value", "ten", "j.sh"}); }) ==
        "--value must be a number >= 0, not 'ten'");
  CHECK(error_of<usage_error>([] { parse_fsub_command_line(args{"-M", "a", "--value-decay", "nan", "j.sh"}); }) ==
        "--value-decay must be a number >= 0, not 'nan'");
  CHECK(error_of<usage_error>([] { parse_fsub_command_line(args{"-M", "a", "--deadline", "soonish", "j.sh"}); })
            .starts_with("--deadline: "));
  CHECK(error_of<usage_error>([] { parse_fsub_command_line(args{"-M", "a", "--deadline", "now+60", "j.sh"}); }) ==
        "a contract needs --deadline, --max-price and --value together");
  CHECK(error_of<usage_error>([] {
          parse_fsub_command_line(args{"--deadline", "now+60", "--max-price", "1", "--value", "1", "j.sh"});
        }).starts_with("a contract (--deadline, --max-price, --value, --value-decay, --best-effort) goes with -M"));
  CHECK(error_of<usage_error>([] { parse_frun_command_line(args{"--deadline", "now+60", "ls"}); }) ==
        "option '--deadline' is for fsub: frun runs on this cluster only");
}

TEST_CASE("fsub -M and --faucets: auto or a cluster, command line only, not with frun") {
  using namespace aqs::cmdline;
  auto c = parse_fsub_command_line(args{"-M", "auto", "job.sh"});
  CHECK(c.options.faucets.cluster == "auto");
  CHECK(c.options.faucets.used());
  c = parse_fsub_command_line(args{"-Malpha", "--faucets", "https://f.example:8443", "--faucets-ca=/ca.pem",
                                   "--token-file", "/t", "job.sh", "-M", "x"});
  CHECK(c.options.faucets.cluster == "alpha");
  CHECK(c.options.faucets.url == "https://f.example:8443");
  CHECK(c.options.faucets.ca_file == "/ca.pem");
  CHECK(c.options.faucets.token_file == "/t");
  CHECK(c.script_args == args{"-M", "x"});  // the script's own arguments
  c = parse_fsub_command_line(args{"--clusters=beta", "--wrap", "true"});
  CHECK(c.options.faucets.cluster == "beta");
  c = parse_fsub_command_line(args{"--faucets", "https://f.example", "--wrap", "true"});
  CHECK(c.options.faucets.used());
  CHECK_FALSE(c.options.faucets.cluster);
  CHECK_FALSE(parse_fsub_command_line(args{"job.sh"}).options.faucets.used());

  CHECK(error_of<usage_error>([] { parse_fsub_command_line(args{"-M", "all", "j.sh"}); }) ==
        "-M all: a job goes to one cluster; use -M auto to let the Faucets server choose");
  CHECK(error_of<usage_error>([] { parse_fsub_command_line(args{"-M", "a,b", "j.sh"}); }) ==
        "-M takes one cluster, not a list ('a,b'): auto or one cluster's name");
  CHECK(error_of<usage_error>([] { parse_fsub_command_line(args{"-M", "a b", "j.sh"}); }).find("invalid cluster 'a b'") == 0);
  CHECK(error_of<usage_error>([] { parse_fsub_command_line(args{"--faucets-ca", "/ca", "j.sh"}); }) ==
        "--faucets-ca goes with --faucets URL or -M (fsub through a Faucets server)");
  CHECK(error_of<usage_error>([] { parse_fsub_command_line(args{"--token-file", "/t", "j.sh"}) ; }).find("--token-file goes with") == 0);
  CHECK(error_of<usage_error>([] { parse_fsub_command_line(args{"-M", "a", "--socket", "/s", "j.sh"}); })
            .find("--socket is aqsd's") == 0);
  CHECK(error_of<usage_error>([] { parse_fsub_command_line(args{"-M"}); }) == "option '-M' needs a value");
  CHECK(error_of<usage_error>([] { parse_frun_command_line(args{"-M", "alpha", "ls"}); }) ==
        "option '-M' is for fsub: frun runs on this cluster only");
  CHECK(error_of<usage_error>([] { parse_frun_command_line(args{"--faucets", "https://f", "ls"}); }) ==
        "option '--faucets' is for fsub: frun runs on this cluster only");
  CHECK(error_of<usage_error>([] { parse_directives("#!/bin/sh\n#SBATCH -M alpha\n"); }) ==
        "script line 2: option '-M' is only allowed on the command line");
  // --help still wins.
  CHECK(parse_fsub_command_line(args{"-M", "all", "--help"}).options.help);
  CHECK(fsub_usage().find("-M, --clusters NAME") != std::string::npos);
  CHECK(fsub_usage().find("--faucets URL") != std::string::npos);
}

TEST_CASE("fjobs -M all|NAME and fkill -M ID...: only what the server can do") {
  using namespace aqs::cmdline;
  auto j = parse_fjobs_command_line(args{"-M", "all", "--all", "--json"});
  CHECK(j.faucets.cluster == "all");
  CHECK(j.all);
  CHECK(j.common.json);
  j = parse_fjobs_command_line(args{"--faucets=https://f.example", "--history", "7"});
  CHECK(j.faucets.url == "https://f.example");
  CHECK(j.history == 7);
  CHECK(parse_fjobs_command_line(args{"-Malpha"}).faucets.cluster == "alpha");
  CHECK(error_of<usage_error>([] { parse_fjobs_command_line(args{"-M", "auto"}); }) ==
        "-M auto: use -M all for the jobs of every cluster, or one cluster's name");
  CHECK(error_of<usage_error>([] { parse_fjobs_command_line(args{"-M", "all", "-u", "bob"}); }) ==
        "-u does not go through a Faucets server: fjobs -M takes --all, --history ID and --json");
  CHECK(error_of<usage_error>([] { parse_fjobs_command_line(args{"-M", "all", "-t", "running"}); }).find("-t does not") == 0);
  CHECK(error_of<usage_error>([] { parse_fjobs_command_line(args{"-M", "all", "--socket", "/s"}); }).find("--socket is aqsd's") == 0);
  CHECK(error_of<usage_error>([] { parse_fjobs_command_line(args{"--token-file", "/t"}); }).find("--token-file goes with") == 0);
  CHECK(fjobs_usage().find("-M, --clusters NAME") != std::string::npos);

  auto k = parse_fkill_command_line(args{"-M", "all", "3", "4", "3"});
  CHECK(k.faucets.cluster == "all");
  CHECK(k.job_ids == std::vector<std::int64_t>{3, 4});
  k = parse_fkill_command_line(args{"--faucets", "https://f.example", "5"});
  CHECK(k.faucets.used());
  CHECK(parse_fkill_command_line(args{"-M", "auto", "5"}).faucets.cluster == "auto");
  CHECK(error_of<usage_error>([] { parse_fkill_command_line(args{"-M", "all"}); }) ==
        "no job id given (fkill -M all ID... or fkill --faucets URL ID...)");
  CHECK(error_of<usage_error>([] { parse_fkill_command_line(args{"-M", "all", "-s", "KILL", "3"}); }) ==
        "--signal does not go through a Faucets server: give the server's job ids (fkill -M all ID...)");
  CHECK(error_of<usage_error>([] { parse_fkill_command_line(args{"-M", "all", "-u", "bob"}); }).find("--user does not") == 0);
  CHECK(error_of<usage_error>([] { parse_fkill_command_line(args{"-M", "all", "3_4"}); }).find("an array task") == 0);
  CHECK(fkill_usage().find("--faucets URL") != std::string::npos);
  // Without them, nothing changed.
  CHECK_FALSE(parse_fkill_command_line(args{"3"}).faucets.used());
  CHECK_FALSE(parse_fjobs_command_line(args{}).faucets.used());
}

TEST_CASE("fjobs' table of the server's jobs") {
  const auto jobs = nlohmann::json::parse(R"([
    {"id":7,"gid":"alpha:42","user":"alice","name":"sim","cluster":"alpha","local_id":42,"state":"RUNNING",
     "min_pe":2,"max_pe":8,"nprocs":4,"adaptive":true,"submit_time":"2026-11-26T01:00:00.250Z",
     "start_time":"2026-11-26T01:00:10Z","end_time":null,"exit_code":null},
    {"id":8,"gid":null,"user":"alice","name":"wait","cluster":null,"local_id":null,"state":"PENDING",
     "min_pe":2,"max_pe":8,"nprocs":0,"adaptive":true,"submit_time":"2026-11-26T01:01:00Z",
     "start_time":null,"end_time":null,"exit_code":null},
    {"id":9,"gid":"beta:3","user":"bob","name":"done","cluster":"beta","state":"COMPLETED","min_pe":1,"max_pe":1,
     "nprocs":1,"submit_time":"2026-11-26T00:00:00+00:00","start_time":"2026-11-26T00:00:00Z",
     "end_time":"2026-11-26T01:01:01Z","exit_code":0}
  ])");
  const double now = *parse_iso8601("2026-11-26T01:01:10Z");
  const std::string t = format_faucets_jobs_table(jobs, now);
  CHECK(t == "ID  GID       CLUSTER  USER   NAME  STATE      NPROCS  SUBMIT               TIME\n"
             "7   alpha:42  alpha    alice  sim   RUNNING    4       2026-11-26T01:00:00  00:01:00\n"
             "8   -         -        alice  wait  PENDING    2-8     2026-11-26T01:01:00  -\n"
             "9   beta:3    beta     bob    done  COMPLETED  1       2026-11-26T00:00:00  01:01:01\n");
  CHECK(format_faucets_jobs_table(nlohmann::json::array(), now) ==
        "ID  GID  CLUSTER  USER  NAME  STATE  NPROCS  SUBMIT  TIME\n");
  CHECK(format_faucets_history_table(nlohmann::json::parse(
            R"([{"time":"2026-11-26T01:00:00.5Z","event":"dispatched","detail":"to alpha: fastest-queue"}])")) ==
        "TIME                 EVENT       DETAIL\n"
        "2026-11-26T01:00:00  dispatched  to alpha: fastest-queue\n");
  CHECK(parse_iso8601("2026-11-26T01:00:00Z") == doctest::Approx(1795654800.0));
  CHECK(parse_iso8601("2026-11-26T02:00:00+01:00") == doctest::Approx(1795654800.0));
  CHECK(parse_iso8601("2026-11-26T01:00:00.5") == doctest::Approx(1795654800.5));
  CHECK_FALSE(parse_iso8601("yesterday"));
  CHECK_FALSE(parse_iso8601("2026-11-26T01:00:00Zx"));
}
