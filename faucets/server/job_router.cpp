// job_router: taking jobs in, placing them by the broker policy, following
// them through what their clusters report, moving a lost cluster's queue.
#include "server/job_router.hpp"

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <random>
#include <utility>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "logging/log.hpp"
#include "protocol/messages.hpp"

namespace aqs::faucets {

namespace asio = boost::asio;
using nlohmann::json;

namespace {

// PostgreSQL's messages run over several lines; a log line takes the first.
std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

std::string joined(const auto& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + std::string(n);
  return out;
}

constexpr std::int64_t k_max_id = std::int64_t{1} << 53;

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Seconds since the epoch of "2026-11-28T19:02:03Z" (fractions allowed); nullopt otherwise.
std::optional<double> iso_seconds(const std::string& t) {
  std::tm tm{};
  const char* end = ::strptime(t.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (end == nullptr) return std::nullopt;
  double frac = 0;
  if (*end == '.') {
    char* after = nullptr;
    frac = std::strtod(end, &after);
    end = after;
  }
  return static_cast<double>(::timegm(&tm)) + frac;
}

job_ask ask_of(const stored_job& j, const json& submit) {
  job_ask a;
  a.min_pe = j.min_pe;
  a.max_pe = j.max_pe;
  a.adaptive = j.adaptive;
  a.walltime_s = j.walltime_s;
  if (const auto d = submit.find("datasets"); d != submit.end() && d->is_array()) {
    for (const auto& v : *d) {
      if (v.is_string()) a.datasets.push_back(v.get<std::string>());
    }
  }
  if (const auto job = submit.find("job"); job != submit.end() && job->contains("geometry")) {
    const auto& g = (*job)["geometry"];
    if (g.is_object() && g.contains("gpus_per_node") && g["gpus_per_node"].is_number_integer()) {
      a.gpus = g["gpus_per_node"].get<std::int64_t>() * g.value("nodes_min", std::int64_t{1});
    }
  }
  if (const auto c = submit.find("contract"); c != submit.end()) {
    // Checked at submission; a deadline passed since then is for the broker to weigh.
    const job_contract k{c->value("deadline", 0.0), c->value("max_price", 0.0), c->value("value", 0.0),
                         c->value("decay_s", 0.0), c->value("best_effort", false)};
    a.contract = terms_at(k, unix_now());
  }
  return a;
}

}  // namespace

job_router::job_router(asio::io_context& io, job_records& store, cluster_links& hub, const user_map& users,
                       router_options options, ledger_book* ledger, owners_table owners)
    : store_(store),
      hub_(hub),
      users_(users),
      options_(std::move(options)),
      ledger_(ledger),
      owners_(std::move(owners)),
      broker_(make_broker(plugin_name_of(options_.policy) ? k_plugin_fallback_policy : std::string_view(options_.policy),
                          options_.seed != 0 ? options_.seed : std::random_device{}())),
      wake_(io),
      answer_wake_(io) {
  if (plugin_name_of(options_.policy) || !options_.job_plugins.empty()) {
    if (!options_.plugins) throw std::invalid_argument("broker plugins need a plugin directory (--plugin-dir)");
    plugin_pool_ = std::make_unique<asio::thread_pool>(1);
  }
}

job_router::~job_router() {
  if (plugin_pool_) plugin_pool_->join();
}

std::optional<std::string> job_router::bad_job_broker(const json& submit) const {
  const auto b = submit.find("broker");
  if (b == submit.end() || b->is_null()) return std::nullopt;
  if (!b->is_string()) return "\"broker\" must be a plugin's name";
  std::string name = b->get<std::string>();
  if (const auto p = plugin_name_of(name)) name = *p;
  if (const auto why = bad_plugin_name(name)) return why;
  if (options_.job_plugins.empty()) {
    return "this Faucets server lets no job choose its broker (the admin's --allow-job-plugins)";
  }
  if (!options_.job_plugins.contains(name)) {
    return "broker plugin '" + name + "' is not one this server lets a job choose (allowed: " +
           joined(options_.job_plugins) + ")";
  }
  return std::nullopt;
}

std::optional<std::string> job_router::plugin_for(const stored_job&, const json& submit) const {
  if (const auto b = submit.find("broker"); b != submit.end() && b->is_string() && !bad_job_broker(submit)) {
    const std::string name = b->get<std::string>();
    return plugin_name_of(name).value_or(name);
  }
  return plugin_name_of(options_.policy);
}

asio::awaitable<plugin_ranking> job_router::rank_by_plugin(const std::string& name, const plugin_job& job,
                                                           const std::vector<cluster_view>& cs) {
  // Plain handlers, not a coroutine lambda: GCC 12 destroys a coroutine
  // lambda's captures twice. The result is handed over by the post that
  // sets `done` (written on the pool thread before, read here after).
  auto result = std::make_shared<plugin_ranking>();
  auto done = std::make_shared<bool>(false);
  auto back = wake_.get_executor();
  asio::post(*plugin_pool_, [this, host = options_.plugins, name, job, cs, result, done, back] {
    *result = host->rank(name, job, cs);
    asio::post(back, [this, done] {
      *done = true;
      answer_wake_.cancel();
    });
  });
  const auto limit = options_.plugins->options().limits.time_limit + std::chrono::seconds(10);
  co_await wait_answers(std::chrono::steady_clock::now() + limit, [&] { return *done; });
  if (!*done) {
    plugin_ranking late;
    late.failure = "no answer in time";
    co_return late;
  }
  co_return *result;
}

void job_router::start() { asio::co_spawn(wake_.get_executor(), run(), asio::detached); }

void job_router::stop() {
  asio::post(wake_.get_executor(), [this] {
    stopped_ = true;
    wake_.cancel();
    answer_wake_.cancel();
  });
}

void job_router::wake() { wake_.cancel(); }

std::optional<std::string> job_router::no_cluster_for(const std::string& owner) const {
  if (owner == "root") return "faucetsd never runs a job as root: submit as the user the job should run as";
  std::vector<std::string> root_on;
  for (const auto& name : hub_.names()) {
    if (users_.local_user(owner, name)) return std::nullopt;
    if (users_.maps_to_root(owner, name)) root_on.push_back(name);
  }
  if (!root_on.empty()) {
    return "the admin's user table maps user '" + owner + "' to root (on " + joined(root_on) +
           ") and lets them run nowhere else; faucetsd never runs a job as root";
  }
  return "the admin's user table lets user '" + owner + "' run on no cluster of this server";
}

std::int64_t job_router::submit(const std::string& owner, const std::string& cluster, json submit_message,
                                std::string* error) {
  if (auto why = bad_job_broker(submit_message)) {
    *error = *why;
    return 0;
  }
  if (cluster != "auto" && !hub_.knows(cluster)) {
    *error = "no cluster '" + cluster + "' at this Faucets server (known: " + joined(hub_.names()) + ")";
    return 0;
  }
  if (owner == "root") {
    *error = *no_cluster_for(owner);
    return 0;
  }
  if (cluster != "auto" && !users_.local_user(owner, cluster)) {
    *error = users_.maps_to_root(owner, cluster)
                 ? "the admin's user table maps user '" + owner + "' to root on cluster '" + cluster +
                       "', and faucetsd never runs a job as root"
                 : "user '" + owner + "' may not run jobs on cluster '" + cluster + "' (the admin's user table)";
    return 0;
  }
  if (cluster == "auto") {
    // Queued, it would wait for ever: no cluster would ever take it.
    if (auto why = no_cluster_for(owner)) {
      *error = *why;
      return 0;
    }
  }
  // The contract is faucetsd's: checked here, kept with the job, never forwarded.
  std::optional<json> contract;
  if (const auto c = submit_message.find("contract"); c != submit_message.end()) {
    auto parsed_contract = parse_contract(*c, unix_now());
    if (const auto* why = std::get_if<std::string>(&parsed_contract)) {
      *error = *why;
      return 0;
    }
    contract = to_json(std::get<job_contract>(parsed_contract));
    submit_message.erase("contract");
  }
  // An owner in debt beyond its limit: refused where it would be refused.
  if (ledger_ != nullptr && owners_.payer_of(owner)) {
    std::optional<std::string> refusal;
    bool somewhere = false;
    for (const auto& name : hub_.names()) {
      if (cluster != "auto" && name != cluster) continue;
      if (!users_.local_user(owner, name)) continue;
      if (auto why = debt_refusal_at(owner, name)) {
        if (!refusal) refusal = why;
      } else {
        somewhere = true;
      }
    }
    if (!somewhere && refusal) {
      *error = *refusal;
      return 0;
    }
  }
  // The job must be one aqsd would take: validated here with aqsd's own rules.
  protocol::message parsed;
  try {
    parsed = protocol::parse_message(submit_message);
  } catch (const std::exception& e) {
    *error = e.what();
    return 0;
  }
  const auto* s = std::get_if<protocol::submit>(&parsed);
  if (s == nullptr) {
    *error = "not a job";
    return 0;
  }
  if (s->job.interactive) {
    *error = "interactive jobs (frun) cannot go through the Faucets server";
    return 0;
  }
  // Staged files: checked here (the client is not trusted), kept in the
  // stage book, sent with each forward; the stored message says how many.
  std::vector<protocol::staged_file> staged;
  if (const auto f = submit_message.find("stage_in"); f != submit_message.end()) {
    if (stage_ == nullptr) {
      *error = "this Faucets server takes no staged files";
      return 0;
    }
    try {
      staged = protocol::parse_staged_files(*f, stage_max_bytes_);
    } catch (const std::invalid_argument& e) {
      *error = e.what();
      return 0;
    }
    submit_message.erase("stage_in");
    if (!staged.empty()) submit_message["staged_files"] = staged.size();
  }
  stored_job j;
  j.owner = owner;
  j.name = s->job.name;
  j.asked_cluster = cluster;
  if (contract) submit_message["contract"] = *contract;
  j.submit = submit_message.dump();
  j.min_pe = s->job.min_pe;
  j.max_pe = s->job.max_pe;
  j.adaptive = s->job.adaptive;
  j.walltime_s = s->job.walltime_s ? static_cast<double>(*s->job.walltime_s) : 3600.0;
  const std::int64_t id = store_.add_job(j);
  if (!staged.empty()) stage_->stage_inputs(id, staged);
  logging::info("job {} of {} ({} to {} processors) queued for {}", id, owner, j.min_pe, j.max_pe, cluster);
  wake();
  return id;
}

std::optional<std::string> job_router::cancel(const stored_job& j) {
  if (is_final_state(j.state)) return "job " + std::to_string(j.id) + " has already ended (" + j.state + ")";
  if (j.cluster && j.local_id) {
    const auto local = users_.local_user(j.owner, *j.cluster);
    if (!local || !hub_.send(*j.cluster, json{{"type", "cancel"}, {"fid", j.id}, {"job_id", *j.local_id},
                                              {"local_user", *local}})) {
      // Cancelled there when it comes back.
      store_.unplace(j.id, *j.cluster, j.local_id, "cancelled while " + *j.cluster + " is unreachable");
    }
  }
  store_.set_state(j.id, "CANCELLED", "cancelled", "by " + j.owner);
  return std::nullopt;
}

void job_router::send_cancel(const std::string& cluster, std::int64_t fid, std::int64_t local_id,
                             const std::string& local) {
  hub_.send(cluster, json{{"type", "cancel"}, {"fid", fid}, {"job_id", local_id}, {"local_user", local}});
}

asio::awaitable<void> job_router::run() {
  while (!stopped_) {
    try {
      for (const stored_job& j : store_.live_jobs()) {
        if (stopped_) co_return;
        if (j.state != "PENDING" || j.cluster) continue;
        co_await place(j);
      }
    } catch (const std::exception& e) {
      logging::error("placing jobs: {}", e.what());
    }
    wake_.expires_after(std::chrono::seconds(1));
    boost::system::error_code ignored;
    co_await wake_.async_wait(asio::redirect_error(asio::use_awaitable, ignored));
  }
}

template <class Done>
asio::awaitable<void> job_router::wait_answers(std::chrono::steady_clock::time_point deadline, Done done) {
  while (!done() && std::chrono::steady_clock::now() < deadline && !stopped_) {
    answer_wake_.expires_at(deadline);
    boost::system::error_code ignored;
    co_await answer_wake_.async_wait(asio::redirect_error(asio::use_awaitable, ignored));
  }
}

asio::awaitable<bool> job_router::place(stored_job j) {
  // No cluster would ever take it (the user table maps its owner to root,
  // or to no one, everywhere): it ends with that reason, never waits silently.
  if (auto why = no_cluster_for(j.owner)) {
    store_.set_state(j.id, "FAILED", "failed", *why);
    logging::warn("job {} of {}: {}", j.id, j.owner, *why);
    co_return false;
  }
  const json submit = json::parse(j.submit);
  const job_ask ask = ask_of(j, submit);
  std::vector<cluster_view> eligible;
  std::vector<std::string> debt_refused;
  bool any_could = false;
  for (auto& v : hub_.views()) {
    if (j.asked_cluster != "auto" && v.name != j.asked_cluster) continue;
    if (refused_by_[j.id].contains(v.name)) continue;
    if (!users_.local_user(j.owner, v.name)) continue;
    if (!v.up) {
      any_could = true;  // it may come back
      continue;
    }
    if (!can_ever_run(ask, v)) continue;
    any_could = true;
    if (auto why = debt_refusal_at(j.owner, v.name)) {
      debt_refused.push_back(*why);
      continue;
    }
    eligible.push_back(std::move(v));
  }
  if (eligible.empty() && !debt_refused.empty()) {
    store_.set_state(j.id, "FAILED", "refused", debt_refused.front());
    logging::warn("job {} of {}: {}", j.id, j.owner, debt_refused.front());
    co_return false;
  }
  if (!any_could && !refused_by_[j.id].empty()) {
    const std::string names = joined(refused_by_[j.id]);
    store_.set_state(j.id, "FAILED", "failed", "refused by every cluster it may use (" + names + ")");
    logging::warn("job {} of {}: refused by every cluster it may use ({})", j.id, j.owner, names);
    refused_by_.erase(j.id);
    co_return false;
  }
  if (!any_could && !hub_.names().empty()) {
    if (hub_.all_reported()) {
      store_.set_state(j.id, "FAILED", "failed",
                       "no cluster this user may use could ever run it (" + std::to_string(ask.min_pe) +
                           " processors" + (ask.gpus ? ", " + std::to_string(ask.gpus) + " GPUs" : "") + ")");
      logging::warn("job {} of {}: no cluster could ever run it", j.id, j.owner);
    }
    co_return false;
  }
  if (eligible.empty()) co_return false;

  const std::optional<std::string> plugin = plugin_for(j, submit);
  if (submit.contains("broker") && !submit["broker"].is_null() && !plugin_name_of(options_.policy) && !plugin) {
    store_.event(j.id, "broker", "its broker is no longer allowed here; " + options_.policy + " decides");
  }
  // A plugin sees the clusters' estimates too, and the policy that stands in for it may need them.
  if (broker_->needs_start_estimates() || plugin) {
    std::map<std::int64_t, std::size_t> asked;  // qid -> index in eligible
    for (std::size_t i = 0; i < eligible.size(); ++i) {
      const std::int64_t qid = next_qid_++;
      estimates_[qid].cluster = eligible[i].name;
      asked[qid] = i;
      hub_.send(eligible[i].name, json{{"type", "estimate"},
                                       {"qid", qid},
                                       {"min_pe", ask.min_pe},
                                       {"max_pe", ask.max_pe},
                                       {"adaptive", ask.adaptive},
                                       {"walltime_s", ask.walltime_s},
                                       {"gpus", ask.gpus}});
    }
    co_await wait_answers(std::chrono::steady_clock::now() + options_.estimate_timeout, [&] {
      for (const auto& [qid, i] : asked) {
        if (estimates_[qid].start_in_s <= -2.0) return false;
      }
      return true;
    });
    for (const auto& [qid, i] : asked) {
      const bid_answer& a = estimates_[qid];
      if (a.start_in_s >= 0) {
        eligible[i].start_in_s = a.start_in_s;
        eligible[i].completion_in_s = a.completion_in_s;
        if (a.price) eligible[i].price = a.price;
      }
      estimates_.erase(qid);
    }
  }

  // While it waited for estimates, a copy of it may have been adopted (on_copy).
  if (const auto now_j = store_.job(j.id); !now_j || now_j->cluster || is_final_state(now_j->state)) co_return false;
  std::optional<choice> chosen;
  std::string by(broker_->name());
  if (plugin) {
    const plugin_job pj{j.id, j.owner, j.name, ask};
    const plugin_ranking r = co_await rank_by_plugin(*plugin, pj, eligible);
    if (stopped_) co_return false;
    if (r.failure) {
      logging::warn("job {} of {}: broker plugin {} ignored: {}; {} decides", j.id, j.owner, *plugin, *r.failure, by);
      store_.event(j.id, "broker", "plugin " + *plugin + " ignored: " + *r.failure + "; " + by + " decides");
    } else {
      by = "plugin:" + *plugin;
      chosen = choice{r.ranked.front(), r.reason.empty() ? "ranked first of " + std::to_string(eligible.size()) : r.reason};
    }
    if (const auto now_j = store_.job(j.id); !now_j || now_j->cluster || is_final_state(now_j->state)) co_return false;
  }
  if (!chosen) chosen = broker_->choose(ask, eligible);
  if (!chosen) co_return false;
  if (chosen->refused) {
    store_.set_state(j.id, "FAILED", "refused", chosen->reason);
    logging::warn("job {} of {}: {}", j.id, j.owner, chosen->reason);
    co_return false;
  }
  const std::string cluster = chosen->cluster;
  const std::string local = *users_.local_user(j.owner, cluster);
  if (!hub_.connected(cluster)) co_return false;  // it left while the broker chose
  const std::int64_t attempt =
      store_.dispatched(j.id, cluster, "to " + cluster + " as " + local + " by " + by + ": " + chosen->reason);
  if (ledger_ != nullptr && !owners_.empty()) {
    // The price it runs at there: the bid, else what the cluster last reported.
    for (const auto& v : eligible) {
      if (v.name == cluster && v.price) ledger_->agree_price(j.id, cluster, *v.price);
    }
  }
  forwards_[j.id] = forward_wait{cluster, attempt, std::nullopt, std::nullopt, false};
  json to_send = submit;
  to_send.erase("contract");
  to_send.erase("staged_files");
  json forward{{"type", "forward"}, {"fid", j.id}, {"attempt", attempt}, {"user", j.owner},
               {"local_user", local}, {"submit", to_send}};
  if (submit.contains("staged_files") && stage_ != nullptr) forward["files"] = protocol::to_json(stage_->staged(j.id, "in"));
  hub_.send(cluster, std::move(forward));
  co_await wait_answers(std::chrono::steady_clock::now() + options_.forward_timeout, [&] {
    const auto& w = forwards_[j.id];
    return w.local_id || w.refusal || w.lost;
  });
  const forward_wait w = forwards_[j.id];
  forwards_.erase(j.id);
  if (w.local_id) {
    if (const auto now_j = store_.job(j.id); now_j && is_final_state(now_j->state)) {
      // Cancelled while it was being placed: its copy goes too.
      send_cancel(w.cluster, j.id, *w.local_id, local);
      co_return false;
    }
    store_.placed(j.id, w.cluster, *w.local_id, "as " + w.cluster + ":" + std::to_string(*w.local_id));
    hub_.note_placed(w.cluster, ask.min_pe);
    refused_by_.erase(j.id);
    co_return true;
  }
  if (w.lost) {
    // Not a refusal: the cluster may have made the copy and be back later,
    // reporting it; the server then adopts or cancels it (on_update).
    store_.event(j.id, "lost", "the link to " + w.cluster + " broke before it answered; placed again");
    co_return false;
  }
  const std::string why = w.refusal.value_or("no answer from " + w.cluster + " within " +
                                             std::to_string(options_.forward_timeout.count()) + " s");
  store_.event(j.id, "refused", w.cluster + ": " + why);
  refused_by_[j.id].insert(w.cluster);
  co_return false;
}

void job_router::job_message(const std::string& cluster, const std::string& type, const json& m) {
  if (type == "forwarded") {
    on_forwarded(cluster, int_field(m, "fid", 1, k_max_id), int_field(m, "job_id", 1, k_max_id));
  } else if (type == "refused") {
    on_refused(cluster, int_field(m, "fid", 1, k_max_id), opt_string_field(m, "error", 4096).value_or("refused"));
  } else if (type == "estimate_reply") {
    const auto it = m.find("start_in_s");
    bid_answer a;
    a.cluster = cluster;
    a.start_in_s = it == m.end() || it->is_null() ? -1.0 : number_field(m, "start_in_s", 0, 1e12);
    if (const auto c = m.find("completion_in_s"); c != m.end() && !c->is_null()) {
      a.completion_in_s = number_field(m, "completion_in_s", 0, 1e12);
    }
    if (const auto p = m.find("price"); p != m.end() && !p->is_null()) a.price = number_field(m, "price", 0, 1e9);
    on_estimate(cluster, int_field(m, "qid", 0, k_max_id), a);
  } else if (type == "start") {
    on_start(cluster, int_field(m, "fid", 1, k_max_id), int_field(m, "job_id", 1, k_max_id));
  } else if (type == "job_update") {
    on_update(cluster, parse_job_update(m));
  } else if (type == "outputs") {
    on_outputs(cluster, m);
  }
}

void job_router::ask_outputs(const std::string& cluster, const stored_job& j) {
  if (stage_ == nullptr || !j.local_id) return;
  const auto r = stage_->stage_result_of(j.id);
  if (!r || r->outputs != "waiting") return;
  const auto local = users_.local_user(j.owner, cluster);
  if (!local) return;
  if (hub_.send(cluster, json{{"type", "fetch"}, {"fid", j.id}, {"attempt", j.attempts}, {"job_id", *j.local_id},
                              {"local_user", *local}})) {
    outputs_asked_.insert(j.id);
  }
}

void job_router::on_outputs(const std::string& cluster, const json& m) {
  const std::int64_t fid = int_field(m, "fid", 1, k_max_id);
  const std::int64_t local_id = int_field(m, "job_id", 1, k_max_id);
  const auto j = store_.job(fid);
  // A cluster speaks only of its own placement, and only when asked: a
  // cluster with a key of its own cannot put files into another's job.
  if (!j || j->cluster != cluster || j->local_id != local_id || !outputs_asked_.contains(fid) || stage_ == nullptr) {
    logging::warn("cluster '{}' sent outputs of job {} (its {}) unasked, or for a job not placed there: refused",
                  cluster, fid, local_id);
    return;
  }
  outputs_asked_.erase(fid);
  if (const auto e = m.find("error"); e != m.end()) {
    const std::string why = opt_string_field(m, "error", 4096).value_or("failed");
    stage_->outputs_failed(fid, cluster + ": " + why);
    logging::warn("job {}: its outputs did not come back from {}: {}", fid, cluster, why);
    return;
  }
  std::vector<protocol::staged_file> files;
  try {
    files = protocol::parse_staged_files(m.contains("files") ? m["files"] : json::array(), stage_max_bytes_);
  } catch (const std::invalid_argument& e) {
    stage_->outputs_failed(fid, cluster + " sent outputs that are refused: " + e.what());
    logging::warn("job {}: outputs from {} refused: {}", fid, cluster, e.what());
    return;
  }
  stage_->outputs_back(fid, files);
  logging::info("job {}: {} output file(s) back from {}", fid, files.size(), cluster);
}

void job_router::cluster_up(const std::string& cluster) {
  // Jobs placed there before it went away and sent elsewhere (or ended)
  // since: they must not run here too. Those still waiting for a cluster
  // keep their copy there: the cluster reports it and on_copy adopts it.
  for (const auto& a : store_.abandoned(cluster)) {
    const auto j = store_.job(a.job_id);
    const auto local = j ? users_.local_user(j->owner, cluster) : std::nullopt;
    const bool waiting = j && !is_final_state(j->state) && !j->cluster && !forwards_.contains(j->id);
    if (a.local_id && local && !waiting) {
      send_cancel(cluster, a.job_id, *a.local_id, *local);
      logging::info("job {}: its copy {}:{} is cancelled (the job was sent elsewhere while '{}' was away)", a.job_id,
                    cluster, *a.local_id, cluster);
    }
    store_.forget_abandoned(a.job_id, cluster);
  }
  // Every job placed there and not finished: the cluster reports each, and
  // (after the cancels above) lets them run.
  json follow = json::array();
  for (const auto& j : store_.live_jobs()) {
    if (j.cluster == cluster && j.local_id) follow.push_back(json{{"fid", j.id}, {"job_id", *j.local_id}});
  }
  hub_.send(cluster, json{{"type", "follow"}, {"jobs", follow}});
  // Staged jobs that ended there and whose outputs never came back: asked again.
  if (stage_ != nullptr) {
    for (const auto id : stage_->outputs_waiting()) {
      if (const auto j = store_.job(id); j && j->cluster == cluster) ask_outputs(cluster, *j);
    }
  }
  wake();
}

void job_router::cluster_down(const std::string& cluster) {
  try {
    for (const auto& j : store_.live_jobs()) {
      if (j.cluster == cluster && j.state != "PENDING" && j.state != "UNKNOWN") {
        store_.set_state(j.id, "UNKNOWN", "unknown", "cluster " + cluster + " is unreachable");
      }
    }
  } catch (const std::exception& e) {
    // Shown as they were; the cluster reports them when it is back.
    logging::warn("cluster '{}': cannot mark its running jobs unknown: {}", cluster, first_line(e.what()));
  }
  // Answers it will never give.
  for (auto& [fid, w] : forwards_) {
    if (w.cluster == cluster && !w.local_id && !w.refusal) w.lost = true;
  }
  answer_wake_.cancel();
}

void job_router::cluster_lost(const std::string& cluster) {
  std::int64_t moved = 0;
  for (const auto& j : store_.live_jobs()) {
    if (j.cluster != cluster || j.start_time) continue;  // started ones stay UNKNOWN until it returns
    store_.unplace(j.id, cluster, j.local_id,
                   "cluster " + cluster + " unreachable for " + std::to_string(options_.cluster_timeout.count()) +
                       " s; placed again");
    ++moved;
  }
  if (moved > 0) logging::warn("cluster '{}': {} queued jobs are placed elsewhere", cluster, moved);
  wake();
}

void job_router::on_estimate(const std::string& cluster, std::int64_t qid, const bid_answer& a) {
  if (auto e = estimates_.find(qid); e != estimates_.end() && e->second.cluster == cluster) {
    e->second = a;
    answer_wake_.cancel();
  }
}

std::optional<std::string> job_router::debt_refusal_at(const std::string& owner, const std::string& cluster) {
  if (ledger_ == nullptr) return std::nullopt;
  const auto payer = owners_.payer_of(owner);
  if (!payer || !owners_.limit_of(*payer)) return std::nullopt;
  const auto balances = ledger_->balances();
  const auto b = balances.find(*payer);
  return debt_refusal(owners_, owner, cluster, b == balances.end() ? 0 : b->second);
}

void job_router::charge_ended(const stored_job& j, const job_update& u) {
  if (ledger_ == nullptr || owners_.empty() || !j.cluster) return;  // no market configured
  const auto start = u.start_time ? u.start_time : j.start_time;
  if (!start) return;  // it never held a processor
  try {
    double used = 0;
    if (u.proc_seconds) {
      used = *u.proc_seconds;
    } else {
      // A cluster that does not say: its run time times its processors.
      const auto s = iso_seconds(*start);
      const auto e = u.end_time ? iso_seconds(*u.end_time) : std::nullopt;
      if (s && e && *e > *s) used = (*e - *s) * static_cast<double>(std::max(u.nprocs, j.nprocs));
    }
    const auto price = ledger_->agreed_price(j.id, *j.cluster);
    if (!price) {
      store_.event(j.id, "not charged", "no price was agreed with " + *j.cluster);
      return;
    }
    std::string why;
    const auto e = entry_for(owners_, j.id, j.owner, *j.cluster, used, *price, &why);
    if (!e) {
      store_.event(j.id, "not charged", why);
      return;
    }
    char detail[160];
    std::snprintf(detail, sizeof detail, "%.3f processor-seconds at %.6g: ", used, *price);
    ledger_->charge(*e, detail + credits_text(e->amount_micro) + " credits from " + e->payer + " to " + e->payee);
  } catch (const std::exception& ex) {
    logging::error("job {}: cannot charge it: {}", j.id, first_line(ex.what()));
  }
}

void job_router::on_forwarded(const std::string& cluster, std::int64_t fid, std::int64_t local_id) {
  const auto it = forwards_.find(fid);
  if (it != forwards_.end() && it->second.cluster == cluster) {
    it->second.local_id = local_id;
    answer_wake_.cancel();
    return;
  }
  // A late answer (we gave up waiting, or placed it elsewhere since).
  const auto j = store_.job(fid);
  if (j && j->cluster == cluster) return;
  if (!j || !store_.forwarded_to(fid, cluster, std::nullopt)) {
    refuse_claim(cluster, fid, local_id, "forwarded");
    return;
  }
  if (const auto local = users_.local_user(j->owner, cluster)) send_cancel(cluster, fid, local_id, *local);
}

void job_router::on_refused(const std::string& cluster, std::int64_t fid, const std::string& why) {
  const auto it = forwards_.find(fid);
  if (it != forwards_.end() && it->second.cluster == cluster) {
    it->second.refusal = why;
    answer_wake_.cancel();
  }
}

void job_router::on_update(const std::string& cluster, const job_update& u) {
  const auto j = store_.job(u.fid);
  if (!j) {
    refuse_claim(cluster, u.fid, u.job_id, "job_update " + u.state);
    return;
  }
  if (j->cluster != cluster || j->local_id != u.job_id) {
    // Not its placement: believed only as a copy faucetsd forwarded there
    // (that attempt, when the cluster names it).
    if (!store_.forwarded_to(j->id, cluster, u.attempt)) {
      refuse_claim(cluster, j->id, u.job_id, "job_update " + u.state);
      return;
    }
    if (is_final_state(u.state) || u.state == "UNKNOWN") return;
    on_copy(cluster, *j, u);
    return;
  }
  if (is_final_state(j->state)) return;
  if (u.state == "UNKNOWN") {
    store_.set_state(j->id, "FAILED", "lost", "cluster " + cluster + " does not know job " + std::to_string(u.job_id));
    return;
  }
  store_.update(j->id, u.state, u.nprocs, u.exit_code, u.start_time, u.end_time);
  if (is_final_state(u.state)) {
    charge_ended(*j, u);
    ask_outputs(cluster, *j);
    wake();
  }
}

void job_router::refuse_claim(const std::string& cluster, std::int64_t fid, std::int64_t local_id,
                              const std::string& what) {
  logging::warn("cluster '{}' reported job {} (its {}), which faucetsd never forwarded there: refused ({})", cluster,
                fid, local_id, what);
}

// A live copy on `cluster` that is not the job's placement: a forward whose
// answer was lost with the link, or one the server gave up on since. The
// job keeps exactly one copy: this one, if the job is waiting for a
// cluster; else it is cancelled here.
void job_router::on_copy(const std::string& cluster, const stored_job& j, const job_update& u) {
  const auto fw = forwards_.find(j.id);
  if (fw != forwards_.end() && fw->second.cluster == cluster && !fw->second.lost &&
      (!u.attempt || *u.attempt == fw->second.attempt)) {
    return;  // the copy this forward is making: its answer is on the way
  }
  const auto local = users_.local_user(j.owner, cluster);
  if (!local) return;
  const bool waiting = !is_final_state(j.state) && !j.cluster && fw == forwards_.end();
  if (waiting) {
    store_.placed(j.id, cluster, u.job_id,
                  "as " + cluster + ":" + std::to_string(u.job_id) + " (its copy there, made before the link broke)");
    refused_by_.erase(j.id);
    hub_.send(cluster, json{{"type", "release"}, {"fid", j.id}, {"job_id", u.job_id}});
    store_.update(j.id, u.state, u.nprocs, u.exit_code, u.start_time, u.end_time);
    logging::info("job {}: adopted its copy {}:{} ({})", j.id, cluster, u.job_id, u.state);
    return;
  }
  // Placed elsewhere, ended, or on its way elsewhere: it must not run here too.
  send_cancel(cluster, j.id, u.job_id, *local);
  logging::info("job {}: its copy {}:{} ({}) is cancelled; the job is {}", j.id, cluster, u.job_id, u.state,
                j.cluster ? "placed on " + *j.cluster : j.state);
}

// The cluster asks before it launches a job the server placed there: yes
// only for the job's placement, once the store says it started (so that it
// is never placed elsewhere); a copy that is not the placement may not run.
void job_router::on_start(const std::string& cluster, std::int64_t fid, std::int64_t local_id) {
  const auto j = store_.job(fid);
  if (j && j->cluster == cluster && j->local_id == local_id && !is_final_state(j->state)) {
    store_.starting(fid, "on " + cluster + ":" + std::to_string(local_id));
    hub_.send(cluster, json{{"type", "start_ok"}, {"fid", fid}, {"job_id", local_id}});
    return;
  }
  logging::info("job {}: its copy {}:{} may not start (it is not the job's placement)", fid, cluster, local_id);
  hub_.send(cluster, json{{"type", "start_no"}, {"fid", fid}, {"job_id", local_id}});
}

}  // namespace aqs::faucets
