// faucets_uplink: aqsd's connection out to a Faucets server (faucetsd):
// over TLS, proving this cluster's key, it reports the cluster's room and
// queue every second, takes jobs the server forwards (run as the local user
// the admin's table allows), answers "when would this start here" from the
// cluster's own scheduling core, cancels on request, and reports the state
// of every job the server placed here. Reconnects with backoff.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/asio/io_context.hpp>

namespace aqs::daemon {

class controller;

// Whether a stored submit token is one the uplink gave a forwarded job
// ("faucets:CLUSTER:ID.ATTEMPT", stored as "u<uid>:faucets:...").
inline bool placed_by_faucets(std::string_view token) {
  return token.starts_with("faucets:") || token.find(":faucets:") != std::string_view::npos;
}

// What a forwarded job's submit token says: the server's job id and which
// of its forwards made this copy (0: a token without one).
struct faucets_mark {
  std::int64_t fid = 0;
  std::int64_t attempt = 0;
};
std::string faucets_token(const std::string& cluster, std::int64_t fid, std::int64_t attempt);
// nullopt: not a Faucets token, or not one the uplink wrote.
std::optional<faucets_mark> parse_faucets_token(std::string_view token);

// Which server users may run here as which local users: the admin's table,
// one "SERVER_USER LOCAL_USER" pair per line ('#' comments; "*" as the
// server user matches anyone, "*" as the local user means the same name).
// Root is never a local user through the server.
class faucets_user_table {
public:
  faucets_user_table() = default;
  // Throws std::runtime_error naming the file and line.
  static faucets_user_table load(const std::filesystem::path& file);
  static faucets_user_table parse(const std::string& text, const std::string& origin);
  // Why `server_user` may not run here as `local_user`; nullopt: allowed.
  std::optional<std::string> refusal(const std::string& server_user, const std::string& local_user) const;

private:
  std::vector<std::pair<std::string, std::string>> rules_;
};

// The price this cluster asks, credits per processor-second: its rate
// scaled by its load, rate x (1 + load), load = (processors busy + processors
// queued) / processors usable (0 idle, 1 full, above 1 with a queue). No
// usable processor: rate x 2.
double faucets_price(double rate, std::int64_t procs_total, std::int64_t procs_free, std::int64_t pending_procs);

// Processor-seconds a job held: the integral of its processor count over
// time, fed each change (time in Unix seconds, the processors it holds from
// then on); what the server's ledger charges at the job's end.
class held_meter {
public:
  void change(double time, std::int64_t nprocs);
  // Up to `time` (the last change's time when earlier).
  double total(double time) const;
  bool started() const noexcept { return since_ > 0; }

private:
  double acc_ = 0, since_ = 0;
  std::int64_t nprocs_ = 0;
};

struct uplink_options {
  std::string server;                // HOST:PORT of faucetsd's --listen
  std::string cluster;               // this cluster's name at the server
  std::filesystem::path ca;          // verifies the server's certificate
  std::string key;                   // this cluster's key (its content), proved by HMAC
  faucets_user_table users;
  double speed = 1.0;                // per-processor speed score, 1.0 = reference
  double rate = 1.0;                 // credits per processor-second, before the load (faucets_price)
  std::vector<std::string> datasets; // data sets this cluster holds
  std::chrono::milliseconds report_every{1000};
  std::chrono::milliseconds retry_max{5000};
  // No message from the server for this long: the link is dead.
  std::chrono::milliseconds silence_limit{10'000};
  // A job's start the server has not confirmed by then: the link is dead.
  std::chrono::milliseconds start_timeout{5000};
  // Staged files (job_files.hpp): where forwarded jobs' directories are
  // made (empty: STATE_DIR/faucets-stage, set by aqsd), and the most a job
  // may bring in or send back (--faucets-stage-max-bytes).
  std::filesystem::path stage_root;
  std::size_t stage_max_bytes = std::size_t{8} << 20;  // protocol::k_default_stage_max_bytes
};

class uplink_error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

class faucets_uplink {
public:
  // Adds a change listener to `ctl`: construct before ctl.start(). Throws
  // uplink_error for a bad address or CA file.
  faucets_uplink(boost::asio::io_context& io, controller& ctl, uplink_options options);
  ~faucets_uplink();
  faucets_uplink(const faucets_uplink&) = delete;
  faucets_uplink& operator=(const faucets_uplink&) = delete;

  void start();
  // Closes the link; bounded (no waiting on the server).
  void stop();
  bool connected() const noexcept;

  struct state;

private:
  std::shared_ptr<state> state_;
};

}  // namespace aqs::daemon
