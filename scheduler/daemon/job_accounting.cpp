// job_accounting (job_accounting.hpp): accounts, limits, priority and usage in aqsd.
#include "daemon/job_accounting.hpp"

#include <algorithm>
#include <cctype>
#include <sstream>
#include <stdexcept>

#include "core/limits.hpp"
#include "core/placement.hpp"
#include "core/time_limit.hpp"
#include "daemon/job_records.hpp"
#include "daemon_base/permissions.hpp"
#include "daemon_base/unix_user.hpp"
#include "logging/log.hpp"
#include "protocol/accounts_wire.hpp"
#include "store/account_store.hpp"

namespace aqs::daemon {

using core::job_state;

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// The value of "KEY=..." among a job's recorded Slurm options (the last:
// the command line's comes after the script's #SBATCH one), or "".
std::string recorded(const protocol::job_spec& spec, std::string_view key) { return recorded_option(spec.geometry, key); }

std::string recorded(const std::optional<protocol::job_geometry>& g, std::string_view key) { return recorded_option(g, key); }

core::account_tree with_root(core::account_tree t) {
  const bool has_root = std::any_of(t.accounts.begin(), t.accounts.end(),
                                    [](const core::account& a) { return a.name == core::k_root_account; });
  if (!has_root) t.accounts.insert(t.accounts.begin(), core::account{std::string(core::k_root_account), "", 1, {}, "", ""});
  return t;
}

std::size_t count_ones(const std::string& bits) { return static_cast<std::size_t>(std::count(bits.begin(), bits.end(), '1')); }

}  // namespace

std::string take_accounting_lines(std::string_view text, std::string_view file, accounting_options& out) {
  std::string rest;
  std::istringstream in{std::string(text)};
  std::size_t line_no = 0;
  accounting_options next = out;
  for (std::string line; std::getline(in, line);) {
    ++line_no;
    const auto where = [&] { return std::string(file) + ":" + std::to_string(line_no) + ": "; };
    std::string body = line.substr(0, line.find('#'));
    std::istringstream words(body);
    std::vector<std::string> ws;
    for (std::string w; words >> w;) ws.push_back(w);
    auto ours = [&](const std::string& w) {
      const std::string k = lower(w.substr(0, w.find('=')));
      if (k == "accountingstorageenforce" || k == "prioritycalcperiod" || k == "prioritytype") return true;
      core::priority_weights probe;
      return core::set_priority_setting(probe, w.substr(0, w.find('=')), "0").has_value();
    };
    if (ws.empty() || !ours(ws.front())) {
      rest += line;
      rest += '\n';
      continue;
    }
    for (const std::string& w : ws) {
      const auto eq = w.find('=');
      if (eq == std::string::npos || !ours(w)) {
        throw std::invalid_argument(where() + "'" + w + "' cannot share a line with " + ws.front().substr(0, ws.front().find('=')));
      }
      const std::string key = w.substr(0, eq), value = w.substr(eq + 1);
      const std::string k = lower(key);
      if (k == "accountingstorageenforce") {
        bool assoc = false, limits = false;
        std::stringstream vs(value);
        for (std::string v; std::getline(vs, v, ',');) {
          const std::string lv = lower(v);
          if (lv == "none") continue;
          if (lv == "associations") {
            assoc = true;
          } else if (lv == "limits" || lv == "qos" || lv == "safe") {
            assoc = limits = true;
          } else if (lv == "wckeys" || lv == "nojobs" || lv == "nosteps") {
            continue;  // nothing of AQS's to enforce
          } else {
            throw std::invalid_argument(where() + "AccountingStorageEnforce takes none, associations, limits, qos or safe, not '" + v + "'");
          }
        }
        next.enforce_associations = assoc;
        next.enforce_limits = limits;
      } else if (k == "prioritycalcperiod") {
        std::int64_t s = 0;
        try {
          s = core::parse_time_limit(value);
        } catch (const std::exception&) {
          s = 0;
        }
        if (s <= 0 || s > 86400) {
          throw std::invalid_argument(where() + "PriorityCalcPeriod takes a time from 1 second to a day (minutes, M:S or H:M:S), not '" + value + "'");
        }
        next.calc_period = std::chrono::seconds(s);
      } else if (k == "prioritytype") {
        if (value != "priority/multifactor" && value != "priority/basic") {
          throw std::invalid_argument(where() + "PriorityType takes priority/multifactor or priority/basic, not '" + value + "'");
        }
      } else if (auto why = core::set_priority_setting(next.weights, key, value); why && !why->empty()) {
        throw std::invalid_argument(where() + *why);
      }
    }
    rest += '\n';
  }
  out = next;
  return rest;
}

job_accounting::job_accounting(accounting_options o, write_pipeline& pipe, clock& time, core::scheduler& core)
    : o_(std::move(o)),
      pipe_(pipe),
      clock_(time),
      core_(core),
      acc_(std::make_unique<core::accounting>(with_root({}), o_.weights)) {
  rebuild_admitted();
  checks_ = o_.enforce_associations || o_.enforce_limits;
}

job_accounting::~job_accounting() { stop(); }

void job_accounting::load() {
  if (o_.conninfo.empty()) return;
  store_ = std::make_unique<store::account_store>(o_.conninfo);
  core::account_tree tree = with_root(store_->load());
  acc_ = std::make_unique<core::accounting>(std::move(tree), o_.weights);
  // The usage that still weighs: ten half-lives (a year without decay).
  const double now = clock_.wall_seconds();
  const double back = o_.weights.half_life_s > 0 ? 10 * o_.weights.half_life_s : 366 * 86400.0;
  const auto from = store::time_point(
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::duration<double>(std::max(0.0, now - back))));
  std::size_t n = 0;
  for (const store::usage_record& r : store_->usage_since(from)) {
    acc_->restore_usage(r.user, r.account, r.cpu_seconds, std::chrono::duration<double>(r.start.time_since_epoch()).count(),
                        std::chrono::duration<double>(r.end.time_since_epoch()).count());
    ++n;
  }
  rebuild_admitted();
  checks_ = o_.enforce_associations || o_.enforce_limits || !acc_->index().tree().associations.empty();
  logging::info("accounting: {} accounts, {} users in accounts, {} QOS, {} usage records; enforcing {}",
                acc_->index().tree().accounts.size(), acc_->index().tree().associations.size(),
                acc_->index().tree().qos_list.size(), n,
                o_.enforce_limits ? "associations and limits" : o_.enforce_associations ? "associations" : "nothing");
}

void job_accounting::start() {
  if (o_.weights.all_zero()) return;
  schedule_priorities();
}

void job_accounting::stop() {
  stopped_ = true;
  timer_.reset();
}

void job_accounting::schedule_priorities() {
  if (stopped_) return;
  timer_ = clock_.after(pipe_.strand(), o_.calc_period, [this] {
    if (stopped_) return;
    try {
      if (acc_->reprioritise(core_, clock_.wall_seconds()) > 0) pipe_.decide();
    } catch (const std::exception& e) {
      logging::warn("accounting: the priorities could not be computed: {}", e.what());
    }
    schedule_priorities();
  });
}

void job_accounting::rebuild_admitted() {
  admitted_ = std::make_unique<core::limit_tally>(acc_->index());
  for (const auto& [id, cpus] : in_core_) {
    if (auto lj = acc_->limit_job_of(static_cast<core::job_id>(id), cpus)) admitted_->add_running(*lj);
  }
}

core::accounting_job job_accounting::job_of(std::int64_t id, const job_entry& e) const {
  core::accounting_job j;
  j.id = static_cast<core::job_id>(id);
  j.user = e.user;
  j.account = recorded(e.geometry, "account");
  j.qos = recorded(e.geometry, "qos");
  j.cpus = e.req.min_pe;
  j.walltime_s = e.req.walltime;
  j.submit_time = e.req.submit_time;
  j.base_priority = e.req.priority;
  return j;
}

// ---------------------------------------------------------------- submission --

std::string job_accounting::check_submission(protocol::job_spec& spec, const std::string& user, std::uint64_t& ticket) {
  const double now = clock_.wall_seconds();
  const core::job_request r = to_core_request(0, spec, user, now);
  core::accounting_job j;
  j.id = ticket = next_ticket_++;
  j.user = user;
  j.account = recorded(spec, "account");
  j.qos = recorded(spec, "qos");
  j.cpus = r.min_pe;
  j.walltime_s = r.walltime;
  j.submit_time = now;
  j.base_priority = r.priority;
  core::accounting_admission a = acc_->submit(j);
  if (!a.error.empty()) {
    const bool limit = a.reason != core::limit_reason::none;
    if ((limit && o_.enforce_limits) || (!limit && o_.enforce_associations)) return a.error;
    // Not enforced: charged where the user has an account; a user in no
    // account is tracked for its usage only (no limit), under the account
    // it asked for, if any.
    acc_->adopt(j);
    a.account = acc_->account_of(j.id).value_or(std::string());
  }
  j.account = a.account;
  if (a.time_limit_s && !spec.walltime_s && o_.enforce_limits) {
    spec.walltime_s = *a.time_limit_s;
    j.walltime_s = *a.time_limit_s;
  }
  // The account it is charged to is kept with the job (sacct, squeue -A,
  // and the same account after a restart, whatever the default is then).
  if (spec.geometry && !a.account.empty() && recorded(spec, "account").empty()) {
    spec.geometry->recorded.push_back("account=" + a.account);
  }
  tickets_[ticket] = j;
  return {};
}

void job_accounting::stored(std::uint64_t ticket, std::int64_t id) {
  auto it = tickets_.find(ticket);
  if (it == tickets_.end()) return;
  core::accounting_job j = it->second;
  tickets_.erase(it);
  acc_->drop(ticket);
  j.id = static_cast<core::job_id>(id);
  if (!acc_->tracks(j.id)) acc_->adopt(j);
}

void job_accounting::unstored(std::uint64_t ticket) {
  tickets_.erase(ticket);
  acc_->drop(ticket);
}

// ---------------------------------------------------------------- admission --

std::string job_accounting::admit(std::int64_t id, job_entry& e) {
  const auto cid = static_cast<core::job_id>(id);
  if (!acc_->tracks(cid)) acc_->adopt(job_of(id, e));
  shapes_[id] = e.geometry;
  if (!o_.enforce_limits || in_core_.count(id) != 0) return {};
  std::optional<core::limit_job> lj = acc_->limit_job_of(cid, e.req.min_pe);
  if (!lj) return {};
  const core::limit_reason why = core::check_start(*admitted_, *lj);
  if (why != core::limit_reason::none) {
    std::string reason(core::to_string(why));
    held_[id] = reason;
    return reason;
  }
  std::size_t count = e.req.min_pe;
  if (e.req.adaptive && e.req.max_pe > e.req.min_pe) {
    // Its growth stops at the CPU limits: it is counted at the largest size
    // they leave it, and the core never offers it more.
    admitted_->add_running(*lj);
    const std::size_t room = core::cpu_headroom(*admitted_, *lj);
    admitted_->remove_running(*lj);
    count = room >= e.req.max_pe - e.req.min_pe ? e.req.max_pe : e.req.min_pe + room;
    if (count < e.req.max_pe) {
      logging::info("job {}: grows to {} processors at most (its limits leave {} of the {} it asked)", id, count, count,
                    e.req.max_pe);
      e.req.max_pe = count;
      if (e.req.pref_pe > count) e.req.pref_pe = count;
    }
  }
  lj->cpus = count;
  admitted_->add_running(*lj);
  in_core_[id] = count;
  held_.erase(id);
  return {};
}

void job_accounting::prioritise(std::int64_t id) {
  if (o_.weights.all_zero()) return;
  const auto cid = static_cast<core::job_id>(id);
  if (auto p = acc_->priority_of(cid, core_.machine().size(), clock_.wall_seconds())) {
    try {
      core_.set_priority(cid, p->value);
    } catch (const std::exception&) {
      // Not queued (it started at once, or is held): the next period sets it.
    }
  }
}

void job_accounting::restored(std::int64_t id, const job_entry& e, std::size_t procs, double start, bool suspended) {
  const auto cid = static_cast<core::job_id>(id);
  if (!acc_->tracks(cid)) acc_->adopt(job_of(id, e));
  shapes_[id] = e.geometry;
  const std::size_t count = e.req.adaptive ? std::max(procs, e.req.max_pe) : procs;
  if (auto lj = acc_->limit_job_of(cid, count)) {
    admitted_->add_running(*lj);
    in_core_[id] = count;
  }
  acc_->start(cid, procs, start);
  running_[id] = procs;
  if (const core::job* j = core_.find(cid)) hold_nodes(id, j->procs, start);
  if (suspended) {
    acc_->suspend(cid, clock_.wall_seconds());
    running_.erase(id);
    hold_nodes(id, std::string(), clock_.wall_seconds());
  }
}

void job_accounting::hold_nodes(std::int64_t id, const core::processor_set& map, double t) {
  node_time& n = node_time_[id];
  if (n.nodes != 0) n.seconds += static_cast<double>(n.nodes) * std::max(0.0, t - n.since);
  n.nodes = map.size() == core_.machine().size() ? core::nodes_spanned(core_.machine(), map) : 0;
  n.since = t;
}

void job_accounting::hold_nodes(std::int64_t id, const std::string& map, double t) {
  core::processor_set set(core_.machine().size());
  if (!map.empty()) {
    set = core::processor_set::from_string(map);
    set.resize(core_.machine().size());
  }
  hold_nodes(id, set, t);
}

// ---------------------------------------------------------------- changes --

void job_accounting::on_change(const job_change& ch) {
  const std::int64_t id = ch.job_id;
  const auto cid = static_cast<core::job_id>(id);
  const double t = ch.time > 0 ? ch.time : clock_.wall_seconds();
  if (core::is_final(ch.state)) return charge_final(id, ch);
  if (!acc_->tracks(cid)) return;
  switch (ch.state) {
    case job_state::running: {
      const std::size_t procs = count_ones(ch.procs);
      if (procs == 0) return;
      hold_nodes(id, ch.procs, t);
      auto it = running_.find(id);
      if (it == running_.end()) {
        acc_->start(cid, procs, t);
        running_[id] = procs;
      } else if (it->second != procs) {
        acc_->resize(cid, procs, t);
        it->second = procs;
      }
      return;
    }
    case job_state::suspended:
    case job_state::pending:
      if (running_.erase(id) != 0) acc_->suspend(cid, t);
      hold_nodes(id, std::string(), t);
      return;
    default:
      return;
  }
}

void job_accounting::charge_final(std::int64_t id, const job_change& ch) {
  const auto cid = static_cast<core::job_id>(id);
  const double t = ch.time > 0 ? ch.time : clock_.wall_seconds();
  running_.erase(id);
  held_.erase(id);
  std::optional<double> node_seconds;
  if (auto n = node_time_.find(id); n != node_time_.end()) {
    hold_nodes(id, std::string(), t);
    node_seconds = n->second.seconds;
    node_time_.erase(n);
  }
  std::optional<protocol::job_geometry> shape;
  if (auto s = shapes_.find(id); s != shapes_.end()) {
    shape = s->second;
    shapes_.erase(s);
  }
  if (auto it = in_core_.find(id); it != in_core_.end()) {
    if (auto lj = acc_->limit_job_of(cid, it->second)) admitted_->remove_running(*lj);
    in_core_.erase(it);
  }
  const std::optional<core::accounting_charge> charge = acc_->finish(cid, t);
  if (charge && store_) {
    store::usage_record r;
    r.job_id = id;
    r.user = charge->user;
    r.account = charge->account;
    r.qos = charge->qos;
    auto tp = [](double s) {
      return store::time_point(std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::duration<double>(s)));
    };
    r.start = tp(charge->start);
    r.end = tp(std::max(charge->end, charge->start));
    r.cpu_seconds = std::max(0.0, charge->cpu_seconds);
    if (shape) {
      // Per node: the node-seconds it held (its maps over time, suspended
      // time excluded), else its node minimum over its run.
      const double held = node_seconds.value_or(static_cast<double>(shape->nodes_min.value_or(1)) *
                                                std::max(0.0, charge->end - charge->start));
      if (shape->mem_per_cpu_mb) r.mem_mb_seconds = static_cast<double>(*shape->mem_per_cpu_mb) * r.cpu_seconds;
      if (shape->mem_per_node_mb) r.mem_mb_seconds = static_cast<double>(*shape->mem_per_node_mb) * held;
      if (shape->gpus_per_node) r.gpu_seconds = static_cast<double>(*shape->gpus_per_node) * held;
    }
    store::account_store* st = store_.get();
    pipe_.on_readers([st, r] {
      try {
        st->record_usage(r);
      } catch (const std::exception& e) {
        logging::warn("accounting: the usage of job {} could not be recorded: {}", r.job_id, e.what());
      }
    });
  }
  release_held();
}

void job_accounting::release_held() {
  if (held_.empty() || !readmit_) return;
  std::vector<std::int64_t> ids;
  ids.reserve(held_.size());
  for (const auto& [id, why] : held_) ids.push_back(id);
  for (std::int64_t id : ids) {
    if (held_.count(id) != 0) readmit_(id);
  }
}

void job_accounting::replace_tree(core::account_tree t) {
  acc_->reload(with_root(std::move(t)));
  rebuild_admitted();
  checks_ = o_.enforce_associations || o_.enforce_limits || !acc_->index().tree().associations.empty();
  release_held();
}

void job_accounting::reload_tree(std::function<void(std::string)> done) {
  if (!store_) return done("accounting has no database");
  pipe_.on_readers([this, done = std::move(done)] {
    core::account_tree tree;
    try {
      tree = with_root(store_->load());
    } catch (const std::exception& e) {
      return done(std::string("the accounts could not be read again: ") + e.what());
    }
    pipe_.post([this, tree = std::move(tree), done]() mutable {
      try {
        replace_tree(std::move(tree));
      } catch (const std::exception& e) {
        return done(e.what());
      }
      done("");
    });
  });
}

// ---------------------------------------------------------------- requests --

namespace {

nlohmann::json weights_json(const core::priority_weights& w) {
  return nlohmann::json{{"age", w.age},           {"fairshare", w.fairshare},   {"job_size", w.job_size},
                        {"partition", w.partition}, {"qos", w.qos},             {"max_age_s", w.max_age_s},
                        {"half_life_s", w.half_life_s}, {"favor_small", w.favor_small}};
}

}  // namespace

void job_accounting::handle_accounts(const std::shared_ptr<connection>& c, const protocol::accounts& m) {
  const double now = clock_.wall_seconds();
  if (m.action == "show") {
    nlohmann::json tree = protocol::to_json(acc_->index().tree());
    tree["enforce"] = o_.enforce_limits ? "associations,limits" : o_.enforce_associations ? "associations" : "none";
    c->send(protocol::ok{m.id, nlohmann::json{{"tree", std::move(tree)}}});
    return;
  }
  if (m.action == "shares") {
    const core::fair_share_result fs = acc_->shares(now);
    nlohmann::json rows = nlohmann::json::array();
    for (const core::share_row& r : fs.rows) {
      rows.push_back({{"is_user", r.is_user},
                      {"account", r.account},
                      {"user", r.user},
                      {"depth", r.depth},
                      {"raw_shares", r.raw_shares},
                      {"norm_shares", r.norm_shares},
                      {"raw_usage", r.raw_usage},
                      {"norm_usage", r.norm_usage},
                      {"effective_usage", r.effective_usage},
                      {"fairshare", r.fairshare}});
    }
    c->send(protocol::ok{m.id, nlohmann::json{{"shares", std::move(rows)}, {"weights", weights_json(o_.weights)}}});
    return;
  }
  if (m.action == "priority") {
    acc_->shares(now);
    nlohmann::json jobs = nlohmann::json::array();
    const std::size_t procs = core_.machine().size();
    for (const core::queue_key& k : core_.queue()) {
      const auto p = acc_->priority_of(k.id, procs, now);
      if (!p) continue;
      const core::job& j = core_.get(k.id);
      jobs.push_back({{"job_id", static_cast<std::int64_t>(k.id)},
                      {"user", j.req.user},
                      {"account", acc_->account_of(k.id).value_or("")},
                      {"partition", j.req.partition},
                      {"priority", p->value},
                      {"age", p->factors.age},
                      {"fairshare", p->factors.fairshare},
                      {"job_size", p->factors.job_size},
                      {"partition_factor", p->factors.partition},
                      {"qos", p->factors.qos}});
    }
    c->send(protocol::ok{m.id, nlohmann::json{{"jobs", std::move(jobs)}, {"weights", weights_json(o_.weights)}}});
    return;
  }
  if (m.action == "usage") {
    if (!store_) {
      c->send(protocol::ok{m.id, nlohmann::json{{"usage", nlohmann::json::array()}}});
      return;
    }
    // Root sees everyone's; a user their own rows (as sreport with PrivateData=usage).
    std::optional<std::string> only;
    if (!is_admin(c->peer())) only = c->peer().uid ? user_name_of(*c->peer().uid) : std::string("?");
    const auto at = [](std::int64_t s) { return store::time_point(std::chrono::microseconds(s * 1'000'000)); };
    const store::time_point from = at(m.from_s.value_or(0));
    const store::time_point to = at(m.to_s.value_or(static_cast<std::int64_t>(now) + 1));
    pipe_.on_readers([this, c, id = m.id, from, to, only] {
      try {
        nlohmann::json rows = nlohmann::json::array();
        for (const store::usage_total& u : store_->usage_between(from, to)) {
          if (only && u.user != *only) continue;
          rows.push_back({{"user", u.user},
                          {"account", u.account},
                          {"jobs", u.jobs},
                          {"cpu_seconds", u.cpu_seconds},
                          {"mem_mb_seconds", u.mem_mb_seconds},
                          {"gpu_seconds", u.gpu_seconds}});
        }
        c->send(protocol::ok{id, nlohmann::json{{"usage", std::move(rows)}}});
      } catch (const std::exception& e) {
        reply_error(c, id, protocol::error_code::internal, std::string("usage could not be read: ") + e.what());
      }
    });
    return;
  }
  if (!is_admin(c->peer())) {
    reply_error(c, m.id, protocol::error_code::permission_denied, "only root may change accounts, users and QOS");
    return;
  }
  if (!store_) {
    reply_error(c, m.id, protocol::error_code::internal, "accounting has no database");
    return;
  }
  change_tree(c, m);
}

void job_accounting::change_tree(const std::shared_ptr<connection>& c, const protocol::accounts& m) {
  const std::string actor = c->peer().uid ? user_name_of(*c->peer().uid) : std::string("root");
  pipe_.on_readers([this, c, m, actor] {
    try {
      nlohmann::json record;
      if (m.record) {
        record = nlohmann::json::parse(*m.record, nullptr, true);
        if (!record.is_object()) throw std::invalid_argument("accounts: the record must be a JSON object");
      }
      const std::string& e = *m.entity;
      if (m.action == "add" && e == "account") store_->add_account(protocol::account_from_json(record), actor);
      if (m.action == "modify" && e == "account") store_->modify_account(protocol::account_from_json(record), actor);
      if (m.action == "delete" && e == "account") store_->delete_account(*m.name, actor);
      if (m.action == "add" && e == "user") store_->add_user(protocol::user_from_json(record), m.make_default, actor);
      if (m.action == "modify" && e == "user") {
        const core::user_association u = protocol::user_from_json(record);
        store_->modify_user(u, actor);
        if (m.make_default) store_->set_default_account(u.user, u.account, actor);
      }
      if (m.action == "delete" && e == "user") {
        if (!m.account) throw std::invalid_argument("delete user needs the account");
        store_->delete_user(*m.name, *m.account, actor);
      }
      if (m.action == "add" && e == "qos") store_->add_qos(protocol::qos_from_json(record), actor);
      if (m.action == "modify" && e == "qos") store_->modify_qos(protocol::qos_from_json(record), actor);
      if (m.action == "delete" && e == "qos") store_->delete_qos(*m.name, actor);
    } catch (const store::account_refused& ex) {
      return reply_error(c, m.id, protocol::error_code::bad_request, ex.what());
    } catch (const store::not_found& ex) {
      return reply_error(c, m.id, protocol::error_code::not_found, ex.what());
    } catch (const std::invalid_argument& ex) {
      return reply_error(c, m.id, protocol::error_code::bad_request, ex.what());
    } catch (const nlohmann::json::exception& ex) {
      return reply_error(c, m.id, protocol::error_code::bad_request, std::string("accounts: the record is not JSON: ") + ex.what());
    } catch (const std::exception& ex) {
      return reply_error(c, m.id, protocol::error_code::internal, std::string("the accounts could not be changed: ") + ex.what());
    }
    logging::info("accounts: {} {} {} by {}", m.action, *m.entity, m.name.value_or(m.record.value_or("")), actor);
    reload_tree([c, id = m.id](const std::string& why) {
      if (why.empty()) {
        c->send(protocol::ok{id, nlohmann::json::object()});
      } else {
        reply_error(c, id, protocol::error_code::internal, "stored, but aqsd could not act on it yet: " + why);
      }
    });
  });
}

}  // namespace aqs::daemon
