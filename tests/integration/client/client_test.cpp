// Integration tests of the client library: listing jobs page by page, and
// submissions whose reply is lost.
#include <doctest/doctest.h>

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "aqs_cluster.hpp"
#include "e2e.hpp"
#include "client/client_connection.hpp"
#include "client/format.hpp"
#include "client/job_listing.hpp"
#include "client/json_skim.hpp"
#include "client/submit.hpp"
#include "protocol/framing.hpp"
#include "protocol/messages.hpp"
#include "protocol/results.hpp"
#include "raw_peer.hpp"
#include "temp_dir.hpp"

using namespace aqs;

namespace {

int listen_unix(const std::string& path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::strncpy(a.sun_path, path.c_str(), sizeof a.sun_path - 1);
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd, 8) != 0) {
    throw std::runtime_error("cannot listen on " + path);
  }
  return fd;
}

int connect_unix(const std::string& path) {
  const int fd = test::connect_unix(path);
  if (fd < 0) throw std::runtime_error("cannot connect to " + path);
  return fd;
}

// Frames read from one socket; an empty optional when it closed.
struct frame_reader {
  explicit frame_reader(int f) : fd(f) {}
  int fd;
  protocol::frame_decoder dec;
  std::vector<std::string> ready;
  std::optional<std::string> next() {
    while (ready.empty()) {
      char buf[65536];
      const ssize_t n = ::read(fd, buf, sizeof buf);
      if (n <= 0) return std::nullopt;
      dec.feed(std::string_view(buf, static_cast<std::size_t>(n)), ready);
    }
    std::string f = std::move(ready.front());
    ready.erase(ready.begin());
    return f;
  }
};

void write_all(int fd, const std::string& bytes) {
  std::size_t off = 0;
  while (off < bytes.size()) {
    const ssize_t n = ::send(fd, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return;
    off += static_cast<std::size_t>(n);
  }
}

// Serves connections on `path` one after the other with `serve(fd, n)` (n
// counts from 0), until stopped.
class socket_server {
public:
  socket_server(std::string path, std::function<void(int, int)> serve) : fd_(listen_unix(path)) {
    thread_ = std::thread([this, serve] {
      for (int n = 0;; ++n) {
        const int c = ::accept(fd_, nullptr, nullptr);
        if (c < 0 || stop_) {
          if (c >= 0) ::close(c);
          return;
        }
        serve(c, n);
        ::close(c);
      }
    });
  }
  ~socket_server() {
    stop_ = true;
    ::shutdown(fd_, SHUT_RDWR);
    thread_.join();
    ::close(fd_);
  }

private:
  int fd_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// A relay at `path` to aqsd's socket: each request frame goes up and its
// reply back, one at a time. cut(frame, n), asked once aqsd answered a
// request on the n-th connection (from 0), may keep that reply from the
// client: then the connection ends there.
class aqsd_relay {
public:
  aqsd_relay(const std::string& path, const test::cluster& cl, std::function<bool(const std::string&, int)> cut)
      : server_(path, [this, &cl, cut](int client_fd, int n) {
          ++connections;
          const int up = connect_unix(cl.socket());
          frame_reader from_client(client_fd), from_aqsd(up);
          while (auto f = from_client.next()) {
            write_all(up, protocol::encode_frame(*f));
            const auto reply = from_aqsd.next();
            if (!reply || cut(*f, n)) break;
            write_all(client_fd, protocol::encode_frame(*reply));
          }
          ::close(up);
        }) {}
  std::atomic<int> connections{0};

private:
  socket_server server_;
};

bool is_submit(const std::string& frame) {
  return std::holds_alternative<protocol::submit>(protocol::parse_message(frame));
}

// A job named `name` that stays queued on cl (it asks for more processors
// than the cluster has).
protocol::submit queued_job(const test::cluster& cl, const std::string& name) {
  protocol::submit s;
  s.job.name = name;
  s.job.argv = {"true"};
  s.job.workdir = cl.workdir().string();
  s.job.stdout_pattern = "/dev/null";
  s.job.min_pe = s.job.max_pe = 64;
  return s;
}

protocol::job_info job(std::int64_t id) {
  protocol::job_info j;
  j.id = id;
  j.name = "job" + std::to_string(id);
  j.user = "alice";
  j.state = core::job_state::completed;
  j.submit_time = "2026-11-25T10:00:00.000Z";
  j.exit_code = 0;
  return j;
}

// A scripted aqsd holding jobs 1..total, answering list_jobs in pages of at
// most `page` jobs as the real one does (more = there are others beyond).
void serve_listing(int fd, std::int64_t total, std::int64_t page, std::atomic<int>& requests) {
  frame_reader in(fd);
  while (auto body = in.next()) {
    const protocol::message m = protocol::parse_message(*body);
    if (const auto* h = std::get_if<protocol::hello>(&m)) {
      write_all(fd, protocol::encode(protocol::ok{h->id, {}}));
      continue;
    }
    const auto& l = std::get<protocol::list_jobs>(m);
    ++requests;
    const std::int64_t n = std::min(l.limit.value_or(page), page);
    std::vector<std::int64_t> ids;
    if (l.newest) {
      for (std::int64_t id = std::min(total, l.before_id.value_or(total + 1) - 1); id >= 1 && ids.size() < std::size_t(n + 1); --id) ids.insert(ids.begin(), id);
      if (ids.size() > std::size_t(n)) ids.erase(ids.begin());
    } else {
      for (std::int64_t id = l.after_id.value_or(0) + 1; id <= total && ids.size() < std::size_t(n + 1); ++id) ids.push_back(id);
      if (ids.size() > std::size_t(n)) ids.pop_back();
    }
    const bool more = l.newest ? (!ids.empty() && ids.front() > 1) : (!ids.empty() && ids.back() < total);
    protocol::ok reply{l.id, {{"more", more}}};
    reply.raw_members = "\"jobs\":[";
    for (std::size_t i = 0; i < ids.size(); ++i) {
      if (i > 0) reply.raw_members += ',';
      protocol::append_json(reply.raw_members, job(ids[i]));
    }
    reply.raw_members += ']';
    write_all(fd, protocol::encode(reply));
  }
}

std::vector<std::int64_t> ids_of(const std::vector<protocol::job_info>& jobs) {
  std::vector<std::int64_t> out;
  for (const auto& j : jobs) out.push_back(j.id);
  return out;
}

std::vector<std::int64_t> range(std::int64_t from, std::int64_t to) {
  std::vector<std::int64_t> out;
  for (std::int64_t i = from; i <= to; ++i) out.push_back(i);
  return out;
}

}  // namespace

TEST_CASE("a JSON object's members and an array's elements are found without parsing them") {
  const std::string text = R"( {"type":"ok", "id" : 7,"s":"a\"}]\\","jobs":[{"x":[1,{"y":"]"}]}, 2 ,"z"] ,"more":true} )";
  const auto members = client::object_members(text);
  REQUIRE(members.size() == 5);
  CHECK(members[0].first == "type");
  CHECK(members[0].second.in(text) == "\"ok\"");
  CHECK(members[1].second.in(text) == "7");
  CHECK(members[2].second.in(text) == R"("a\"}]\\")");
  CHECK(members[3].first == "jobs");
  const auto elements = client::array_elements(text, members[3].second);
  REQUIRE(elements.size() == 3);
  CHECK(elements[0].in(text) == R"({"x":[1,{"y":"]"}]})");
  CHECK(elements[1].in(text) == "2");
  CHECK(elements[2].in(text) == "\"z\"");
  CHECK(members[4].second.in(text) == "true");
  CHECK(client::array_elements("[ ]", {0, 3}).empty());
  for (const char* bad : {"", "[]", "{", R"({"a":})", R"({"a":"x})", R"({"a":[1})", R"({"a":[1}])", R"({"a":1} x)"}) {
    CAPTURE(bad);
    CHECK_THROWS_AS(client::object_members(bad), std::invalid_argument);
  }
}

TEST_CASE("a listing takes every page, or only the newest jobs, and prints them as one JSON array") {
  test::temp_dir dir("aqs-client-test");
  const std::string path = (dir.path() / "aqsd.sock").string();
  std::atomic<int> requests{0};
  socket_server server(path, [&](int fd, int) { serve_listing(fd, 25, 10, requests); });
  client::connection c(path);

  const auto all = client::list_job_pages(c, protocol::list_jobs{}, std::nullopt);
  CHECK(requests == 3);
  CHECK_FALSE(all.older_left_out);
  const auto jobs = client::parse_jobs(all);
  CHECK(ids_of(jobs) == range(1, 25));
  CHECK(client::jobs_json_text(all) == client::jobs_json(jobs));
  CHECK(nlohmann::json::parse(client::jobs_json_text(all)).size() == 25);

  // Streamed page by page (fjobs --json --all): the same jobs, the same text.
  requests = 0;
  std::string streamed = "[";
  int pages = 0;
  client::for_each_job_page(c, protocol::list_jobs{}, [&](const client::job_page& p) {
    if (pages++ > 0) streamed += ',';
    streamed += client::page_jobs_text(p);
  });
  streamed += ']';
  CHECK(requests == 3);
  CHECK(pages == 3);
  CHECK(streamed == client::jobs_json_text(all));

  requests = 0;
  const auto newest = client::list_job_pages(c, protocol::list_jobs{}, 12);
  CHECK(requests == 2);
  CHECK(newest.older_left_out);
  CHECK(ids_of(client::parse_jobs(newest)) == range(14, 25));

  const auto more_than_all = client::list_job_pages(c, protocol::list_jobs{}, 40);
  CHECK_FALSE(more_than_all.older_left_out);
  CHECK(ids_of(client::parse_jobs(more_than_all)) == range(1, 25));
}

TEST_CASE("a submission that aqsd took but did not answer in time is not sent again") {
  // issue 28: fsub resent a 100,000-task array five times while aqsd was
  // still storing it. A connection that holds means aqsd has the request.
  test::cluster cl(test::nodes_of(1, 2));
  const std::string relay = (cl.dir() / "slow.sock").string();
  aqsd_relay server(relay, cl, [](const std::string& f, int) {
    if (!is_submit(f)) return false;
    std::this_thread::sleep_for(std::chrono::seconds(3));  // slow, but the connection holds
    return true;
  });
  const protocol::submit s = queued_job(cl, "slow-reply");
  int retries = 0;
  client::submit_retry retry;
  retry.first_delay = std::chrono::milliseconds(10);
  retry.answer_within = std::chrono::seconds(1);
  retry.on_retry = [&](int, const std::string&) { ++retries; };
  try {
    (void)client::submit(relay, s, retry);
    FAIL("the submission was answered");
  } catch (const client::client_error& e) {
    CHECK_MESSAGE(std::string(e.what()).find("not sent again") != std::string::npos, e.what());
  }
  CHECK(retries == 0);
  CHECK(server.connections == 1);
}

TEST_CASE("a submission whose reply was lost is sent again with its token and makes one job") {
  test::cluster cl(test::nodes_of(1, 2));
  const std::string relay = (cl.dir() / "relay.sock").string();
  // The first connection is cut right after aqsd answered the submission
  // (so the job is stored) and before the client sees the answer; later ones
  // pass through.
  aqsd_relay server(relay, cl, [](const std::string& f, int n) { return n == 0 && is_submit(f); });  // lost
  const protocol::submit s = queued_job(cl, "lost-reply");
  int retries = 0;
  client::submit_retry retry;
  retry.first_delay = std::chrono::milliseconds(10);
  retry.on_retry = [&](int, const std::string&) { ++retries; };
  const std::int64_t id = client::submit(relay, s, retry);
  CHECK(retries == 1);
  CHECK(server.connections == 2);

  int found = 0;
  for (const auto& j : cl.jobs(true)) {
    if (j.name != "lost-reply") continue;
    ++found;
    CHECK(j.id == id);
    CHECK(j.state == core::job_state::pending);
  }
  CHECK(found == 1);
}

TEST_CASE("a submission aqsd refuses, or that cannot reach aqsd, is not sent again") {
  CHECK(client::retryable(client::client_error("aqsd closed the connection")));
  CHECK(client::retryable(client::client_error("database away", protocol::error_code::internal)));
  CHECK_FALSE(client::retryable(client::client_error("no", protocol::error_code::bad_request)));
  CHECK_FALSE(client::retryable(client::client_error("no", protocol::error_code::permission_denied)));
  test::temp_dir dir("aqs-client-test");
  int retries = 0;
  client::submit_retry retry;
  retry.on_retry = [&](int, const std::string&) { ++retries; };
  protocol::submit s;
  s.job.name = "nowhere";
  s.job.argv = {"true"};
  s.job.workdir = "/";
  CHECK_THROWS_AS(client::submit((dir.path() / "none.sock").string(), s, retry), client::client_error);
  CHECK(retries == 0);
}

TEST_CASE("fsub --test-only and sbatch --test-only say when a job would start and store nothing") {
  test::test_database db;
  test::cluster c(test::nodes_of(db, 1, 2));
  c.wait_nodes_up(1);
  const auto user = c.user("aqs-client-tess");
  // Both processors busy for a minute (its time limit).
  const std::int64_t busy = c.submit({"-n", "2", "-t", "1:00", "-o", "/dev/null", "--wrap", "sleep 600"});
  c.wait_state(busy, {core::job_state::running});
  const std::size_t before = c.jobs().size();
  auto r = c.cmd(test::bin().fsub, {"--test-only", "-n", "1", "--wrap", "true"}, &user, user.home.string());
  INFO(r.err);
  CHECK(r.status == 0);
  CHECK(r.out.find("Job would start at ") == 0);
  CHECK(r.out.find("on 1 processors") != std::string::npos);
  r = c.cmd(test::bin().fsub, {"--test-only", "--json", "-n", "1", "--wrap", "true"});
  CHECK(r.status == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["test_only"] == true);
  // Within the busy job's minute (it started a moment ago).
  CHECK(j["start_in_s"].get<double>() > 0);
  CHECK(j["start_in_s"].get<double>() <= 60);
  r = c.cmd(AQS_SBATCH_BINARY, {"--test-only", "-n", "1", "--wrap", "true"});
  CHECK(r.status == 0);
  CHECK(r.err.find("sbatch: Job 0 to start at ") == 0);
  CHECK(r.err.find("using 1 processors") != std::string::npos);
  // Bad input: one line, nothing stored.
  r = c.cmd(test::bin().fsub, {"--test-only", "-n", "64", "--wrap", "true"});
  CHECK(r.status != 0);
  CHECK(r.err.find("can never run") != std::string::npos);
  CHECK(c.jobs().size() == before);
  c.cmd(test::bin().fkill, {std::to_string(busy)});
  c.wait_idle();
}
