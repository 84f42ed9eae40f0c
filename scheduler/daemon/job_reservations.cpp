// job_reservations: stored reservations, the core's view of them, the
// `reservations` message and the checks of jobs that name one.
#include "daemon/job_reservations.hpp"

#include <algorithm>
#include <cmath>
#include <set>

#include <nlohmann/json.hpp>

#include "core/hostlist.hpp"
#include "core/map_display.hpp"
#include "daemon/job_records.hpp"
#include "daemon_base/permissions.hpp"
#include "daemon_base/unix_user.hpp"
#include "logging/log.hpp"

namespace aqs::daemon {

namespace {

constexpr std::string_view k_flags[] = {"MAINT", "IGNORE_JOBS"};
// Timers wake at least hourly, so a clock step never leaves one far off.
constexpr double k_max_wait_s = 3600;
// Adaptive jobs are shrunk off a reservation's processors this long before
// its start: an MPI job acknowledges at its next MPI_Migrate(), which on a
// loaded machine took up to 9 s (docs/benchmarks.md, bench_reservations).
constexpr double k_evict_lead_s = 15;

bool valid_name(const std::string& n) {
  if (n.empty() || n.size() > 64) return false;
  return std::all_of(n.begin(), n.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-';
  });
}

store::time_point at_seconds(double s) {
  return store::time_point{std::chrono::microseconds{static_cast<std::int64_t>(std::llround(s * 1e6))}};
}

std::string joined(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& x : v) out += (out.empty() ? "" : ",") + x;
  return out;
}

bool has_flag(const store::reservation_row& r, std::string_view f) {
  return std::find(r.flags.begin(), r.flags.end(), f) != r.flags.end();
}

// A list of names from the record ("users": ["a", "b"]); each checked.
std::vector<std::string> names_of(const nlohmann::json& rec, const char* key) {
  std::vector<std::string> out;
  if (!rec.contains(key) || rec[key].is_null()) return out;
  if (!rec[key].is_array()) throw std::invalid_argument(std::string(key) + " must be a list of names");
  for (const auto& v : rec[key]) {
    if (!v.is_string() || !valid_name(v.get<std::string>())) {
      throw std::invalid_argument(std::string(key) + ": '" + (v.is_string() ? v.get<std::string>() : v.dump()) +
                                  "' is not a name");
    }
    out.push_back(v.get<std::string>());
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

double seconds_of(const nlohmann::json& rec, const char* key) {
  const auto& v = rec.at(key);
  if (!v.is_number()) throw std::invalid_argument(std::string(key) + " must be a number of seconds");
  const double s = v.get<double>();
  if (!std::isfinite(s) || s < 0 || s > 1e11) throw std::invalid_argument(std::string(key) + " is out of range");
  return s;
}

}  // namespace

job_reservations::job_reservations(std::string conninfo, write_pipeline& pipe, clock& time, core::scheduler& core,
                                   access_view& view)
    : conninfo_(std::move(conninfo)), pipe_(pipe), clock_(time), core_(core), view_(view) {}

job_reservations::~job_reservations() { stop(); }

void job_reservations::load() {
  if (conninfo_.empty()) return;
  store_ = std::make_unique<store::reservation_store>(conninfo_);
  for (auto& r : store_->load()) {
    std::string name = r.name;
    entries_[name] = entry{std::move(r)};
  }
  dirty_ = true;
  if (!entries_.empty()) logging::info("reservations: {} loaded", entries_.size());
}

void job_reservations::start() {
  stopped_ = false;
  arm(clock_.wall_seconds());
}

void job_reservations::stop() {
  stopped_ = true;
  timer_.reset();
}

std::vector<core::advance_reservation> job_reservations::core_view(double now, const std::string& except) const {
  const auto spans = view_.spans();
  const std::size_t size = core_.machine().size();
  std::vector<core::advance_reservation> out;
  const auto add = [&](const store::reservation_row& row) {
    if (row.name == except) return;
    core::advance_reservation r;
    r.name = row.name;
    r.start = static_cast<double>(row.start.time_since_epoch().count()) / 1e6;
    r.end = static_cast<double>(row.end.time_since_epoch().count()) / 1e6;
    if (r.end <= now) return;
    try {
      r.procs = core::parse_processor_map(spans, row.procs, size);
    } catch (const std::invalid_argument& e) {
      logging::warn("reservation {}: {}", row.name, e.what());
      return;
    }
    if (r.procs.any()) out.push_back(std::move(r));  // none of its nodes registered yet: nothing to plan
  };
  for (const auto& [name, e] : entries_) add(e.row);
  for (const auto& [name, row] : in_flight_) add(row);
  return out;
}

void job_reservations::sync(double now) {
  const std::size_t size = core_.machine().size();
  bool ended = false;
  for (const auto& r : core_.reservations()) ended = ended || r.end <= now;
  if (!dirty_ && !ended && size == synced_size_) return;
  std::vector<core::advance_reservation> rs;
  for (auto& r : core_view(now)) {
    if (entries_.count(r.name) != 0) rs.push_back(std::move(r));  // in-flight ones are not made yet
  }
  try {
    core_.set_reservation_lead(k_evict_lead_s);
    core_.set_reservations(std::move(rs));
  } catch (const std::invalid_argument& e) {
    logging::warn("reservations: {}", e.what());
  }
  dirty_ = false;
  synced_size_ = size;
}

std::string job_reservations::check_submission(const protocol::job_spec& spec, const std::string& user, bool root) const {
  const std::string name = recorded_option(spec.geometry, "reservation");
  if (name.empty()) return {};
  const_cast<job_reservations*>(this)->named_ = true;
  const auto it = entries_.find(name);
  if (it == entries_.end()) {
    std::string known;
    for (const auto& [n, e] : entries_) known += (known.empty() ? "" : ", ") + n;
    return "Requested reservation is invalid: no reservation '" + name + "' (reservations: " +
           (known.empty() ? std::string("none") : known) + ")";
  }
  const store::reservation_row& r = it->second.row;
  if (r.end <= at_seconds(clock_.wall_seconds())) return "Requested reservation is invalid: reservation " + name + " has ended";
  if (root) return {};
  if (std::find(r.users.begin(), r.users.end(), user) != r.users.end()) return {};
  const std::string account = recorded_option(spec.geometry, "account");
  if (!account.empty() && std::find(r.accounts.begin(), r.accounts.end(), account) != r.accounts.end()) return {};
  return "Access denied to requested reservation: " + name + " is for " +
         (r.users.empty() ? std::string() : "users " + joined(r.users)) +
         (r.users.empty() || r.accounts.empty() ? "" : " and ") +
         (r.accounts.empty() ? std::string() : "accounts " + joined(r.accounts)) +
         (account.empty() ? std::string() : " (the job's account: " + account + ")");
}

std::string job_reservations::pending_reason(const core::job& j, double now) const {
  if (j.req.reservation.empty()) return {};
  const auto it = entries_.find(j.req.reservation);
  if (it == entries_.end()) return "ReservationDeleted";
  const double start = static_cast<double>(it->second.row.start.time_since_epoch().count()) / 1e6;
  return now < start ? "Reservation" : "";
}

std::string job_reservations::to_json(const store::reservation_row& r, double now) const {
  const auto spans = view_.spans();
  const double start = static_cast<double>(r.start.time_since_epoch().count()) / 1e6;
  const double end = static_cast<double>(r.end.time_since_epoch().count()) / 1e6;
  std::vector<std::string> nodes;
  std::size_t cores = 0;
  try {
    const core::processor_set p = core::parse_processor_map(spans, r.procs, core_.machine().size());
    cores = p.count();
    for (const auto& s : spans) {
      if (p.count_range(s.first_proc, s.first_proc + s.nprocs) > 0) nodes.push_back(s.name);
    }
  } catch (const std::invalid_argument&) {
  }
  nlohmann::json j = {
      {"name", r.name},
      {"start_s", static_cast<std::int64_t>(start)},
      {"end_s", static_cast<std::int64_t>(end)},
      {"state", start <= now && now < end ? "ACTIVE" : "INACTIVE"},
      {"nodes", core::compress_hostlist(nodes)},
      {"node_count", nodes.size()},
      {"core_count", cores},
      {"procs", r.procs},
      {"users", r.users},
      {"accounts", r.accounts},
      {"flags", r.flags},
      {"created_by", r.created_by},
  };
  return j.dump();
}

void job_reservations::handle(const std::shared_ptr<connection>& c, const protocol::reservations& m) {
  const double now = clock_.wall_seconds();
  if (m.action == "show") {
    std::string out = "{\"reservations\":[";
    bool first = true;
    for (const auto& [name, e] : entries_) {
      if (m.name && *m.name != name) continue;
      out += (first ? "" : ",") + to_json(e.row, now);
      first = false;
    }
    if (m.name && first) return reply_error(c, m.id, protocol::error_code::not_found, "Reservation " + *m.name + " not found");
    c->send(protocol::ok{m.id, nlohmann::json::parse(out + "]}")});
    return;
  }
  if (!is_admin(c->peer())) {
    return reply_error(c, m.id, protocol::error_code::permission_denied,
                       "only root may " + m.action + " reservations (they set processors aside for others)");
  }
  const std::string actor = c->peer().uid ? user_name_of(*c->peer().uid) : std::string("root");
  try {
    if (m.action == "create") return create(c, m, actor);
    if (m.action == "update") return update(c, m, actor);
    return remove(c, m, actor);
  } catch (const nlohmann::json::exception& e) {
    return reply_error(c, m.id, protocol::error_code::bad_request, std::string("reservation: the record is not valid JSON: ") + e.what());
  } catch (const std::invalid_argument& e) {
    return reply_error(c, m.id, protocol::error_code::bad_request, e.what());
  }
}

void job_reservations::create(const std::shared_ptr<connection>& c, const protocol::reservations& m, const std::string& actor) {
  const double now = clock_.wall_seconds();
  const nlohmann::json rec = nlohmann::json::parse(*m.record);
  if (!rec.is_object()) throw std::invalid_argument("reservation: the record must be a JSON object");
  store::reservation_row row;
  row.name = rec.value("name", std::string());
  if (!valid_name(row.name)) throw std::invalid_argument("reservation: a name of letters, digits, '_', '.' or '-' (at most 64) is required");
  if (entries_.count(row.name) != 0 || in_flight_.count(row.name) != 0) {
    throw std::invalid_argument("Duplicate reservation name: " + row.name + " exists already");
  }
  core::reservation_ask ask;
  ask.start = rec.contains("start_s") ? seconds_of(rec, "start_s") : now;
  if (ask.start < now - 60) throw std::invalid_argument("Reservation request has invalid start time: it is in the past");
  if (ask.start < now) ask.start = now;
  if (rec.contains("end_s")) {
    ask.end = seconds_of(rec, "end_s");
  } else if (rec.contains("duration_s")) {
    ask.end = ask.start + seconds_of(rec, "duration_s");
  } else {
    throw std::invalid_argument("reservation: end_s or duration_s is required");
  }
  if (!(ask.end > ask.start)) throw std::invalid_argument("Reservation request has invalid time: it ends before it starts");
  row.users = names_of(rec, "users");
  row.accounts = names_of(rec, "accounts");
  row.flags = names_of(rec, "flags");
  for (auto& f : row.flags) std::transform(f.begin(), f.end(), f.begin(), [](unsigned char ch) { return std::toupper(ch); });
  for (const auto& f : row.flags) {
    if (std::find(std::begin(k_flags), std::end(k_flags), f) == std::end(k_flags)) {
      throw std::invalid_argument("reservation: unknown flag " + f + " (flags: MAINT, IGNORE_JOBS)");
    }
  }
  if (row.users.empty() && row.accounts.empty()) throw std::invalid_argument("reservation: Users= or Accounts= is required");
  for (const auto& a : row.accounts) {
    if (account_known_ && !account_known_(a)) throw std::invalid_argument("reservation: no account " + a);
  }
  ask.ignore_jobs = has_flag(row, "IGNORE_JOBS");
  const auto spans = view_.spans();
  const std::size_t size = core_.machine().size();
  if (rec.contains("nodes") && !rec["nodes"].is_null()) {
    if (!rec["nodes"].is_string()) throw std::invalid_argument("reservation: nodes must be a host list");
    core::processor_set want(size);
    for (const std::string& n : core::expand_hostlist(rec["nodes"].get<std::string>())) {
      const auto s = std::find_if(spans.begin(), spans.end(), [&](const core::node_span& x) { return x.name == n; });
      if (s == spans.end()) throw std::invalid_argument("reservation: unknown node " + n);
      want.set_range(s->first_proc, s->first_proc + s->nprocs);
    }
    ask.procs = want;
  } else if (rec.contains("core_count")) {
    const auto& v = rec["core_count"];
    if (!v.is_number_integer() || v.get<std::int64_t>() < 1 || v.get<std::int64_t>() > 16777216) {
      throw std::invalid_argument("reservation: core_count must be a positive number");
    }
    ask.count = v.get<std::size_t>();
  } else {
    throw std::invalid_argument("reservation: nodes or core_count is required");
  }
  const auto choice = core::choose_reservation_procs(core_, ask, core_view(now));
  if (!choice.error.empty()) throw std::invalid_argument("Reservation request not satisfiable: " + choice.error);
  row.start = at_seconds(ask.start);
  row.end = at_seconds(ask.end);
  row.procs = core::format_processor_map(spans, choice.procs);
  row.created_by = actor;
  in_flight_[row.name] = row;
  const auto stored = [this, c, id = m.id, row](std::string why) {
    in_flight_.erase(row.name);
    if (!why.empty()) return reply_error(c, id, protocol::error_code::bad_request, why);
    entries_[row.name] = entry{row};
    dirty_ = true;
    logging::info("reservation {} created by {}: {} from {} to {}", row.name, row.created_by, row.procs,
                  iso8601(row.start), iso8601(row.end));
    arm(clock_.wall_seconds());
    pipe_.decide();
    c->send(protocol::ok{id, nlohmann::json{{"reservation", nlohmann::json::parse(to_json(row, clock_.wall_seconds()))}}});
  };
  store_then([this, row, actor] { store_->add(row, actor); }, stored);
}

void job_reservations::update(const std::shared_ptr<connection>& c, const protocol::reservations& m, const std::string& actor) {
  const double now = clock_.wall_seconds();
  const nlohmann::json rec = nlohmann::json::parse(*m.record);
  if (!rec.is_object()) throw std::invalid_argument("reservation: the record must be a JSON object");
  const std::string name = rec.value("name", m.name.value_or(""));
  const auto it = entries_.find(name);
  if (it == entries_.end()) {
    return reply_error(c, m.id, protocol::error_code::not_found, "Reservation " + name + " not found");
  }
  store::reservation_row row = it->second.row;
  double start = static_cast<double>(row.start.time_since_epoch().count()) / 1e6;
  double end = static_cast<double>(row.end.time_since_epoch().count()) / 1e6;
  const double duration = end - start;
  if (rec.contains("start_s")) {
    start = seconds_of(rec, "start_s");
    if (start < now - 60) throw std::invalid_argument("Reservation request has invalid start time: it is in the past");
    if (!rec.contains("end_s") && !rec.contains("duration_s")) end = start + duration;
  }
  if (rec.contains("end_s")) end = seconds_of(rec, "end_s");
  if (rec.contains("duration_s")) end = start + seconds_of(rec, "duration_s");
  if (!(end > start)) throw std::invalid_argument("Reservation request has invalid time: it ends before it starts");
  if (rec.contains("users")) row.users = names_of(rec, "users");
  if (rec.contains("accounts")) row.accounts = names_of(rec, "accounts");
  if (row.users.empty() && row.accounts.empty()) throw std::invalid_argument("reservation: Users= or Accounts= is required");
  for (const auto& a : row.accounts) {
    if (account_known_ && !account_known_(a)) throw std::invalid_argument("reservation: no account " + a);
  }
  // Its processors stay; the new window must not collide with others'.
  core::reservation_ask ask;
  ask.start = start;
  ask.end = end;
  ask.procs = core::parse_processor_map(view_.spans(), row.procs, core_.machine().size());
  ask.ignore_jobs = true;  // running jobs were judged when it was made
  const auto choice = core::choose_reservation_procs(core_, ask, core_view(now, name));
  if (!choice.error.empty() && choice.error.find("overlap") != std::string::npos) {
    throw std::invalid_argument("Reservation request not satisfiable: " + choice.error);
  }
  row.start = at_seconds(start);
  row.end = at_seconds(end);
  const auto stored = [this, c, id = m.id, row](std::string why) {
    if (!why.empty()) return reply_error(c, id, protocol::error_code::bad_request, why);
    const auto e = entries_.find(row.name);
    if (e == entries_.end()) return reply_error(c, id, protocol::error_code::not_found, "Reservation " + row.name + " not found");
    e->second.row = row;
    dirty_ = true;
    logging::info("reservation {} updated", row.name);
    arm(clock_.wall_seconds());
    pipe_.decide();
    c->send(protocol::ok{id, nlohmann::json{{"reservation", nlohmann::json::parse(to_json(row, clock_.wall_seconds()))}}});
  };
  store_then([this, row, actor] { store_->modify(row, actor); }, stored);
}

void job_reservations::remove(const std::shared_ptr<connection>& c, const protocol::reservations& m, const std::string& actor) {
  const std::string name = *m.name;
  if (entries_.count(name) == 0) return reply_error(c, m.id, protocol::error_code::not_found, "Reservation " + name + " not found");
  const auto removed = [this, c, id = m.id, name](std::string why) {
    if (!why.empty()) return reply_error(c, id, protocol::error_code::internal, why);
    entries_.erase(name);
    dirty_ = true;
    logging::info("reservation {} deleted", name);
    arm(clock_.wall_seconds());
    pipe_.decide();
    c->send(protocol::ok{id, nlohmann::json::object()});
  };
  store_then(
      [this, name, actor] {
        try {
          store_->remove(name, actor);
        } catch (const store::not_found&) {
          // gone already (it ended meanwhile): what was asked is done
        }
      },
      removed);
}

void job_reservations::store_then(std::function<void()> write, std::function<void(std::string)> done) {
  if (!store_) return done("");
  pipe_.on_readers([this, write = std::move(write), done = std::move(done)] {
    std::string why;
    try {
      write();
    } catch (const std::exception& e) {
      why = std::string("the reservations could not be stored: ") + e.what();
    }
    pipe_.post([done, why] { done(why); });
  });
}

void job_reservations::arm(double now) {
  timer_.reset();
  if (stopped_) return;
  double next = -1;
  for (const auto& [name, e] : entries_) {
    const double start = static_cast<double>(e.row.start.time_since_epoch().count()) / 1e6;
    const double end = static_cast<double>(e.row.end.time_since_epoch().count()) / 1e6;
    for (const double s : {start - k_evict_lead_s, start, end}) {
      if (s > now && (next < 0 || s < next)) next = s;
    }
  }
  // Ended ones are deleted at once (next turn).
  bool ended = false;
  for (const auto& [name, e] : entries_) ended = ended || static_cast<double>(e.row.end.time_since_epoch().count()) / 1e6 <= now;
  if (next < 0 && !ended) return;
  const double wait = ended ? 0 : std::min(next - now, k_max_wait_s);
  const auto delay = std::chrono::milliseconds(static_cast<std::int64_t>(std::ceil(wait * 1000.0)) + 1);
  // The timer only posts: its handle is dropped by a later turn, not from inside its own callback.
  timer_ = clock_.after(pipe_.strand(), delay, [this] { pipe_.post([this] { on_timer(); }); });
}

void job_reservations::on_timer() {
  if (stopped_) return;
  const double now = clock_.wall_seconds();
  std::vector<std::string> ended;
  for (const auto& [name, e] : entries_) {
    if (static_cast<double>(e.row.end.time_since_epoch().count()) / 1e6 <= now) ended.push_back(name);
  }
  for (const auto& name : ended) {
    entries_.erase(name);
    logging::info("reservation {} ended", name);
    if (store_) {
      pipe_.on_readers([this, name] {
        try {
          store_->remove(name, "aqsd");
        } catch (const std::exception& e) {
          logging::warn("reservation {} ended but could not be deleted from the store: {}", name, e.what());
        }
      });
    }
  }
  dirty_ = true;
  arm(now);
  pipe_.decide();
}

}  // namespace aqs::daemon
