// parking: where ranks that a shrink dropped wait, blocked in read() and
// using no CPU, until the job ends and they may call MPI_Finalize.
//
// The leader (active rank 0) listens on a TCP port. A dropped rank connects
// to the current leader and blocks reading. Whoever holds a listener wakes
// everyone parked on it by closing it: connections still in the accept queue
// are reset, so nobody needs to accept them. A leader that is dropped itself
// keeps its listener open while it waits and closes it when woken, so the
// wake-up passes down the chain.
#pragma once

#include <string>

namespace aqs::runtime {

class park_listener {
public:
  park_listener() = default;
  ~park_listener() { close(); }
  park_listener(const park_listener&) = delete;
  park_listener& operator=(const park_listener&) = delete;

  // Listens (once) and returns "HOST PORT" for parked ranks to connect to;
  // HOST is this machine's host name. Throws std::runtime_error.
  std::string address();
  // Wakes everyone parked here.
  void close() noexcept;
  bool open() const noexcept { return fd_ >= 0; }

private:
  int fd_ = -1;
  std::string address_;
};

// Connects to `address` (from park_listener::address) and blocks until that
// listener closes (or its process dies). Returns at once if it cannot connect
// (the job is already ending).
void wait_parked(const std::string& address) noexcept;

// This machine's host name.
std::string local_host_name();

}  // namespace aqs::runtime
