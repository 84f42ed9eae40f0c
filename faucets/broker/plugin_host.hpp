// plugin_host: broker policies written by the site (docs/admin-guide.md
// "Broker plugins"): a program (any language) or a shared library (the C ABI
// of aqs_broker_plugin.h), found by name in the one directory the admin
// configured, asked for a ranking of the candidate clusters of one job,
// confined by plugin_runner. A plugin's fault is an outcome (a reason to log
// and fall back to the default policy), never an exception.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "broker/broker.hpp"
#include "broker/plugin_runner.hpp"

namespace aqs::faucets {

// "plugin:NAME" as a policy name: NAME, else nullopt.
std::optional<std::string> plugin_name_of(std::string_view policy);

// Why `name` cannot be a plugin's name (one line), or nullopt. A name is
// letters, digits, '.', '_', '-', at most 64, not starting with '.' or '-':
// never a path ('/' and ".." are refused), so that a user naming a plugin
// reaches only what the admin put in the plugin directory.
std::optional<std::string> bad_plugin_name(std::string_view name);

struct plugin_options {
  std::filesystem::path dir;  // the only place plugins are looked up (--plugin-dir); empty: no plugins
  run_limits limits;
  // The program that hosts shared-library plugins: faucetsd itself, run as
  // `faucetsd --broker-plugin-host [--check] FILE.so` (run_library_host).
  std::filesystem::path library_host;
};

// The plugin could not be found or is not safe to run; the message is one
// line naming the directory searched.
class plugin_error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

// One job as a plugin sees it: the broker's ask and who and what it is.
struct plugin_job {
  std::int64_t id = 0;
  std::string owner, name;
  job_ask ask;
};

// A plugin's decision, or why there is none.
struct plugin_ranking {
  std::vector<std::string> ranked;  // best first; every name a candidate's; empty when failed
  std::string reason;               // the plugin's own one line, possibly empty
  std::optional<std::string> failure;  // why the plugin was ignored for this job
};

// The request a plugin reads (aqs_broker_plugin.h documents the shape).
nlohmann::json plugin_request(std::string_view name, const plugin_job& job, std::span<const cluster_view> clusters);
// Reads a plugin's answer against the candidates: the ranking, or failure
// set to why the answer is refused (not JSON, not a list of names, a name
// that is not a candidate, a name twice, no name).
plugin_ranking parse_plugin_answer(const std::string& text, std::span<const cluster_view> clusters);

class plugin_host {
public:
  explicit plugin_host(plugin_options options);
  // Finds NAME in the directory: DIR/NAME.so (a library) or DIR/NAME (an
  // executable program). Both the file and the directory must be owned by
  // root or by faucetsd's user and writable by no one else (anyone who can
  // write there runs code as faucetsd). A library is loaded once by the
  // host with --check. Throws plugin_error: "unknown broker plugin 'x'
  // (looked for x.so and x in /etc/aqs/broker-plugins)" and the like.
  void check(std::string_view name) const;
  // Asks plugin `name` to rank `clusters` for `job`. Blocks for at most
  // about the time limit; call it off the event loop.
  plugin_ranking rank(std::string_view name, const plugin_job& job, std::span<const cluster_view> clusters) const;
  const plugin_options& options() const noexcept { return options_; }

private:
  struct found {
    std::filesystem::path file;
    bool library = false;
  };
  found find(std::string_view name) const;  // throws plugin_error

  plugin_options options_;
};

// The plugin host's main: `faucetsd --broker-plugin-host [--check] FILE`.
// dlopen()s FILE, checks aqs_broker_plugin_abi(), and unless --check reads
// the request on stdin, calls aqs_broker_rank() and prints its answer.
// Returns the exit status (0, or 1 with one line on stderr).
int run_library_host(int argc, char** argv);

}  // namespace aqs::faucets
