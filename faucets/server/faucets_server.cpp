// faucets_server: the parts built from the options and wired together.
#include "server/faucets_server.hpp"

namespace aqs::faucets {

using nlohmann::json;

// What the users' API may do: submit and cancel through the router (the
// only part that changes jobs), read jobs from the store, clusters from the hub.
class faucets_server::backend final : public user_backend {
public:
  backend(faucets_store& store, cluster_hub& hub, job_router& router, web_desk& desk)
      : store_(store), hub_(hub), router_(router), desk_(desk) {}
  std::int64_t submit(const std::string& owner, const std::string& cluster, json submit_message,
                      std::string* error) override {
    return router_.submit(owner, cluster, std::move(submit_message), error);
  }
  std::optional<std::string> cancel(const stored_job& j) override { return router_.cancel(j); }
  json clusters() const override { return json{{"clusters", hub_.clusters_json()}, {"policy", router_.policy()}}; }
  std::vector<stored_job> jobs(const std::optional<std::string>& owner, bool all,
                               const std::optional<std::string>& cluster) override {
    return store_.jobs(owner, all, cluster, 10000);
  }
  std::optional<stored_job> job(std::int64_t id) override { return store_.job(id); }
  std::vector<history_line> history(std::int64_t id) override { return store_.history(id); }
  std::map<std::string, std::int64_t> balances() override { return store_.balances(); }
  std::vector<ledger_entry> ledger_entries(const std::optional<std::string>& owner, std::int64_t limit) override {
    return store_.entries(owner, limit);
  }
  boost::asio::awaitable<desk_answer> quote(const std::string& owner, const json& body) override {
    return desk_.quote(owner, body);
  }
  boost::asio::awaitable<desk_answer> view(const stored_job& j, const std::string& what, double since,
                                           std::int64_t bytes) override {
    return desk_.view(j, what, since, bytes);
  }
  json staged_outputs(std::int64_t id) override {
    const auto r = store_.stage_result_of(id);
    if (!r) return nullptr;
    return json{{"outputs", r->outputs}, {"detail", r->detail}, {"in_bytes", r->in_bytes}, {"out_bytes", r->out_bytes},
                {"files", r->outputs == "back" ? protocol::to_json(store_.staged(id, "out")) : json::array()}};
  }

private:
  faucets_store& store_;
  cluster_hub& hub_;
  job_router& router_;
  web_desk& desk_;
};

namespace {

router_options router_options_of(const server_options& o) {
  router_options r;
  r.policy = o.policy;
  r.seed = o.seed;
  r.cluster_timeout = o.cluster_timeout;
  r.estimate_timeout = o.estimate_timeout;
  r.plugins = o.plugins;
  r.job_plugins = o.job_plugins;
  return r;
}

}  // namespace

faucets_server::faucets_server(boost::asio::io_context& io, faucets_store& store, server_options options)
    : options_(std::move(options)),
      tokens_(options_.token_key, options_.revoked_tokens),
      hub_(io, hub_options{options_.listen, options_.cert, options_.key, options_.cluster_keys, options_.policy,
                           options_.cluster_timeout, options_.silence_limit, options_.limits}),
      router_(io, store, hub_, options_.users, router_options_of(options_), &store, options_.owners),
      desk_(io, hub_, options_.users, options_.estimate_timeout),
      backend_(std::make_unique<backend>(store, hub_, router_, desk_)) {
  hub_.set_listener(router_);
  hub_.set_desk([this](const std::string& cluster, const std::string& type, const json& m) {
    desk_.on_answer(cluster, type, m);
  });
  router_.set_stage(&store, options_.stage_max_bytes);
  if (options_.http) {
    api_ = std::make_unique<user_api>(
        io, user_api_options{*options_.http, options_.http_tls, options_.cert, options_.key, options_.limits},
        *backend_, tokens_);
  }
}

faucets_server::~faucets_server() = default;

void faucets_server::start() {
  hub_.start();
  if (api_) api_->start();
  router_.start();
}

void faucets_server::stop() {
  hub_.stop();
  if (api_) api_->stop();
  router_.stop();
}

}  // namespace aqs::faucets
