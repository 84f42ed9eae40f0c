// job_router: each job in the server's queue is placed, oldest first and one
// at a time, on the cluster the broker policy picks among those that could
// ever run it and whose table lets its user in; then followed to its end. A
// cluster that stays away longer than --cluster-timeout has its queued jobs
// sent elsewhere (their copies there are cancelled when it comes back).
#include <utility>

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "logging/log.hpp"
#include "server/faucets_server.hpp"

namespace aqs::faucets {

namespace asio = boost::asio;
using nlohmann::json;

void faucets_server::wake_router() { router_wake_.cancel(); }

asio::awaitable<void> faucets_server::router() {
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
    router_wake_.expires_after(std::chrono::seconds(1));
    {
      boost::system::error_code ignored;
      co_await router_wake_.async_wait(asio::redirect_error(asio::use_awaitable, ignored));
    }
  }
}

namespace {

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
  return a;
}

}  // namespace

asio::awaitable<bool> faucets_server::place(stored_job j) {
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
  bool any_could = false;
  for (auto& v : views()) {
    if (j.asked_cluster != "auto" && v.name != j.asked_cluster) continue;
    if (refused_by_[j.id].contains(v.name)) continue;
    if (!options_.users.local_user(j.owner, v.name)) continue;
    if (!v.up) {
      any_could = true;  // it may come back
      continue;
    }
    if (!can_ever_run(ask, v)) continue;
    any_could = true;
    eligible.push_back(std::move(v));
  }
  if (!any_could && !refused_by_[j.id].empty()) {
    std::string names;
    for (const auto& n : refused_by_[j.id]) names += (names.empty() ? "" : ", ") + n;
    store_.set_state(j.id, "FAILED", "failed", "refused by every cluster it may use (" + names + ")");
    logging::warn("job {} of {}: refused by every cluster it may use ({})", j.id, j.owner, names);
    refused_by_.erase(j.id);
    co_return false;
  }
  if (!any_could && !clusters_.empty()) {
    bool all_reported = true;
    for (const auto& [name, c] : clusters_) all_reported = all_reported && c.report.has_value();
    if (all_reported) {
      store_.set_state(j.id, "FAILED", "failed",
                       "no cluster this user may use could ever run it (" + std::to_string(ask.min_pe) +
                           " processors" + (ask.gpus ? ", " + std::to_string(ask.gpus) + " GPUs" : "") + ")");
      logging::warn("job {} of {}: no cluster could ever run it", j.id, j.owner);
    }
    co_return false;
  }
  if (eligible.empty()) co_return false;

  if (broker_->needs_start_estimates()) {
    std::map<std::int64_t, std::size_t> asked;  // qid -> index in eligible
    for (std::size_t i = 0; i < eligible.size(); ++i) {
      const std::int64_t qid = next_qid_++;
      estimates_[qid] = {eligible[i].name, -2.0};
      asked[qid] = i;
      clusters_[eligible[i].name].channel->send(json{{"type", "estimate"},
                                                      {"qid", qid},
                                                      {"min_pe", ask.min_pe},
                                                      {"max_pe", ask.max_pe},
                                                      {"adaptive", ask.adaptive},
                                                      {"walltime_s", ask.walltime_s},
                                                      {"gpus", ask.gpus}});
    }
    const auto deadline = std::chrono::steady_clock::now() + options_.estimate_timeout;
    for (;;) {
      bool all = true;
      for (const auto& [qid, i] : asked) all = all && estimates_[qid].second > -2.0;
      if (all || std::chrono::steady_clock::now() >= deadline || stopped_) break;
      answer_wake_.expires_at(deadline);
      {
      boost::system::error_code ignored;
      co_await answer_wake_.async_wait(asio::redirect_error(asio::use_awaitable, ignored));
    }
    }
    for (const auto& [qid, i] : asked) {
      const double s = estimates_[qid].second;
      if (s >= 0) eligible[i].start_in_s = s;
      estimates_.erase(qid);
    }
  }

  // While it waited for estimates, a copy of it may have been adopted (on_copy).
  if (const auto now_j = store_.job(j.id); !now_j || now_j->cluster || is_final_state(now_j->state)) co_return false;
  const auto chosen = broker_->choose(ask, eligible);
  if (!chosen) co_return false;
  auto it = clusters_.find(chosen->cluster);
  if (it == clusters_.end() || !it->second.channel) co_return false;
  cluster_entry& c = it->second;
  const std::string local = *options_.users.local_user(j.owner, c.name);
  const std::int64_t attempt =
      store_.dispatched(j.id, c.name, "to " + c.name + " as " + local + " by " + options_.policy + ": " + chosen->reason);
  forwards_[j.id] = forward_wait{c.name, attempt, std::nullopt, std::nullopt, false};
  c.channel->send(json{{"type", "forward"}, {"fid", j.id}, {"attempt", attempt}, {"user", j.owner},
                       {"local_user", local}, {"submit", submit}});
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (;;) {
    const auto& w = forwards_[j.id];
    if (w.local_id || w.refusal || w.lost || std::chrono::steady_clock::now() >= deadline || stopped_) break;
    answer_wake_.expires_at(deadline);
    {
      boost::system::error_code ignored;
      co_await answer_wake_.async_wait(asio::redirect_error(asio::use_awaitable, ignored));
    }
  }
  const forward_wait w = forwards_[j.id];
  forwards_.erase(j.id);
  if (w.local_id) {
    if (const auto now_j = store_.job(j.id); now_j && is_final_state(now_j->state)) {
      // Cancelled while it was being placed: its copy goes too.
      if (auto ci = clusters_.find(w.cluster); ci != clusters_.end() && ci->second.channel) {
        ci->second.channel->send(json{{"type", "cancel"}, {"fid", j.id}, {"job_id", *w.local_id}, {"local_user", local}});
      }
      co_return false;
    }
    store_.placed(j.id, w.cluster, *w.local_id, "as " + w.cluster + ":" + std::to_string(*w.local_id));
    if (auto ci = clusters_.find(w.cluster); ci != clusters_.end()) {
      ci->second.placed_pending += 1;
      ci->second.placed_procs += ask.min_pe;
    }
    refused_by_.erase(j.id);
    co_return true;
  }
  if (w.lost) {
    // Not a refusal: the cluster may have made the copy and be back later,
    // reporting it; the server then adopts or cancels it (on_update).
    store_.event(j.id, "lost", "the link to " + w.cluster + " broke before it answered; placed again");
    co_return false;
  }
  const std::string why = w.refusal.value_or("no answer from " + w.cluster + " within 30 s");
  store_.event(j.id, "refused", w.cluster + ": " + why);
  refused_by_[j.id].insert(w.cluster);
  co_return false;
}

void faucets_server::on_forwarded(cluster_entry& c, std::int64_t fid, std::int64_t local_id) {
  const auto it = forwards_.find(fid);
  if (it != forwards_.end() && it->second.cluster == c.name) {
    it->second.local_id = local_id;
    answer_wake_.cancel();
    return;
  }
  // A late answer (we gave up waiting, or placed it elsewhere since).
  const auto j = store_.job(fid);
  if (j && j->cluster == c.name) return;
  if (!j || !store_.forwarded_to(fid, c.name, std::nullopt)) {
    refuse_claim(c, fid, local_id, "forwarded");
    return;
  }
  if (const auto local = j ? options_.users.local_user(j->owner, c.name) : std::nullopt) {
    c.channel->send(json{{"type", "cancel"}, {"fid", fid}, {"job_id", local_id}, {"local_user", *local}});
  }
}

void faucets_server::on_refused(cluster_entry& c, std::int64_t fid, const std::string& why) {
  const auto it = forwards_.find(fid);
  if (it != forwards_.end() && it->second.cluster == c.name) {
    it->second.refusal = why;
    answer_wake_.cancel();
  }
}

void faucets_server::on_update(cluster_entry& c, const job_update& u) {
  const auto j = store_.job(u.fid);
  if (!j) {
    refuse_claim(c, u.fid, u.job_id, "job_update " + u.state);
    return;
  }
  if (j->cluster != c.name || j->local_id != u.job_id) {
    // Not its placement: believed only as a copy faucetsd forwarded there
    // (that attempt, when the cluster names it).
    if (!store_.forwarded_to(j->id, c.name, u.attempt)) {
      refuse_claim(c, j->id, u.job_id, "job_update " + u.state);
      return;
    }
    if (is_final_state(u.state) || u.state == "UNKNOWN") return;
    on_copy(c, *j, u);
    return;
  }
  if (is_final_state(j->state)) return;
  if (u.state == "UNKNOWN") {
    store_.set_state(j->id, "FAILED", "lost", "cluster " + c.name + " does not know job " + std::to_string(u.job_id));
    return;
  }
  store_.update(j->id, u.state, u.nprocs, u.exit_code, u.start_time, u.end_time);
  if (is_final_state(u.state)) wake_router();
}

void faucets_server::refuse_claim(cluster_entry& c, std::int64_t fid, std::int64_t local_id, const std::string& what) {
  logging::warn("cluster '{}' reported job {} (its {}), which faucetsd never forwarded there: refused ({})", c.name, fid,
                local_id, what);
}

// A live copy on `c` that is not the job's placement: a forward whose answer
// was lost with the link, or one the server gave up on since. The job keeps
// exactly one copy: this one, if the job is waiting for a cluster; else it
// is cancelled here.
void faucets_server::on_copy(cluster_entry& c, const stored_job& j, const job_update& u) {
  const auto fw = forwards_.find(j.id);
  if (fw != forwards_.end() && fw->second.cluster == c.name && !fw->second.lost &&
      (!u.attempt || *u.attempt == fw->second.attempt)) {
    return;  // the copy this forward is making: its answer is on the way
  }
  const auto local = options_.users.local_user(j.owner, c.name);
  if (!local) return;
  const bool waiting = !is_final_state(j.state) && !j.cluster && fw == forwards_.end();
  if (waiting) {
    store_.placed(j.id, c.name, u.job_id,
                  "as " + c.name + ":" + std::to_string(u.job_id) + " (its copy there, made before the link broke)");
    refused_by_.erase(j.id);
    c.channel->send(json{{"type", "release"}, {"fid", j.id}, {"job_id", u.job_id}});
    store_.update(j.id, u.state, u.nprocs, u.exit_code, u.start_time, u.end_time);
    logging::info("job {}: adopted its copy {}:{} ({})", j.id, c.name, u.job_id, u.state);
    return;
  }
  // Placed elsewhere, ended, or on its way elsewhere: it must not run here too.
  c.channel->send(json{{"type", "cancel"}, {"fid", j.id}, {"job_id", u.job_id}, {"local_user", *local}});
  logging::info("job {}: its copy {}:{} ({}) is cancelled; the job is {}", j.id, c.name, u.job_id, u.state,
                j.cluster ? "placed on " + *j.cluster : j.state);
}

// The cluster asks before it launches a job the server placed there: yes
// only for the job's placement, once the store says it started (so that it
// is never placed elsewhere); a copy that is not the placement may not run.
void faucets_server::on_start(cluster_entry& c, std::int64_t fid, std::int64_t local_id) {
  const auto j = store_.job(fid);
  if (j && j->cluster == c.name && j->local_id == local_id && !is_final_state(j->state)) {
    store_.starting(fid, "on " + c.name + ":" + std::to_string(local_id));
    c.channel->send(json{{"type", "start_ok"}, {"fid", fid}, {"job_id", local_id}});
    return;
  }
  logging::info("job {}: its copy {}:{} may not start (it is not the job's placement)", fid, c.name, local_id);
  c.channel->send(json{{"type", "start_no"}, {"fid", fid}, {"job_id", local_id}});
}

void faucets_server::check_lost_clusters() {
  const auto now = std::chrono::steady_clock::now();
  for (auto& [name, c] : clusters_) {
    if (c.channel || c.lost_at == std::chrono::steady_clock::time_point{}) continue;
    if (now - c.lost_at < options_.cluster_timeout) continue;
    c.lost_at = {};  // once per loss
    std::int64_t moved = 0;
    for (const auto& j : store_.live_jobs()) {
      if (j.cluster != name || j.start_time) continue;  // started ones stay UNKNOWN until it returns
      store_.unplace(j.id, name, j.local_id,
                     "cluster " + name + " unreachable for " + std::to_string(options_.cluster_timeout.count()) +
                         " s; placed again");
      ++moved;
    }
    if (moved > 0) logging::warn("cluster '{}': {} queued jobs are placed elsewhere", name, moved);
    wake_router();
  }
}

std::optional<std::string> faucets_server::cancel(const stored_job& j) {
  if (is_final_state(j.state)) return "job " + std::to_string(j.id) + " has already ended (" + j.state + ")";
  if (j.cluster && j.local_id) {
    const auto local = options_.users.local_user(j.owner, *j.cluster);
    const auto it = clusters_.find(*j.cluster);
    if (it != clusters_.end() && it->second.channel && local) {
      it->second.channel->send(
          json{{"type", "cancel"}, {"fid", j.id}, {"job_id", *j.local_id}, {"local_user", *local}});
    } else {
      // Cancelled there when it comes back.
      store_.unplace(j.id, *j.cluster, j.local_id, "cancelled while " + *j.cluster + " is unreachable");
    }
  }
  store_.set_state(j.id, "CANCELLED", "cancelled", "by " + j.owner);
  return std::nullopt;
}

}  // namespace aqs::faucets
