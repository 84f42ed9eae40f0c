// Unit tests of job_output: output file names, and an interactive job's pipes read back as output messages, its end
// held until they are drained.
#include <doctest/doctest.h>

#include <cerrno>
#include <chrono>
#include <fcntl.h>
#include <string>
#include <unistd.h>
#include <utility>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "job_output.hpp"

using namespace aqs;
using namespace aqs::node;
using namespace std::chrono_literals;

namespace {

void write_all(int fd, const std::string& s) {
  REQUIRE(::write(fd, s.data(), s.size()) == static_cast<ssize_t>(s.size()));
}

// A forwarder that records what it sends and which ends it lets go.
struct recorder {
  boost::asio::io_context io;
  std::vector<protocol::output> sent;
  std::vector<job_outcome> drained;
  output_forwarder forwarder{io, [this](protocol::output o) { sent.push_back(std::move(o)); },
                             [this](const job_outcome& o) { drained.push_back(o); }};

  // Runs the io_context until `done` or `limit` passes; false on the limit.
  template <typename F>
  bool run_until(F done, std::chrono::milliseconds limit = 5s) {
    const auto until = std::chrono::steady_clock::now() + limit;
    while (!done()) {
      if (std::chrono::steady_clock::now() >= until) return false;
      if (io.stopped()) io.restart();
      io.run_one_for(10ms);
    }
    return true;
  }
  std::string text_of(const char* stream) const {
    std::string out;
    for (const auto& o : sent) {
      if (o.stream == stream) out += o.data;
    }
    return out;
  }
};

// Opened pipes plus copies of their write ends, as the job's step holds them.
struct job_with_pipes {
  output_pipes pipes;
  int out = -1, err = -1;
  job_with_pipes() {
    REQUIRE(pipes.open());
    out = ::dup(pipes.out_write.get());
    err = ::dup(pipes.err_write.get());
  }
  ~job_with_pipes() {
    if (out >= 0) ::close(out);
    if (err >= 0) ::close(err);
  }
  void close_out() { ::close(std::exchange(out, -1)); }
  void close_err() { ::close(std::exchange(err, -1)); }
};

job_outcome ended(std::int64_t id, int code) {
  job_outcome o;
  o.job_id = id;
  o.status.exit_code = code;
  o.state = code == 0 ? core::job_state::completed : core::job_state::failed;
  return o;
}

}  // namespace

TEST_CASE("a job's output files are its patterns expanded, and without an error pattern stderr goes with stdout") {
  protocol::launch l;
  l.job_id = 42;
  l.job.name = "sim";
  l.user = "ann";
  l.job.stdout_pattern = "out-%j-%x-%u.txt";
  launch_spec spec;
  set_output_files(l, spec, "node0");
  CHECK(spec.stdout_path == "out-42-sim-ann.txt");
  CHECK(spec.stderr_path.empty());
  l.job.stderr_pattern = "err-%6j";
  set_output_files(l, spec, "node0");
  CHECK(spec.stderr_path == "err-000042");
}

TEST_CASE("an interactive job's stdout and stderr are the write ends of two close-on-exec pipes") {
  output_pipes pipes;
  REQUIRE(pipes.open());
  for (const unique_fd* fd : {&pipes.out_read, &pipes.out_write, &pipes.err_read, &pipes.err_write}) {
    REQUIRE(static_cast<bool>(*fd));
    CHECK((::fcntl(fd->get(), F_GETFD) & FD_CLOEXEC) != 0);
  }
  launch_spec spec;
  pipes.attach(spec);
  CHECK(spec.stdout_fd == pipes.out_write.get());
  CHECK(spec.stderr_fd == pipes.err_write.get());
  write_all(spec.stdout_fd, "x");
  char c = 0;
  CHECK(::read(pipes.out_read.get(), &c, 1) == 1);
  CHECK(c == 'x');
}

TEST_CASE("what a job writes to its pipes is sent as output, and its end waits until both are drained") {
  recorder r;
  job_with_pipes job;
  r.forwarder.forward(42, std::move(job.pipes));
  write_all(job.out, "hello ");
  write_all(job.err, "oops\n");
  CHECK(r.run_until([&] { return r.text_of("stdout") == "hello " && r.text_of("stderr") == "oops\n"; }));
  CHECK(r.forwarder.hold_end(ended(42, 3)));
  write_all(job.out, "world\n");
  job.close_err();
  CHECK(r.run_until([&] { return r.text_of("stdout") == "hello world\n"; }));
  CHECK(r.drained.empty());  // stdout is still open
  job.close_out();
  // Well before the 2 s an escaped process gets: only the job's copies kept
  // the pipes open, the forwarder closed its write ends.
  REQUIRE(r.run_until([&] { return !r.drained.empty(); }, 1500ms));
  CHECK(r.drained.size() == 1);
  CHECK(r.drained[0].job_id == 42);
  CHECK(r.drained[0].status.exit_code == 3);
  for (const auto& o : r.sent) CHECK(o.job_id == 42);
  CHECK_FALSE(r.forwarder.hold_end(ended(42, 0)));  // nothing of it is read any more
}

TEST_CASE("a job whose pipes were closed before it ended has its end reported at once") {
  recorder r;
  job_with_pipes job;
  r.forwarder.forward(7, std::move(job.pipes));
  write_all(job.out, "bye\n");
  job.close_out();
  job.close_err();
  r.io.run();  // until both readers have seen EOF
  CHECK(r.text_of("stdout") == "bye\n");
  CHECK_FALSE(r.forwarder.hold_end(ended(7, 0)));  // the caller reports it
  CHECK(r.drained.empty());
}

TEST_CASE("a job whose pipes an escaped process keeps open has its end reported about 2 s after it ended") {
  recorder r;
  job_with_pipes job;  // its copies stay open throughout
  r.forwarder.forward(5, std::move(job.pipes));
  const auto start = std::chrono::steady_clock::now();
  REQUIRE(r.forwarder.hold_end(ended(5, 0)));
  CHECK_FALSE(r.run_until([&] { return !r.drained.empty(); }, 1500ms));
  REQUIRE(r.run_until([&] { return !r.drained.empty(); }, 3s));
  const auto waited = std::chrono::steady_clock::now() - start;
  CHECK(waited >= 1900ms);
  CHECK(r.drained[0].job_id == 5);
}

TEST_CASE("a job that never started has its pipes closed and no end reported") {
  recorder r;
  job_with_pipes job;
  r.forwarder.forward(9, std::move(job.pipes));
  r.forwarder.abandon(9);
  r.io.run();  // until both readers have given up
  CHECK_FALSE(r.forwarder.hold_end(ended(9, 0)));
  CHECK(r.drained.empty());
  CHECK(r.sent.empty());
  r.forwarder.abandon(9);  // twice, or for a job never forwarded: nothing happens
  r.forwarder.abandon(1234);
}

TEST_CASE("a job without pipes has no end to hold") {
  recorder r;
  CHECK_FALSE(r.forwarder.hold_end(ended(11, 0)));
  CHECK(r.drained.empty());
}
