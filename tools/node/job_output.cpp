// job_output: output file names, and the pipes of interactive jobs read as the job writes them.
#include "job_output.hpp"

#include <array>
#include <fcntl.h>
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "core/output_pattern.hpp"

namespace aqs::node {

namespace asio = boost::asio;
using namespace std::chrono_literals;

void set_output_files(const protocol::launch& l, launch_spec& spec, std::string_view node_name) {
  core::pattern_values values{l.job_id, l.job.name, l.user, node_name, 0, -1};
  if (const auto& g = l.job.geometry; g && g->array_task_id) {
    values.array_job_id = g->array_job_id.value_or(l.job_id);
    values.array_task_id = *g->array_task_id;
  }
  spec.stdout_path = core::expand_output_pattern(l.job.stdout_pattern, values);
  if (l.job.stderr_pattern) spec.stderr_path = core::expand_output_pattern(*l.job.stderr_pattern, values);
}

bool output_pipes::open() {
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return false;
  out_read.reset(out[0]);
  out_write.reset(out[1]);
  if (::pipe2(err, O_CLOEXEC) != 0) return false;
  err_read.reset(err[0]);
  err_write.reset(err[1]);
  return true;
}

void output_pipes::attach(launch_spec& spec) const {
  spec.stdout_fd = out_write.get();
  spec.stderr_fd = err_write.get();
}

output_forwarder::output_forwarder(asio::io_context& io, send_callback send, end_callback drained)
    : io_(io), send_(std::move(send)), drained_(std::move(drained)) {}

output_forwarder::~output_forwarder() = default;

void output_forwarder::forward(std::int64_t job_id, output_pipes pipes) {
  pipes.out_write.reset();
  pipes.err_write.reset();
  streams& s = jobs_[job_id];
  s.out = std::make_unique<asio::posix::stream_descriptor>(io_, pipes.out_read.release());
  s.err = std::make_unique<asio::posix::stream_descriptor>(io_, pipes.err_read.release());
  s.open = 2;
  asio::co_spawn(io_, read_stream(job_id, false), asio::detached);
  asio::co_spawn(io_, read_stream(job_id, true), asio::detached);
}

void output_forwarder::abandon(std::int64_t job_id) { close(job_id); }

// The readers see an error and end; the last one to end lets the job go.
void output_forwarder::close(std::int64_t job_id) {
  auto s = jobs_.find(job_id);
  if (s == jobs_.end()) return;
  boost::system::error_code ignored;
  if (s->second.out) s->second.out->close(ignored);
  if (s->second.err) s->second.err->close(ignored);
}

bool output_forwarder::hold_end(const job_outcome& o) {
  auto it = jobs_.find(o.job_id);
  if (it == jobs_.end() || it->second.open == 0) return false;
  // A process that escaped the job's group and keeps the pipes open gets 2 s.
  it->second.ended = o;
  it->second.linger = std::make_unique<asio::steady_timer>(io_, 2s);
  const std::int64_t id = o.job_id;
  it->second.linger->async_wait([this, id](boost::system::error_code ec) {
    if (!ec) close(id);
  });
  return true;
}

asio::awaitable<void> output_forwarder::read_stream(std::int64_t job_id, bool is_stderr) {
  std::array<char, 64 * 1024> buf{};
  while (true) {
    auto it = jobs_.find(job_id);
    if (it == jobs_.end()) co_return;
    auto& d = is_stderr ? it->second.err : it->second.out;
    if (!d || !d->is_open()) break;
    boost::system::error_code ec;
    const std::size_t n =
        co_await d->async_read_some(asio::buffer(buf), asio::redirect_error(asio::use_awaitable, ec));
    if (n > 0) {
      protocol::output o;
      o.job_id = job_id;
      o.stream = is_stderr ? "stderr" : "stdout";
      o.data.assign(buf.data(), n);
      send_(std::move(o));
    }
    if (ec) break;  // EOF: every writer is gone (or we gave up waiting)
  }
  stream_closed(job_id);
}

void output_forwarder::stream_closed(std::int64_t job_id) {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return;
  if (--it->second.open > 0) return;
  std::optional<job_outcome> ended = std::move(it->second.ended);
  jobs_.erase(it);
  if (ended && drained_) drained_(*ended);
}

}  // namespace aqs::node
