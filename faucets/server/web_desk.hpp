// web_desk: what faucetsd's page asks of the clusters for one user: a quote
// (when a job would start on each cluster, before it is submitted) and a
// view of a placed job (its published values, its output's tail), asked of
// the cluster that runs it over the job's link.
//
// Rule: the desk owns only its questions in flight (qid -> answer, from
// k_desk_qid_base up, so the hub tells its answers from the router's); it
// changes no job and stores nothing. It reaches clusters through the hub's
// cluster_links; the hub hands it the answers (set_desk). Everything runs on
// faucetsd's one io_context thread: no locks.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <utility>  // before Boost.Asio's awaitable.hpp, which needs std::exchange

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <nlohmann/json.hpp>

#include "broker/broker.hpp"
#include "server/cluster_hub.hpp"
#include "server/faucets_store.hpp"
#include "server/user_map.hpp"

namespace aqs::faucets {

// An answer, or the one-line reason there is none.
using desk_answer = std::variant<nlohmann::json, std::string>;

// The largest output tail a view asks for (bytes).
inline constexpr std::int64_t k_max_output_tail = 65536;

class web_desk {
public:
  web_desk(boost::asio::io_context& io, cluster_links& hub, const user_map& users, std::chrono::milliseconds timeout);
  web_desk(const web_desk&) = delete;
  web_desk& operator=(const web_desk&) = delete;

  // POST /api/v1/quote: `body` as POST /api/v1/jobs takes it ({"cluster":
  // "auto"|NAME, "job": {...}, "contract": {...}}), checked by the same rules
  // (aqsd's job rules, the contract's, the user table, a known cluster);
  // then every cluster the job could go to is asked for its bid. Answers
  // {"clusters": [{"name", "state": "UP"|"DOWN", "eligible", "why",
  // "start_in_s", "completion_in_s", "price"}]}; a cluster that does not
  // answer within the timeout has nulls. Nothing is queued or changed.
  boost::asio::awaitable<desk_answer> quote(const std::string& owner, const nlohmann::json& body);

  // A view of `j` asked of the cluster that runs it: `what` "values" (the
  // points at or after `since`, Unix seconds) or "output" (the last `bytes`
  // of its standard output). The reason when it is on no cluster, the
  // cluster is away or does not answer, or refuses.
  boost::asio::awaitable<desk_answer> view(const stored_job& j, const std::string& what, double since,
                                           std::int64_t bytes);

  // The hub's answers (job_view_reply, estimate_reply with a desk qid).
  void on_answer(const std::string& cluster, const std::string& type, const nlohmann::json& m);

private:
  struct waiting {
    std::string cluster;
    std::optional<nlohmann::json> answer;
    std::shared_ptr<boost::asio::steady_timer> wake;
  };
  // Sends nothing; waits until every qid of `qids` is answered or the timeout.
  boost::asio::awaitable<void> wait_for(const std::vector<std::int64_t>& qids);
  // Sends `message` with a new qid to `cluster`: the qid (answered with
  // null at once when the cluster is not connected).
  std::int64_t ask(const std::string& cluster, nlohmann::json message);
  std::int64_t ask_estimate_(const std::string& cluster, const job_ask& a);

  boost::asio::io_context& io_;
  cluster_links& hub_;
  const user_map& users_;
  std::chrono::milliseconds timeout_;
  std::int64_t next_qid_ = k_desk_qid_base;
  std::map<std::int64_t, waiting> waiting_;
};

}  // namespace aqs::faucets
