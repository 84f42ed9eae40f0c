// The Faucets client over real HTTPS without faucetsd: a tiny Beast server in
// the test (127.0.0.1, port 0, a throwaway self-signed certificate made with
// `openssl req`) answers the API's routes with canned JSON and records what
// the client sent. Then fsub, fjobs and fkill themselves against it: their
// output, one-line errors and exit statuses.
#include <doctest/doctest.h>

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <utility>  // before Boost.Asio (1.74 misses it)
#include <vector>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "faucets_client/faucets_api.hpp"
#include "temp_dir.hpp"

using namespace aqs;
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;
using tcp = asio::ip::tcp;
namespace faucets = aqs::client::faucets;

namespace {

struct seen {
  std::string method, target, authorization, content_type, body;
};

// A one-thread HTTP(S) server: each connection one request, answered from
// the canned answers by "METHOD TARGET" (404 {"error":"no route"} else).
class fake_faucets {
public:
  explicit fake_faucets(std::optional<std::pair<std::string, std::string>> cert_and_key = std::nullopt)
      : acceptor_(io_, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)) {
    if (cert_and_key) {
      tls_.emplace(asio::ssl::context::tls_server);
      tls_->use_certificate_chain_file(cert_and_key->first);
      tls_->use_private_key_file(cert_and_key->second, asio::ssl::context::pem);
    }
    port_ = acceptor_.local_endpoint().port();
    thread_ = std::thread([this] { serve(); });
  }
  ~fake_faucets() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    try {
      asio::io_context io;
      tcp::socket s(io);
      s.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port_));
    } catch (...) {
    }
    thread_.join();
  }
  fake_faucets(const fake_faucets&) = delete;
  fake_faucets& operator=(const fake_faucets&) = delete;

  unsigned short port() const { return port_; }
  void answer(const std::string& method_target, int status, std::string body) {
    std::lock_guard lock(mu_);
    answers_[method_target] = {status, std::move(body)};
  }
  // Accept connections but never answer (until destroyed).
  void hang() {
    std::lock_guard lock(mu_);
    hang_ = true;
  }
  std::vector<seen> requests() {
    std::lock_guard lock(mu_);
    return seen_;
  }
  seen last() {
    std::lock_guard lock(mu_);
    REQUIRE_FALSE(seen_.empty());
    return seen_.back();
  }

private:
  void serve() {
    for (;;) {
      tcp::socket s(io_);
      boost::system::error_code ec;
      acceptor_.accept(s, ec);
      {
        std::lock_guard lock(mu_);
        if (stop_) return;
      }
      if (ec) continue;
      if (tls_) {
        asio::ssl::stream<tcp::socket&> st(s, *tls_);
        st.handshake(asio::ssl::stream_base::server, ec);
        if (!ec) handle(st);
      } else {
        handle(s);
      }
    }
  }
  template <class Stream>
  void handle(Stream& st) {
    boost::system::error_code ec;
    beast::flat_buffer buf;
    bhttp::request<bhttp::string_body> req;
    bhttp::read(st, buf, req, ec);
    if (ec) return;
    std::pair<int, std::string> a{404, R"({"error":"no route"})"};
    {
      std::unique_lock lock(mu_);
      seen_.push_back({std::string(req.method_string()), std::string(req.target()),
                       std::string(req[bhttp::field::authorization]), std::string(req[bhttp::field::content_type]),
                       req.body()});
      if (hang_) {
        cv_.wait(lock, [&] { return stop_; });
        return;
      }
      const auto it = answers_.find(std::string(req.method_string()) + " " + std::string(req.target()));
      if (it != answers_.end()) a = it->second;
    }
    bhttp::response<bhttp::string_body> res{static_cast<bhttp::status>(a.first), 11};
    res.set(bhttp::field::content_type, a.second.starts_with("{") || a.second.starts_with("[") ? "application/json" : "text/html");
    res.keep_alive(false);
    res.body() = a.second;
    res.prepare_payload();
    bhttp::write(st, res, ec);
  }

  asio::io_context io_;
  tcp::acceptor acceptor_;
  std::optional<asio::ssl::context> tls_;
  unsigned short port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool hang_ = false;
  std::map<std::string, std::pair<int, std::string>> answers_;
  std::vector<seen> seen_;
};

// A self-signed certificate for 127.0.0.1 (and nothing else).
struct certificate {
  std::string cert, key;
};
certificate make_certificate(const std::filesystem::path& dir, const std::string& name) {
  certificate c{(dir / (name + ".pem")).string(), (dir / (name + ".key")).string()};
  const std::string gen = "openssl req -x509 -newkey rsa:2048 -nodes -keyout " + c.key + " -out " + c.cert +
                          " -days 1 -subj /CN=" + name + " -addext subjectAltName=IP:127.0.0.1 >/dev/null 2>&1";
  REQUIRE(std::system(gen.c_str()) == 0);
  return c;
}

faucets::client_options https_to(const fake_faucets& s, const std::string& ca, const std::string& host = "127.0.0.1") {
  faucets::client_options o;
  o.url = faucets::parse_base_url("https://" + host + ":" + std::to_string(s.port()));
  o.ca_file = ca;
  o.token = "tok-alice";
  o.connect_timeout = std::chrono::seconds(10);
  o.timeout = std::chrono::seconds(10);
  return o;
}

template <class F>
faucets::error error_of(F&& f) {
  try {
    f();
  } catch (const faucets::error& e) {
    return e;
  }
  FAIL("no faucets::error");
  return faucets::error("");
}

struct command_result {
  int status = -1;
  std::string out, err;
};
std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}
// Runs `command` (words quoted by the caller) with `env` ("K=V ..."), in `dir`.
command_result run(const std::filesystem::path& dir, const std::string& env, const std::string& command) {
  const auto out = dir / "out.txt", err = dir / "err.txt";
  const std::string line = "cd " + dir.string() + " && env -u AQS_FAUCETS -u AQS_FAUCETS_CA -u AQS_TOKEN HOME=" +
                           dir.string() + " " + env + " " + command + " >" + out.string() + " 2>" + err.string();
  const int st = std::system(line.c_str());
  command_result r;
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  r.out = read_text(out);
  r.err = read_text(err);
  return r;
}

}  // namespace

TEST_CASE("the client speaks the API over TLS: each route's method, path, token and body") {
  test::temp_dir dir("aqs-faucets-client");
  const auto cert = make_certificate(dir.path(), "server");
  fake_faucets server(std::make_pair(cert.cert, cert.key));
  server.answer("POST /api/v1/jobs", 201, R"({"id":7,"gid":"alpha:42","cluster":"alpha","state":"PENDING"})");
  server.answer("GET /api/v1/jobs?all=1&cluster=alpha", 200,
                R"({"jobs":[{"id":7,"gid":"alpha:42","user":"alice","name":"sim","cluster":"alpha","state":"RUNNING"}]})");
  server.answer("GET /api/v1/jobs", 200, R"({"jobs":[]})");
  server.answer("GET /api/v1/jobs/7", 200, R"({"id":7,"state":"RUNNING"})");
  server.answer("GET /api/v1/jobs/7/history", 200,
                R"({"events":[{"time":"2026-11-26T01:00:00Z","event":"dispatched","detail":"to alpha"}]})");
  server.answer("POST /api/v1/jobs/7/cancel", 200, R"({"id":7,"state":"CANCELLED"})");
  server.answer("GET /api/v1/clusters", 200, R"({"clusters":[{"name":"alpha","up":true}]})");

  faucets::client c(https_to(server, cert.cert));
  const nlohmann::json job = {{"script", "#!/bin/sh\ntrue\n"}, {"min_pe", 1}, {"max_pe", 1}};
  const auto s = c.submit("auto", job);
  CHECK(s.id == 7);
  CHECK(s.gid == "alpha:42");
  CHECK(s.cluster == "alpha");
  CHECK(s.state == "PENDING");
  auto r = server.last();
  CHECK(r.method == "POST");
  CHECK(r.target == "/api/v1/jobs");
  CHECK(r.authorization == "Bearer tok-alice");
  CHECK(r.content_type == "application/json");
  CHECK(nlohmann::json::parse(r.body) == nlohmann::json{{"cluster", "auto"}, {"job", job}});

  const auto jobs = c.list_jobs(true, std::string("alpha"));
  REQUIRE(jobs.size() == 1);
  CHECK(jobs[0]["gid"] == "alpha:42");
  CHECK(server.last().target == "/api/v1/jobs?all=1&cluster=alpha");
  CHECK(c.list_jobs().empty());
  CHECK(server.last().target == "/api/v1/jobs");
  CHECK(server.last().method == "GET");
  CHECK(server.last().body.empty());

  CHECK(c.job(7)["state"] == "RUNNING");
  CHECK(server.last().target == "/api/v1/jobs/7");
  CHECK(c.history(7).at(0)["event"] == "dispatched");
  CHECK(server.last().target == "/api/v1/jobs/7/history");
  const auto k = c.cancel(7);
  CHECK(k.id == 7);
  CHECK(k.state == "CANCELLED");
  r = server.last();
  CHECK(r.method == "POST");
  CHECK(r.target == "/api/v1/jobs/7/cancel");
  CHECK(r.authorization == "Bearer tok-alice");
  CHECK(c.clusters().at(0)["name"] == "alpha");
  CHECK(server.last().target == "/api/v1/clusters");

  // The server's error text, one line, with its status.
  const auto missing = error_of([&] { c.job(12); });
  CHECK(std::string(missing.what()) == "no route");
  CHECK(missing.http_status() == 404);
}

TEST_CASE("a certificate the CA did not sign, or for another name, is refused clearly") {
  test::temp_dir dir("aqs-faucets-client");
  const auto cert = make_certificate(dir.path(), "server");
  const auto other = make_certificate(dir.path(), "other");
  fake_faucets server(std::make_pair(cert.cert, cert.key));
  server.answer("GET /api/v1/clusters", 200, R"({"clusters":[]})");
  const std::string url = "https://127.0.0.1:" + std::to_string(server.port());

  const auto wrong = error_of([&] { faucets::client(https_to(server, other.cert)).clusters(); });
  CHECK(std::string(wrong.what()) == "cannot verify the faucets server's certificate at " + url +
                                         ": self-signed certificate (checked against the CA file '" + other.cert + "')");
  CHECK(wrong.http_status() == 0);

  // The system's CAs know nothing of it either.
  auto system = https_to(server, "");
  system.ca_file.reset();
  CHECK(std::string(error_of([&] { faucets::client(system).clusters(); }).what()) ==
        "cannot verify the faucets server's certificate at " + url +
            ": self-signed certificate (give its CA with --faucets-ca FILE or AQS_FAUCETS_CA)");

  // Signed for 127.0.0.1 only: "localhost" does not match.
  const auto name = error_of([&] { faucets::client(https_to(server, cert.cert, "localhost")).clusters(); });
  CHECK(std::string(name.what()).find("cannot verify the faucets server's certificate at https://localhost:") == 0);
  CHECK(std::string(name.what()).find("mismatch") != std::string::npos);

  // The right CA works, and nothing was asked of the server before.
  CHECK(faucets::client(https_to(server, cert.cert)).clusters().empty());
  CHECK(server.requests().size() == 1);

  CHECK(std::string(error_of([&] { faucets::client(https_to(server, (dir.path() / "none.pem").string())); }).what()) ==
        "cannot read the CA file '" + (dir.path() / "none.pem").string() +
            "' (--faucets-ca or AQS_FAUCETS_CA): No such file or directory");
}

TEST_CASE("plain http on loopback; errors of the connection and of the server are one line") {
  fake_faucets server;
  server.answer("GET /api/v1/clusters", 200, R"({"clusters":[{"name":"alpha"}]})");
  server.answer("GET /api/v1/jobs/3", 401, R"({"error":"token revoked"})");
  server.answer("GET /api/v1/jobs/4", 502, "<html>bad gateway</html>");
  server.answer("GET /api/v1/jobs/5", 200, "not json");
  faucets::client_options o;
  o.url = faucets::parse_base_url("http://127.0.0.1:" + std::to_string(server.port()));
  o.token = "t";
  faucets::client c(o);
  CHECK(c.clusters().at(0)["name"] == "alpha");
  CHECK(server.last().authorization == "Bearer t");

  const auto refused = error_of([&] { c.job(3); });
  CHECK(std::string(refused.what()) == "the faucets server refused the token: token revoked");
  CHECK(refused.http_status() == 401);
  CHECK(std::string(error_of([&] { c.job(4); }).what()) == "the faucets server answered HTTP 502 Bad Gateway");
  CHECK(std::string(error_of([&] { c.job(5); }).what()).find("unreadable answer from the faucets server at") == 0);

  // TLS to a plain server.
  faucets::client_options tls = o;
  tls.url.tls = true;
  test::temp_dir dir("aqs-faucets-client");
  const auto cert = make_certificate(dir.path(), "server");
  tls.ca_file = cert.cert;
  const std::string handshake = error_of([&] { faucets::client(tls).clusters(); }).what();
  CHECK(handshake.find("TLS handshake with the faucets server at https://127.0.0.1:" + std::to_string(server.port()) +
                       " failed: ") == 0);
  CHECK(handshake.find('\n') == std::string::npos);

  // Nobody there.
  unsigned short closed = 0;
  {
    asio::io_context io;
    tcp::acceptor a(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    closed = a.local_endpoint().port();
  }
  faucets::client_options gone = o;
  gone.url.port = closed;
  CHECK(std::string(error_of([&] { faucets::client(gone).clusters(); }).what()) ==
        "cannot reach the faucets server at http://127.0.0.1:" + std::to_string(closed) + ": Connection refused");

  // A server that never answers.
  server.hang();
  faucets::client_options slow = o;
  slow.timeout = std::chrono::milliseconds(300);
  CHECK(std::string(error_of([&] { faucets::client(slow).clusters(); }).what()) ==
        "the faucets server at " + o.url.text() + " did not answer within 0.3 s");
}

TEST_CASE("fsub, fjobs and fkill through the server: output, errors, exit statuses") {
  test::temp_dir dir("aqs-faucets-cmd");
  const auto cert = make_certificate(dir.path(), "server");
  fake_faucets server(std::make_pair(cert.cert, cert.key));
  server.answer("POST /api/v1/jobs", 201, R"({"id":7,"gid":"alpha:42","cluster":"alpha","state":"PENDING"})");
  server.answer("GET /api/v1/jobs?cluster=alpha", 200,
                R"({"jobs":[{"id":7,"gid":"alpha:42","user":"alice","name":"wrap","cluster":"alpha","state":"PENDING",
                    "min_pe":2,"max_pe":2,"nprocs":0,"submit_time":"2026-11-26T01:00:00Z","start_time":null}]})");
  server.answer("GET /api/v1/jobs?all=1", 200, R"({"jobs":[{"id":7},{"id":6}]})");
  server.answer("POST /api/v1/jobs/7/cancel", 200, R"({"id":7,"state":"CANCELLED"})");
  server.answer("POST /api/v1/jobs/8/cancel", 404, R"({"error":"no job 8"})");
  const std::string url = "https://127.0.0.1:" + std::to_string(server.port());
  const std::string env = "AQS_TOKEN=tok-cmd AQS_FAUCETS_CA=" + cert.cert;

  auto r = run(dir.path(), env, std::string(AQS_FSUB_BINARY) + " --faucets " + url + " -M alpha -n 2 -J wrap --wrap 'echo hi'");
  CHECK(r.status == 0);
  CHECK(r.out == "Submitted job 7\n");
  CHECK(r.err == "fsub: job 7 went to cluster alpha (alpha:42)\n");
  auto sent = server.last();
  CHECK(sent.method == "POST");
  CHECK(sent.target == "/api/v1/jobs");
  CHECK(sent.authorization == "Bearer tok-cmd");
  const auto body = nlohmann::json::parse(sent.body);
  CHECK(body["cluster"] == "alpha");
  CHECK(body["job"]["script"] == "#!/bin/sh\necho hi\n");
  CHECK(body["job"]["name"] == "wrap");
  CHECK(body["job"]["min_pe"] == 2);
  CHECK(body["job"]["max_pe"] == 2);
  CHECK(body["job"]["workdir"] == std::filesystem::canonical(dir.path()).string());
  CHECK(body["job"].contains("submit_token"));

  // The server's URL from $AQS_FAUCETS, -M auto, --parsable; the token from
  // ~/.aqs/faucets-token.
  std::filesystem::create_directories(dir.path() / ".aqs");
  std::ofstream(dir.path() / ".aqs" / "faucets-token") << "tok-home\n";
  r = run(dir.path(), "AQS_FAUCETS=" + url + " AQS_FAUCETS_CA=" + cert.cert,
          std::string(AQS_FSUB_BINARY) + " -M auto --parsable --wrap true");
  CHECK(r.status == 0);
  CHECK(r.out == "7\n");
  CHECK(server.last().authorization == "Bearer tok-home");
  CHECK(nlohmann::json::parse(server.last().body)["cluster"] == "auto");

  r = run(dir.path(), env, std::string(AQS_FSUB_BINARY) + " --faucets " + url + " --json --wrap true");
  CHECK(r.status == 0);
  CHECK(nlohmann::json::parse(r.out) ==
        nlohmann::json{{"job_id", 7}, {"gid", "alpha:42"}, {"cluster", "alpha"}, {"state", "PENDING"}});

  r = run(dir.path(), env, std::string(AQS_FJOBS_BINARY) + " --faucets " + url + " -M alpha");
  CHECK(r.status == 0);
  CHECK(r.out == "ID  GID       CLUSTER  USER   NAME  STATE    NPROCS  SUBMIT               TIME\n"
                 "7   alpha:42  alpha    alice  wrap  PENDING  2       2026-11-26T01:00:00  -\n");
  r = run(dir.path(), env + " AQS_FAUCETS=" + url, std::string(AQS_FJOBS_BINARY) + " -M all --all --json");
  CHECK(r.status == 0);
  CHECK(r.out == "[{\"id\":7},{\"id\":6}]\n");

  r = run(dir.path(), env, std::string(AQS_FKILL_BINARY) + " --faucets " + url + " 7 8");
  CHECK(r.status == 1);
  CHECK(r.out.empty());
  CHECK(r.err == "fkill: job 8: no job 8\n");
  const auto all = server.requests();
  REQUIRE(all.size() >= 2);
  CHECK(all[all.size() - 2].target == "/api/v1/jobs/7/cancel");
  CHECK(all.back().target == "/api/v1/jobs/8/cancel");

  // No server: one line, exit 1.
  r = run(dir.path(), "AQS_TOKEN=t", std::string(AQS_FJOBS_BINARY) + " -M all");
  CHECK(r.status == 1);
  CHECK(r.err == "fjobs: no Faucets server given: set AQS_FAUCETS=https://HOST:PORT or pass --faucets URL\n");

  // A wrong CA: one line, exit 1.
  const auto other = make_certificate(dir.path(), "other");
  r = run(dir.path(), "AQS_TOKEN=t AQS_FAUCETS_CA=" + other.cert, std::string(AQS_FJOBS_BINARY) + " --faucets " + url);
  CHECK(r.status == 1);
  CHECK(r.err == "fjobs: cannot verify the faucets server's certificate at " + url +
                     ": self-signed certificate (checked against the CA file '" + other.cert + "')\n");

  // The server refuses the token: one line, exit 1, for each command.
  server.answer("POST /api/v1/jobs", 401, R"({"error":"unknown token"})");
  server.answer("GET /api/v1/jobs", 401, R"({"error":"unknown token"})");
  server.answer("POST /api/v1/jobs/7/cancel", 401, R"({"error":"unknown token"})");
  r = run(dir.path(), env, std::string(AQS_FSUB_BINARY) + " --faucets " + url + " --wrap true");
  CHECK(r.status == 1);
  CHECK(r.out.empty());
  CHECK(r.err == "fsub: the faucets server refused the token: unknown token\n");
  r = run(dir.path(), env, std::string(AQS_FJOBS_BINARY) + " --faucets " + url);
  CHECK(r.status == 1);
  CHECK(r.err == "fjobs: the faucets server refused the token: unknown token\n");
  r = run(dir.path(), env, std::string(AQS_FKILL_BINARY) + " --faucets " + url + " 7 8");
  CHECK(r.status == 1);
  CHECK(r.err == "fkill: the faucets server refused the token: unknown token\n");

  // A plain http:// URL off this machine is refused (exit 1); a -M fjobs cannot take is a usage error (2).
  r = run(dir.path(), env, std::string(AQS_FSUB_BINARY) + " --faucets http://192.0.2.1:80 --wrap true");
  CHECK(r.status == 1);
  CHECK(r.err.find("fsub: refusing plain http:// to '192.0.2.1'") == 0);
  r = run(dir.path(), env, std::string(AQS_FJOBS_BINARY) + " -M auto");
  CHECK(r.status == 2);
}
