// web_desk: quotes and job views for faucetsd's page, asked of the clusters.
#include "server/web_desk.hpp"

#include <algorithm>
#include <chrono>

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "broker/broker.hpp"
#include "protocol/messages.hpp"
#include "server/market.hpp"

namespace aqs::faucets {

namespace asio = boost::asio;
using nlohmann::json;

namespace {

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

}  // namespace

web_desk::web_desk(asio::io_context& io, cluster_links& hub, const user_map& users, std::chrono::milliseconds timeout)
    : io_(io), hub_(hub), users_(users), timeout_(timeout) {}

std::int64_t web_desk::ask(const std::string& cluster, json message) {
  const std::int64_t qid = next_qid_++;
  message["qid"] = qid;
  waiting_[qid] = waiting{cluster, std::nullopt, nullptr};
  if (!hub_.send(cluster, std::move(message))) waiting_[qid].answer = json(nullptr);  // away: answered with nothing
  return qid;
}

asio::awaitable<void> web_desk::wait_for(const std::vector<std::int64_t>& qids) {
  auto wake = std::make_shared<asio::steady_timer>(io_);
  for (const auto q : qids) waiting_[q].wake = wake;
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  auto all_in = [&] {
    return std::all_of(qids.begin(), qids.end(), [&](std::int64_t q) { return waiting_[q].answer.has_value(); });
  };
  while (!all_in() && std::chrono::steady_clock::now() < deadline) {
    wake->expires_at(deadline);
    boost::system::error_code ignored;
    co_await wake->async_wait(asio::redirect_error(asio::use_awaitable, ignored));
  }
}

void web_desk::on_answer(const std::string& cluster, const std::string&, const json& m) {
  const auto it = m.find("qid");
  if (it == m.end() || !it->is_number_integer()) return;
  const auto w = waiting_.find(it->get<std::int64_t>());
  // Only the cluster asked may answer.
  if (w == waiting_.end() || w->second.cluster != cluster || w->second.answer) return;
  w->second.answer = m;
  if (w->second.wake) w->second.wake->cancel();
}

asio::awaitable<desk_answer> web_desk::quote(const std::string& owner, const json& body) {
  if (!body.is_object() || !body.contains("job") || !body["job"].is_object()) {
    co_return std::string("the body must be {\"cluster\": \"auto\"|NAME, \"job\": {...}}");
  }
  if (body.contains("cluster") && !body["cluster"].is_string()) co_return std::string("cluster must be a string");
  const std::string cluster = body.value("cluster", std::string("auto"));
  if (cluster != "auto" && !hub_.knows(cluster)) {
    co_return "no cluster '" + cluster + "' at this Faucets server (known: " + joined(hub_.names()) + ")";
  }
  if (owner == "root") co_return std::string("faucetsd never runs a job as root: submit as the user the job should run as");
  if (cluster != "auto" && !users_.local_user(owner, cluster)) {
    co_return "user '" + owner + "' may not run jobs on cluster '" + cluster + "' (the admin's user table)";
  }
  std::optional<contract_terms> terms;
  if (const auto c = body.find("contract"); c != body.end()) {
    auto parsed = parse_contract(*c, unix_now());
    if (const auto* why = std::get_if<std::string>(&parsed)) co_return *why;
    terms = terms_at(std::get<job_contract>(parsed), unix_now());
  }
  // aqsd's own rules for the job, as at submission.
  protocol::message parsed;
  try {
    parsed = protocol::parse_message(json{{"type", "submit"}, {"id", 1}, {"job", body["job"]}});
  } catch (const std::exception& e) {
    co_return std::string(e.what());
  }
  const auto* s = std::get_if<protocol::submit>(&parsed);
  if (s == nullptr) co_return std::string("not a job");
  if (s->job.interactive) co_return std::string("interactive jobs (frun) cannot go through the Faucets server");

  job_ask ask;
  ask.min_pe = s->job.min_pe;
  ask.max_pe = s->job.max_pe;
  ask.adaptive = s->job.adaptive;
  ask.walltime_s = s->job.walltime_s ? static_cast<double>(*s->job.walltime_s) : 3600.0;
  ask.contract = terms;
  json rows = json::array();
  std::map<std::int64_t, std::size_t> asked;  // qid -> row
  for (const auto& v : hub_.views()) {
    if (cluster != "auto" && v.name != cluster) continue;
    json row{{"name", v.name}, {"state", v.up ? "UP" : "DOWN"}, {"eligible", false}, {"why", nullptr},
             {"start_in_s", nullptr}, {"completion_in_s", nullptr}, {"price", nullptr}};
    if (!users_.local_user(owner, v.name)) {
      row["why"] = "the admin's user table does not let you run here";
    } else if (!v.up) {
      row["why"] = "not connected";
    } else if (!can_ever_run(ask, v)) {
      row["why"] = "too small for this job (at most " + std::to_string(v.max_job_procs) + " processors)";
    } else {
      row["eligible"] = true;
      asked[ask_estimate_(v.name, ask)] = rows.size();
    }
    rows.push_back(std::move(row));
  }
  std::vector<std::int64_t> qids;
  for (const auto& [q, i] : asked) qids.push_back(q);
  co_await wait_for(qids);
  for (const auto& [q, i] : asked) {
    const auto a = std::move(waiting_[q].answer);
    waiting_.erase(q);
    auto& row = rows[i];
    if (!a || a->is_null()) {
      row["why"] = "no answer within " + std::to_string(timeout_.count()) + " ms";
      continue;
    }
    const auto num = [&](const char* key) -> json {
      const auto it = a->find(key);
      return it != a->end() && it->is_number() && it->get<double>() >= 0 ? json(it->get<double>()) : json(nullptr);
    };
    row["start_in_s"] = num("start_in_s");
    row["completion_in_s"] = num("completion_in_s");
    row["price"] = num("price");
    if (row["start_in_s"].is_null()) row["why"] = "it could not start there";
  }
  co_return json{{"clusters", std::move(rows)}};
}

std::int64_t web_desk::ask_estimate_(const std::string& cluster, const job_ask& a) {
  return ask(cluster, json{{"type", "estimate"},
                           {"min_pe", a.min_pe},
                           {"max_pe", a.max_pe},
                           {"adaptive", a.adaptive},
                           {"walltime_s", a.walltime_s},
                           {"gpus", a.gpus}});
}

asio::awaitable<desk_answer> web_desk::view(const stored_job& j, const std::string& what, double since,
                                            std::int64_t bytes) {
  if (!j.cluster || !j.local_id) co_return "job " + std::to_string(j.id) + " is on no cluster yet (" + j.state + ")";
  const auto local = users_.local_user(j.owner, *j.cluster);
  if (!local) co_return "the admin's user table no longer lets " + j.owner + " run on " + *j.cluster;
  json m{{"type", "job_view"}, {"what", what}, {"fid", j.id}, {"job_id", *j.local_id}, {"user", j.owner},
         {"local_user", *local}};
  if (what == "values") {
    m["since"] = since;
  } else {
    // Where the job writes its output: its working directory and pattern, as submitted.
    const json submit = json::parse(j.submit, nullptr, false);
    const json job = submit.is_object() ? submit.value("job", json::object()) : json::object();
    m["workdir"] = job.value("workdir", std::string());
    m["attempt"] = j.attempts;  // a staged job runs in its forward's own directory there instead
    m["stdout"] = job.value("stdout", std::string("aqs-%j.out"));
    m["name"] = j.name;
    m["bytes"] = std::clamp<std::int64_t>(bytes, 1, k_max_output_tail);
  }
  const std::int64_t q = ask(*j.cluster, std::move(m));
  const std::vector<std::int64_t> qs{q};
  co_await wait_for(qs);
  auto a = std::move(waiting_[q].answer);
  waiting_.erase(q);
  if (!a || a->is_null()) co_return "cluster " + *j.cluster + " did not answer (it may be away); try again";
  if (const auto e = a->find("error"); e != a->end() && e->is_string()) co_return *j.cluster + ": " + e->get<std::string>();
  json out{{"id", j.id}, {"cluster", *j.cluster}, {"local_id", *j.local_id}};
  if (what == "values") {
    out["values"] = a->value("values", json(nullptr));
  } else {
    out["output"] = a->value("output", std::string());
    out["size"] = a->value("size", 0);
    out["path"] = a->value("path", std::string());
  }
  co_return out;
}

}  // namespace aqs::faucets
