// job_router: each job in the server's queue is placed, oldest first and one
// at a time, on the cluster the broker policy picks among those that could
// ever run it and whose table lets its user in; then followed to its end. A
// cluster that stays away longer than --cluster-timeout has its queued jobs
// sent elsewhere (their copies there are cancelled when it comes back).
//
// Rule: the router owns the broker and the placements under way (forwards
// waiting for an answer, estimates asked, clusters that refused a job); the
// jobs themselves live in the faucets_store, which only the router changes
// (the user API reads it). It reaches clusters only through the
// cluster_hub's send()/views(). Everything runs on faucetsd's one
// io_context thread: no locks.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>  // before Boost.Asio's awaitable.hpp, which needs std::exchange

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <nlohmann/json.hpp>

#include "broker/broker.hpp"
#include "broker/plugin_host.hpp"
#include "cluster_link/link_messages.hpp"
#include "server/cluster_hub.hpp"
#include "server/faucets_store.hpp"
#include "server/market.hpp"
#include "server/user_map.hpp"

namespace aqs::faucets {

struct router_options {
  std::string policy = "earliest-start";
  std::uint64_t seed = 0;  // for random; 0: from the clock
  std::chrono::seconds cluster_timeout{60};  // told in logs; the hub calls cluster_lost
  std::chrono::milliseconds estimate_timeout{2000};
  std::chrono::seconds forward_timeout{30};  // a forward without an answer counts as refused
  // Broker plugins (plugin_host.hpp): the host, null without --plugin-dir;
  // with policy "plugin:NAME" the plugin ranks every job and, when it
  // fails, k_plugin_fallback_policy decides. job_plugins: the plugins a
  // submission may name for its own job ("broker": NAME; --allow-job-plugins).
  std::shared_ptr<const plugin_host> plugins{};
  std::set<std::string> job_plugins{};
};

// What decides when the server's own policy is a plugin that fails.
inline constexpr std::string_view k_plugin_fallback_policy = "earliest-start";

class job_router final : public cluster_listener {
public:
  // Throws std::invalid_argument for an unknown policy (listing the known ones).
  // `ledger` (may be null: no prices, no charges) and `owners` (who owns
  // which cluster, users' homes, debt limits) make the market: every
  // placement's price is agreed in the ledger book, every finished job is
  // charged there, and an owner in debt beyond its limit is refused by other
  // owners' clusters. An empty owners table: no market (no prices kept, no charges).
  job_router(boost::asio::io_context& io, job_records& store, cluster_links& hub, const user_map& users,
             router_options options, ledger_book* ledger = nullptr, owners_table owners = {});
  ~job_router() override;
  job_router(const job_router&) = delete;
  job_router& operator=(const job_router&) = delete;

  void start();
  void stop();  // posted: call from any thread
  // Staged files (fsub -M --stage-in): kept in `book`, at most `max_bytes`
  // a job each way; without a book, a job with files is refused.
  void set_stage(stage_book* book, std::size_t max_bytes) noexcept {
    stage_ = book;
    stage_max_bytes_ = max_bytes;
  }

  // Takes a user's job into the server's queue: its id, or 0 with `error`
  // set (an unknown cluster, a user the table lets in nowhere or maps to
  // root, a job aqsd would refuse, an interactive job, a bad contract in
  // the message's "contract" (market.hpp parse_contract), an owner in debt
  // beyond its limit at every cluster it could use).
  std::int64_t submit(const std::string& owner, const std::string& cluster, nlohmann::json submit_message,
                      std::string* error);
  // Cancels `j` (on its cluster when reachable, else when it is back);
  // why not, when it has already ended.
  std::optional<std::string> cancel(const stored_job& j);
  // Why `owner` may run on no cluster of this server, or nullopt.
  std::optional<std::string> no_cluster_for(const std::string& owner) const;
  const std::string& policy() const noexcept { return options_.policy; }

  // cluster_listener
  void cluster_up(const std::string& cluster) override;
  void cluster_down(const std::string& cluster) override;
  void cluster_lost(const std::string& cluster) override;
  void job_message(const std::string& cluster, const std::string& type, const nlohmann::json& m) override;
  void capacity_changed() override { wake(); }

private:
  struct forward_wait {
    std::string cluster;
    std::int64_t attempt = 0;
    std::optional<std::int64_t> local_id;
    std::optional<std::string> refusal;
    bool lost = false;  // the link broke first: a copy may wait there, unknown
  };

  boost::asio::awaitable<void> run();
  void wake();
  boost::asio::awaitable<bool> place(stored_job j);
  // The plugin that ranks `j` (its own where allowed, else the server's), or nullopt.
  std::optional<std::string> plugin_for(const stored_job& j, const nlohmann::json& submit) const;
  // Why `submit`'s "broker" cannot be honoured, or nullopt (also when absent).
  std::optional<std::string> bad_job_broker(const nlohmann::json& submit) const;
  // Runs the plugin on plugin_pool_, off the event loop, and waits for it
  // (answer_wake_); a run that outlasts the time limit by far is a failure.
  boost::asio::awaitable<plugin_ranking> rank_by_plugin(const std::string& name, const plugin_job& job,
                                                        const std::vector<cluster_view>& cs);
  // Waits until `done()` or `deadline` (answers cancel answer_wake_).
  template <class Done>
  boost::asio::awaitable<void> wait_answers(std::chrono::steady_clock::time_point deadline, Done done);
  void on_forwarded(const std::string& cluster, std::int64_t fid, std::int64_t local_id);
  void on_refused(const std::string& cluster, std::int64_t fid, const std::string& why);
  struct bid_answer {
    std::string cluster;
    double start_in_s = -2;  // -2: not answered yet; -1: never
    std::optional<double> completion_in_s, price;
  };
  void on_estimate(const std::string& cluster, std::int64_t qid, const bid_answer& a);
  // The owner paying for `owner`'s jobs, refused by `cluster` for its debt: why.
  std::optional<std::string> debt_refusal_at(const std::string& owner, const std::string& cluster);
  // A job that ended on its cluster: its ledger entry (once).
  void charge_ended(const stored_job& j, const job_update& u);
  void on_update(const std::string& cluster, const job_update& u);
  void on_copy(const std::string& cluster, const stored_job& j, const job_update& u);
  void on_start(const std::string& cluster, std::int64_t fid, std::int64_t local_id);
  // A cluster spoke of a job faucetsd never forwarded there: one log line.
  void refuse_claim(const std::string& cluster, std::int64_t fid, std::int64_t local_id, const std::string& what);
  // A staged job ended on its cluster: ask it for the job's directory.
  void ask_outputs(const std::string& cluster, const stored_job& j);
  // The cluster's answer: believed only from the job's own cluster, for its
  // copy there, while asked.
  void on_outputs(const std::string& cluster, const nlohmann::json& m);
  // Tells `cluster` to cancel its copy `local_id` of job `fid`, as `local`.
  void send_cancel(const std::string& cluster, std::int64_t fid, std::int64_t local_id, const std::string& local);

  job_records& store_;
  cluster_links& hub_;
  const user_map& users_;
  router_options options_;
  ledger_book* ledger_;
  stage_book* stage_ = nullptr;
  std::size_t stage_max_bytes_ = protocol::k_default_stage_max_bytes;
  std::set<std::int64_t> outputs_asked_;  // fids asked for their outputs, not yet answered
  owners_table owners_;
  std::unique_ptr<broker> broker_;
  boost::asio::steady_timer wake_, answer_wake_;
  bool stopped_ = false;
  // Placing one job at a time: the answers it waits for.
  std::int64_t next_qid_ = 1;
  std::map<std::int64_t, bid_answer> estimates_;  // qid -> the cluster's answer
  std::map<std::int64_t, forward_wait> forwards_;                     // fid -> answer
  std::map<std::int64_t, std::set<std::string>> refused_by_;          // fid -> clusters that refused it
  // One thread for plugins (each bounded by its time limit); joined last.
  std::unique_ptr<boost::asio::thread_pool> plugin_pool_;
};

}  // namespace aqs::faucets
