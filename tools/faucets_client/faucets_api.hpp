// faucets_api: a small blocking client of a Faucets server's (faucetsd's)
// HTTP(S) JSON API for users (/work/spec-faucets.md, docs/user-guide.md
// "Submitting through a Faucets server"): what fsub, fjobs and fkill use
// with -M/--faucets, and what tests drive a faucetsd with.
//
// Every request is one new connection (Connection: close) with a bearer
// token; https:// verifies the server's certificate and name against a CA
// file or the system's CAs; http:// is allowed to a loopback host only. All
// failures are faucets::error with a one-line what() for the user.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace aqs::client::faucets {

// Anything that went wrong; what() is one line without the program name:
//   "cannot reach the faucets server at https://f.example:8443: Connection refused"
//   "the faucets server refused the token: token revoked"
// http_status(): the server's HTTP status when it answered with an error,
// 0 when there was no answer (address, connection, TLS, timeout, local setup).
class error : public std::runtime_error {
public:
  explicit error(const std::string& message, int http_status = 0)
      : std::runtime_error(message), http_status_(http_status) {}
  int http_status() const noexcept { return http_status_; }

private:
  int http_status_;
};

// ---- where the server is ---------------------------------------------------

struct base_url {
  bool tls = true;
  std::string host;       // a name, an IPv4 address or an IPv6 one (no brackets)
  std::uint16_t port = 443;
  std::string prefix;     // a path the API lives under ("" or "/faucets"), no trailing '/'
  // "https://host:port[prefix]" (IPv6 in brackets).
  std::string text() const;
  friend bool operator==(const base_url&, const base_url&) = default;
};

// Parses "https://HOST[:PORT][/PREFIX]" or "http://HOST[:PORT][/PREFIX]"
// (scheme in any case; default ports 443 and 80; "[::1]:8443" for IPv6; one
// trailing '/' dropped). http:// only to a loopback host (localhost,
// 127.0.0.0/8, ::1): the token would otherwise cross the network in clear.
// Throws error: unsupported scheme, user@ in it, no host, a bad port, a query
// or fragment, plain http to another host.
base_url parse_base_url(std::string_view text);
// localhost, 127.x.y.z, ::1 (and "localhost." / "[::1]").
bool is_loopback_host(std::string_view host);

// ---- token, CA and server from the options and the environment ---------------

// The environment variables the commands read (unset or empty: nullopt).
struct environment {
  std::optional<std::string> faucets;     // $AQS_FAUCETS: the server's URL
  std::optional<std::string> faucets_ca;  // $AQS_FAUCETS_CA: a CA file
  std::optional<std::string> token;       // $AQS_TOKEN: the token itself
  std::optional<std::string> home;        // $HOME, else the passwd entry's
  static environment of_process();
};

// Where the bearer token comes from, in this order:
//   1. $AQS_TOKEN;
//   2. --token-file FILE (`token_file`);
//   3. the file $HOME/.aqs/faucets-token.
// A file's first line, blanks around it dropped. `source` says which
// ("$AQS_TOKEN", or the file's path). Throws error: a --token-file that
// cannot be read or is empty, a token that is not printable ASCII without
// blanks, or none found anywhere (saying how to get one).
struct found_token {
  std::string token;
  std::string source;
};
found_token find_token(const environment& env, const std::optional<std::string>& token_file);

struct client_options {
  base_url url;
  std::optional<std::string> ca_file;  // nullopt: the system's CAs
  std::string token;                   // sent as "Authorization: Bearer <token>"; empty: no header
  std::chrono::milliseconds connect_timeout{std::chrono::seconds(10)};  // resolve + connect + TLS
  std::chrono::milliseconds timeout{std::chrono::seconds(60)};          // request sent + answer read
  std::string user_agent = "aqs-faucets-client";
};

// The options of a command: URL --faucets else $AQS_FAUCETS (neither: error
// "no Faucets server given: set AQS_FAUCETS=https://HOST:PORT or pass
// --faucets URL"), CA --faucets-ca else $AQS_FAUCETS_CA else the system's,
// token as find_token. Throws error.
client_options resolve_client_options(const std::optional<std::string>& url_option,
                                      const std::optional<std::string>& ca_option,
                                      const std::optional<std::string>& token_file_option, const environment& env);

// ---- the API ----------------------------------------------------------------

// POST /api/v1/jobs's answer (201).
struct submitted {
  std::int64_t id = 0;                 // the server's job id
  std::optional<std::string> gid;      // "CLUSTER:LOCAL" once on a cluster
  std::optional<std::string> cluster;  // the cluster chosen, if already
  std::string state;                   // "PENDING"
  nlohmann::json json;                 // the answer as it came
};

// POST /api/v1/jobs/{id}/cancel's answer.
struct cancelled {
  std::int64_t id = 0;
  std::string state;  // "CANCELLED", or the state it already had
  nlohmann::json json;
};

// The one-line message for an HTTP error answer, with the server's
// {"error": "..."} text when the body has one (control characters replaced,
// at most 300 characters):
//   401 "the faucets server refused the token: TEXT"
//   403 "the faucets server does not allow it: TEXT"
//   503 "the faucets server is unavailable: TEXT"
//   other 5xx "the faucets server failed: TEXT"
//   400, 404, 409 and others: TEXT itself ("no job 12")
// and without a text "the faucets server answered HTTP STATUS REASON" (401:
// "the faucets server refused the token (HTTP 401)").
std::string http_error_message(int status, std::string_view body, std::string_view reason = {});

class client {
public:
  // Reads the CA file now (throws error if it cannot: "cannot read the CA
  // file 'F': ...").
  explicit client(client_options options);
  ~client();
  client(client&&) noexcept;
  client& operator=(client&&) noexcept;
  client(const client&) = delete;
  client& operator=(const client&) = delete;

  // POST /api/v1/jobs {"cluster": cluster ("auto" or a name), "job": job}
  // (job: the "job" object of aqsd's submit message, protocol::to_json).
  // `broker`: a broker plugin of the server's for this job (faucetsd --allow-job-plugins);
  // contract: the QoS contract object (docs/faucets.md "Contracts"), null: none.
  // stage_in: staged files in their wire form (protocol/staged_files.hpp), null: none.
  submitted submit(std::string_view cluster, const nlohmann::json& job, const std::optional<std::string>& broker = std::nullopt,
                   const nlohmann::json& contract = nullptr, const nlohmann::json& stage_in = nullptr);
  // GET /api/v1/jobs/{id}/outputs: {"outputs": waiting|back|failed, "detail", "files", ...}.
  nlohmann::json outputs(std::int64_t id);
  // GET /api/v1/jobs[?all=1][&cluster=NAME]: the "jobs" array.
  nlohmann::json list_jobs(bool all = false, const std::optional<std::string>& cluster = std::nullopt);
  // GET /api/v1/jobs/{id}: the job object.
  nlohmann::json job(std::int64_t id);
  // GET /api/v1/jobs/{id}/history: the "events" array.
  nlohmann::json history(std::int64_t id);
  // POST /api/v1/jobs/{id}/cancel.
  cancelled cancel(std::int64_t id);
  // GET /api/v1/clusters: the "clusters" array.
  nlohmann::json clusters();

  // Any request: `method` ("GET", "POST"), `target` ("/api/v1/...", put after
  // the URL's prefix), a JSON body or none. Returns the JSON of a 2xx answer
  // (null for an empty body); throws error for anything else: no answer, an
  // HTTP error (http_error_message), an answer that is not JSON.
  nlohmann::json call(std::string_view method, const std::string& target,
                      const std::optional<nlohmann::json>& body = std::nullopt);

  const client_options& options() const noexcept;

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

// "a b/c" -> "a%20b%2Fc": a query value or path segment.
std::string url_encode(std::string_view s);

}  // namespace aqs::client::faucets
