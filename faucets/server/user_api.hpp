// user_api: the users' HTTP API of faucetsd (docs/faucets.md): bearer
// tokens faucetsd issued (ftoken on its Unix socket), each request acting
// as the token's user; root sees and cancels every job. TLS with --cert,
// plain HTTP only on loopback. And the overview page at /.
//
// Rule: the API owns the users' port: its listener, its connections and
// their counts per address and user, and the budget of request bodies being
// read. It holds no job: it reads and changes them only through a
// user_backend (faucets_server wires the router and the store behind it; the
// unit tests a fake). Its routes are declared once, in user_routes(): the
// router, the 404/405 answers, the body limits and the tests read that
// table. Everything runs on faucetsd's one io_context thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>
#include <utility>  // before Boost.Asio's awaitable.hpp, which needs std::exchange

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>
#include <nlohmann/json.hpp>

#include "daemon_base/token_authority.hpp"
#include "server/conn_limits.hpp"
#include "server/faucets_store.hpp"
#include "server/web_desk.hpp"

namespace aqs::faucets {

using api_request = boost::beast::http::request<boost::beast::http::string_body>;
using api_response = boost::beast::http::response<boost::beast::http::string_body>;

// What the users' API asks of the rest of faucetsd. Calls may throw the
// store's errors (a broken connection is answered 503, others 500).
class user_backend {
public:
  virtual ~user_backend() = default;
  // The job's id, or 0 with `error` set (job_router::submit).
  virtual std::int64_t submit(const std::string& owner, const std::string& cluster, nlohmann::json submit_message,
                              std::string* error) = 0;
  // Why not, or nullopt once cancelled (job_router::cancel).
  virtual std::optional<std::string> cancel(const stored_job& j) = 0;
  // {"clusters": [...], "policy": NAME}.
  virtual nlohmann::json clusters() const = 0;
  // Newest first; owner unset: everyone's; all: finished too (faucets_store::jobs).
  virtual std::vector<stored_job> jobs(const std::optional<std::string>& owner, bool all,
                                       const std::optional<std::string>& cluster) = 0;
  virtual std::optional<stored_job> job(std::int64_t id) = 0;
  virtual std::vector<history_line> history(std::int64_t id) = 0;
  // The ledger (faucets_store's ledger_book): balances of every owner, and
  // entries newest first (owner set: those it pays or earns).
  virtual std::map<std::string, std::int64_t> balances() = 0;
  virtual std::vector<ledger_entry> ledger_entries(const std::optional<std::string>& owner, std::int64_t limit) = 0;
  // The page's questions to the clusters (web_desk): a quote for a job not
  // submitted (`owner` asking), and a view ("values" or "output") of a placed
  // job, asked of its cluster. The answer, or the one-line reason.
  virtual boost::asio::awaitable<desk_answer> quote(const std::string& owner, const nlohmann::json& body) = 0;
  virtual boost::asio::awaitable<desk_answer> view(const stored_job& j, const std::string& what, double since,
                                                   std::int64_t bytes) = 0;
  // Staged files (GET /api/v1/jobs/{id}/outputs): {"outputs": waiting|back|failed,
  // "detail", "in_bytes", "out_bytes", "files": [...] (wire form, protocol/staged_files.hpp)},
  // or null when the job staged nothing.
  virtual nlohmann::json staged_outputs(std::int64_t /*id*/) { return nullptr; }
};

// What a route does (each has exactly one handler in user_api.cpp: a switch
// the compiler holds to this list).
// job_page, quote, values, output: the browser's; outputs: staged files back (issue 35).
enum class user_route_kind : unsigned char {
  overview, clusters, list_jobs, submit, job, history, cancel, ledger, job_page, quote, values, output, outputs
};

// One route of the users' API.
struct user_route {
  std::string_view method;  // GET, POST
  std::string_view path;    // "/api/v1/jobs/{id}": {id} a job id
  bool token;               // a bearer token is needed
  bool job_body;            // its body is a job (max_job_body), else at most max_other_body
  user_route_kind kind;
};
// Every route faucetsd's users' API answers.
const std::vector<user_route>& user_routes();

// The route `method path` names: `route` null with `path_known` (and the
// methods it takes in `allow`, "GET, POST") when only the method is wrong.
struct user_route_match {
  const user_route* route = nullptr;
  std::int64_t id = 0;
  bool path_known = false;
  std::string allow;
};
user_route_match match_user_route(std::string_view method, std::string_view path);

// A request as far as its head: its route and who asks.
struct user_call {
  const user_route* route = nullptr;
  std::int64_t id = 0;
  std::optional<daemon::token_claims> who;  // set for every route needing a token
};
// Decides on the head alone, before any body byte is read: the call, or the
// refusal to send (404 for an unknown path, 401 for a missing or refused
// token on any /api/v1 path, 405 with Allow for a known path with another
// method). `now_us`: Unix time in microseconds (token expiry).
std::variant<api_response, user_call> authorize(const daemon::token_authority& tokens,
                                                const boost::beast::http::request_header<>& head, std::int64_t now_us);
// Answers an authorized call with its body. Throws what the backend throws.
// The routes that ask a cluster (quote, values, output) wait for it: only
// answer_async answers those (answer() says 500).
api_response answer(user_backend& backend, const user_call& call, const api_request& req);
boost::asio::awaitable<api_response> answer_async(user_backend& backend, user_call call, const api_request& req);
// {"error": message} with `status`, as every refusal of the API.
api_response error_reply(unsigned status, const std::string& message);

struct user_api_options {
  std::string listen;                       // HOST:PORT
  bool tls = true;                          // false: plain HTTP, refused unless on loopback
  std::filesystem::path cert, key;          // with tls
  server_limits limits;
};

class user_api {
public:
  user_api(boost::asio::io_context& io, user_api_options options, user_backend& backend,
           const daemon::token_authority& tokens);
  ~user_api();
  user_api(const user_api&) = delete;
  user_api& operator=(const user_api&) = delete;
  // Binds (throws std::runtime_error naming the address, or refusing plain
  // HTTP off loopback) and starts accepting.
  void start();
  void stop();  // posted: call from any thread
  unsigned short port() const noexcept { return port_; }
  bool tls() const noexcept { return options_.tls; }

private:
  template <class Stream>
  boost::asio::awaitable<void> session(Stream& stream, conn_slot& slot, watchdog& dog);
  void serve(boost::asio::ip::tcp::socket sock, conn_slot slot);

  boost::asio::io_context& io_;
  user_api_options options_;
  user_backend& backend_;
  const daemon::token_authority& tokens_;
  std::unique_ptr<boost::asio::ssl::context> tls_;
  std::unique_ptr<boost::asio::ip::tcp::acceptor> acceptor_;
  unsigned short port_ = 0;
  std::shared_ptr<conn_counts> conns_ = std::make_shared<conn_counts>();
  std::shared_ptr<body_budget> bodies_ = std::make_shared<body_budget>();
};

}  // namespace aqs::faucets
