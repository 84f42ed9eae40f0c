// parking: where ranks that a shrink dropped wait, blocked in read() and
// using no CPU, until an expansion calls them back or the job ends.
//
// The leader (active rank 0) keeps the pool: it listens on a TCP port, and a
// dropped rank connects to it, says which host it is on ("host NAME\n") and
// blocks reading one command:
//   "join PORT\n"  come back: answer "ok\n" and wait for the leader's
//                  "go\n", then MPI_Comm_connect(PORT). Anything else after
//                  "ok" (the leader gave up waiting for it) sends the rank
//                  back to the pool: it parks again, at the same address.
//   "move ADDR\n"  the leader changed: park at ADDR instead;
//   end of file    the job is ending: MPI_Finalize and exit.
// The "go" makes the call-back a commitment on both sides: the leader only
// accepts on PORT after it has sent "go", and a rank only connects after it
// has read it, so no timeout of the leader's can leave a rank connecting to
// a port nobody accepts on (issue 15).
// Calling a parked rank back costs a connect/accept instead of starting a
// process, and keeps a job that shrinks and grows many times from piling up
// parked processes.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace aqs::runtime {

class park_pool {
public:
  park_pool() = default;
  ~park_pool() { close(); }
  park_pool(const park_pool&) = delete;
  park_pool& operator=(const park_pool&) = delete;

  // Listens (once) and returns "HOST PORT IP,IP..." for parked ranks to
  // connect to: this machine's host name, and its IPv4 addresses for ranks
  // on hosts where that name does not resolve. Throws std::runtime_error.
  std::string address();
  // Takes in the ranks that have parked here since the last call. Never
  // waits: a rank that has connected but not yet said its host (a slow one
  // on a loaded machine) is kept aside and taken in by a later call.
  void collect() noexcept;
  // Calls back one rank parked on `host`: sends it `port`, waits for its
  // "ok" (up to a minute: a dead rank's closed connection ends the wait at
  // once), then sends "go". True: that rank is now connecting to `port`.
  // False when no rank there answers; a rank that answers after the leader
  // gave up parks again, and a later collect() takes it in.
  bool call_back(const std::string& host, const std::string& port) noexcept;
  // Hands every rank parked here to the leader at `address`, and stops
  // listening.
  void move_all(const std::string& address) noexcept;
  // Wakes every rank parked here so that it finalizes; stops listening.
  void close() noexcept;
  // Ranks taken in that said their host (the ones call_back can pick).
  std::size_t parked() const noexcept { return parked_.size(); }

private:
  struct entry {
    int fd = -1;
    std::string host;
  };
  int fd_ = -1;
  std::string address_;
  std::vector<entry> parked_;
  std::vector<int> unnamed_;  // connected, host not said yet
};

// A dropped rank: parks at `address` (from park_pool::address), follows
// "move"s, parks again when the leader gives up on its call-back, and
// returns the port to connect to once the leader said "go", or nullopt when
// the job is ending (or the leader cannot be reached).
std::optional<std::string> wait_parked(std::string address) noexcept;

// This machine's host name.
std::string local_host_name();

}  // namespace aqs::runtime
