// job_output: where a job's stdout and stderr go: the files its patterns name, or (interactive jobs) pipes read back
// and forwarded to aqsd as output messages.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>

#include <utility>  // Boost 1.74's awaitable.hpp uses std::exchange without it

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>

#include "job_process.hpp"
#include "job_supervisor.hpp"
#include "protocol/messages.hpp"
#include "unique_fd.hpp"

namespace aqs::node {

// Sets spec's output files from the job's patterns (%j, %x, %u expanded).
void set_output_files(const protocol::launch& l, launch_spec& spec, std::string_view node_name);

// An interactive job's stdout and stderr pipes: the step gets the write
// ends, the agent reads the other ends.
struct output_pipes {
  unique_fd out_read, out_write, err_read, err_write;
  // Creates both pipes, close-on-exec (the job gets the write ends by
  // dup2). False, with errno saying why, if it cannot.
  bool open();
  // The job's stdout and stderr are the write ends; they stay ours to close.
  void attach(launch_spec& spec) const;
};

// Reads interactive jobs' pipes until EOF and sends what comes as output
// messages. A job's end waits until both its pipes are drained, so that
// frun prints all the output before it exits; a process that escaped the
// job and keeps them open delays it 2 s at most.
// Single-threaded, on the agent's io_context.
class output_forwarder {
public:
  using send_callback = std::function<void(protocol::output)>;
  using end_callback = std::function<void(const job_outcome&)>;
  // `drained` gets each end held back by hold_end() once the job's output is all sent.
  output_forwarder(boost::asio::io_context& io, send_callback send, end_callback drained);
  ~output_forwarder();
  output_forwarder(const output_forwarder&) = delete;
  output_forwarder& operator=(const output_forwarder&) = delete;

  // Starts reading the job's pipes. Closes the write ends: the job's step
  // has its own copies, and EOF must come when the job's are gone.
  void forward(std::int64_t job_id, output_pipes pipes);
  // The job never started: stops reading its pipes.
  void abandon(std::int64_t job_id);
  // The job ended: true if its end waits for its output (then `drained`
  // gets it), false if nothing of it is being read.
  bool hold_end(const job_outcome& o);

private:
  struct streams {
    std::unique_ptr<boost::asio::posix::stream_descriptor> out, err;
    int open = 0;
    std::optional<job_outcome> ended;
    std::unique_ptr<boost::asio::steady_timer> linger;
  };
  boost::asio::awaitable<void> read_stream(std::int64_t job_id, bool is_stderr);
  void stream_closed(std::int64_t job_id);
  void close(std::int64_t job_id);

  boost::asio::io_context& io_;
  send_callback send_;
  end_callback drained_;
  std::map<std::int64_t, streams> jobs_;
};

}  // namespace aqs::node
