// faucets_store: plain SQL over libpqxx 6.4, one transaction per call.
#include "server/faucets_store.hpp"

#include <pqxx/pqxx>

#include "core/job_state.hpp"

namespace aqs::faucets {

namespace {

constexpr const char* k_columns =
    "id, owner, name, asked_cluster, submit, min_pe, max_pe, adaptive, walltime_s, state, cluster, local_id, "
    "nprocs, exit_code, to_char(submit_time AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'), start_time, "
    "end_time, attempts";

stored_job row_to_job(const pqxx::row& r) {
  stored_job j;
  j.id = r[0].as<std::int64_t>();
  j.owner = r[1].as<std::string>();
  j.name = r[2].as<std::string>();
  j.asked_cluster = r[3].as<std::string>();
  j.submit = r[4].as<std::string>();
  j.min_pe = r[5].as<std::int64_t>();
  j.max_pe = r[6].as<std::int64_t>();
  j.adaptive = r[7].as<bool>();
  j.walltime_s = r[8].as<double>();
  j.state = r[9].as<std::string>();
  if (!r[10].is_null()) j.cluster = r[10].as<std::string>();
  if (!r[11].is_null()) j.local_id = r[11].as<std::int64_t>();
  j.nprocs = r[12].as<std::int64_t>();
  if (!r[13].is_null()) j.exit_code = r[13].as<std::int64_t>();
  j.submit_time = r[14].as<std::string>();
  if (!r[15].is_null()) j.start_time = r[15].as<std::string>();
  if (!r[16].is_null()) j.end_time = r[16].as<std::string>();
  j.attempts = r[17].as<std::int64_t>();
  return j;
}

template <class T>
nlohmann::json opt(const std::optional<T>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

}  // namespace

bool is_final_state(const std::string& s) {
  const auto state = core::parse_job_state(s);
  return state && core::is_final(*state);
}

const std::string& final_states_array() {
  static const std::string text = [] {
    std::string out = "{";
    for (const auto s : core::k_all_job_states) {
      if (!core::is_final(s)) continue;
      out += (out.size() > 1 ? "," : "") + std::string(core::to_string(s));
    }
    return out + "}";
  }();
  return text;
}

nlohmann::json to_json(const stored_job& j) {
  nlohmann::json o{{"id", j.id},
                   {"user", j.owner},
                   {"name", j.name},
                   {"asked_cluster", j.asked_cluster},
                   {"cluster", opt(j.cluster)},
                   {"local_id", opt(j.local_id)},
                   {"state", j.state},
                   {"min_pe", j.min_pe},
                   {"max_pe", j.max_pe},
                   {"adaptive", j.adaptive},
                   {"nprocs", j.nprocs},
                   {"exit_code", opt(j.exit_code)},
                   {"submit_time", j.submit_time},
                   {"start_time", opt(j.start_time)},
                   {"end_time", opt(j.end_time)},
                   {"attempts", j.attempts}};
  o["gid"] = j.cluster && j.local_id ? nlohmann::json(*j.cluster + ":" + std::to_string(*j.local_id))
                                     : nlohmann::json(nullptr);
  return o;
}

faucets_store::faucets_store(std::string conninfo) : conninfo_(std::move(conninfo)) {
  conn_ = std::make_unique<pqxx::connection>(conninfo_);
  store::apply_migrations(*conn_, faucets_migrations());
}

faucets_store::~faucets_store() = default;

template <class F>
auto faucets_store::with_tx(F&& f) {
  for (int attempt = 0;; ++attempt) {
    try {
      if (!conn_ || !conn_->is_open()) conn_ = std::make_unique<pqxx::connection>(conninfo_);
      pqxx::work tx(*conn_);
      if constexpr (std::is_void_v<decltype(f(tx))>) {
        f(tx);
        tx.commit();
        return;
      } else {
        auto r = f(tx);
        tx.commit();
        return r;
      }
    } catch (const pqxx::broken_connection&) {
      conn_.reset();
      if (attempt > 0) throw;
    }
  }
}

std::int64_t faucets_store::add_job(const stored_job& j) {
  return with_tx([&](pqxx::work& tx) {
    const auto id = tx.exec_params1(
                          "INSERT INTO faucets_jobs (owner, name, asked_cluster, submit, min_pe, max_pe, adaptive, "
                          "walltime_s) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id",
                          j.owner, j.name, j.asked_cluster, j.submit, j.min_pe, j.max_pe, j.adaptive, j.walltime_s)[0]
                        .as<std::int64_t>();
    tx.exec_params("INSERT INTO faucets_events (job_id, event, detail) VALUES ($1, 'submitted', $2)", id,
                   "by " + j.owner + " for " + j.asked_cluster);
    return id;
  });
}

void faucets_store::event(std::int64_t id, const std::string& event, const std::string& detail) {
  with_tx([&](pqxx::work& tx) {
    tx.exec_params("INSERT INTO faucets_events (job_id, event, detail) VALUES ($1, $2, $3)", id, event, detail);
  });
}

std::int64_t faucets_store::dispatched(std::int64_t id, const std::string& cluster, const std::string& detail) {
  return with_tx([&](pqxx::work& tx) {
    const auto r = tx.exec_params1("UPDATE faucets_jobs SET attempts = attempts + 1 WHERE id = $1 RETURNING attempts", id);
    const auto attempt = r[0].as<std::int64_t>();
    tx.exec_params("INSERT INTO faucets_forwards (job_id, cluster, attempt) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
                   id, cluster, attempt);
    tx.exec_params("INSERT INTO faucets_events (job_id, event, detail) VALUES ($1, 'dispatched', $2)", id, detail);
    return attempt;
  });
}

bool faucets_store::forwarded_to(std::int64_t id, const std::string& cluster, std::optional<std::int64_t> attempt) {
  return with_tx([&](pqxx::work& tx) {
    return !tx.exec_params("SELECT 1 FROM faucets_forwards WHERE job_id = $1 AND cluster = $2 AND "
                           "($3::bigint IS NULL OR attempt = $3) LIMIT 1",
                           id, cluster, attempt)
                .empty();
  });
}

void faucets_store::starting(std::int64_t id, const std::string& detail) {
  with_tx([&](pqxx::work& tx) {
    tx.exec_params(
        "UPDATE faucets_jobs SET start_time = COALESCE(start_time, to_char(now() AT TIME ZONE 'UTC', "
        "'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')), state = CASE WHEN state = 'PENDING' THEN 'RUNNING' ELSE state END "
        "WHERE id = $1",
        id);
    tx.exec_params("INSERT INTO faucets_events (job_id, event, detail) VALUES ($1, 'starting', $2)", id, detail);
  });
}

void faucets_store::placed(std::int64_t id, const std::string& cluster, std::int64_t local_id,
                           const std::string& detail) {
  with_tx([&](pqxx::work& tx) {
    tx.exec_params("UPDATE faucets_jobs SET cluster = $2, local_id = $3 WHERE id = $1", id, cluster, local_id);
    tx.exec_params("INSERT INTO faucets_events (job_id, event, detail) VALUES ($1, 'placed', $2)", id, detail);
  });
}

void faucets_store::update(std::int64_t id, const std::string& state, std::int64_t nprocs,
                           std::optional<std::int64_t> exit_code, const std::optional<std::string>& start,
                           const std::optional<std::string>& end) {
  with_tx([&](pqxx::work& tx) {
    const auto old = tx.exec_params("SELECT state FROM faucets_jobs WHERE id = $1", id);
    const bool changed = old.empty() || old[0][0].as<std::string>() != state;
    tx.exec_params(
        "UPDATE faucets_jobs SET state = $2, nprocs = $3, exit_code = COALESCE($4, exit_code), "
        "start_time = COALESCE($5, start_time), end_time = COALESCE($6, end_time) WHERE id = $1",
        id, state, nprocs, exit_code, start, end);
    if (changed) {
      tx.exec_params("INSERT INTO faucets_events (job_id, event, detail) VALUES ($1, $2, $3)", id, state,
                     std::to_string(nprocs) + " processors");
    }
  });
}

void faucets_store::set_state(std::int64_t id, const std::string& state, const std::string& event,
                              const std::string& detail) {
  with_tx([&](pqxx::work& tx) {
    tx.exec_params("UPDATE faucets_jobs SET state = $2 WHERE id = $1", id, state);
    tx.exec_params("INSERT INTO faucets_events (job_id, event, detail) VALUES ($1, $2, $3)", id, event, detail);
  });
}

void faucets_store::unplace(std::int64_t id, const std::string& cluster, std::optional<std::int64_t> local_id,
                            const std::string& why) {
  with_tx([&](pqxx::work& tx) {
    tx.exec_params(
        "INSERT INTO faucets_abandoned (job_id, cluster, local_id) VALUES ($1, $2, $3) "
        "ON CONFLICT (job_id, cluster) DO UPDATE SET local_id = EXCLUDED.local_id",
        id, cluster, local_id);
    tx.exec_params("UPDATE faucets_jobs SET state = 'PENDING', cluster = NULL, local_id = NULL, nprocs = 0 "
                   "WHERE id = $1",
                   id);
    tx.exec_params("INSERT INTO faucets_events (job_id, event, detail) VALUES ($1, 'unplaced', $2)", id, why);
  });
}

std::vector<abandoned_placement> faucets_store::abandoned(const std::string& cluster) {
  return with_tx([&](pqxx::work& tx) {
    std::vector<abandoned_placement> out;
    for (const auto& r : tx.exec_params("SELECT job_id, local_id FROM faucets_abandoned WHERE cluster = $1", cluster)) {
      abandoned_placement a;
      a.job_id = r[0].as<std::int64_t>();
      a.cluster = cluster;
      if (!r[1].is_null()) a.local_id = r[1].as<std::int64_t>();
      out.push_back(a);
    }
    return out;
  });
}

void faucets_store::forget_abandoned(std::int64_t id, const std::string& cluster) {
  with_tx([&](pqxx::work& tx) {
    tx.exec_params("DELETE FROM faucets_abandoned WHERE job_id = $1 AND cluster = $2", id, cluster);
  });
}

std::vector<stored_job> faucets_store::live_jobs() {
  return with_tx([&](pqxx::work& tx) {
    std::vector<stored_job> out;
    for (const auto& r : tx.exec_params(std::string("SELECT ") + k_columns +
                                            " FROM faucets_jobs WHERE state <> ALL ($1::text[]) ORDER BY id",
                                        final_states_array())) {
      out.push_back(row_to_job(r));
    }
    return out;
  });
}

std::vector<stored_job> faucets_store::jobs(const std::optional<std::string>& owner, bool all,
                                            const std::optional<std::string>& cluster, std::int64_t limit) {
  return with_tx([&](pqxx::work& tx) {
    std::vector<stored_job> out;
    const auto rows = tx.exec_params(
        std::string("SELECT ") + k_columns +
            " FROM faucets_jobs WHERE ($1::text IS NULL OR owner = $1) AND ($2 OR state <> ALL ($5::text[])) "
            "AND ($3::text IS NULL OR cluster = $3) ORDER BY id DESC LIMIT $4",
        owner, all, cluster, limit, final_states_array());
    for (const auto& r : rows) out.push_back(row_to_job(r));
    return out;
  });
}

std::optional<stored_job> faucets_store::job(std::int64_t id) {
  return with_tx([&](pqxx::work& tx) -> std::optional<stored_job> {
    const auto rows = tx.exec_params(std::string("SELECT ") + k_columns + " FROM faucets_jobs WHERE id = $1", id);
    if (rows.empty()) return std::nullopt;
    return row_to_job(rows[0]);
  });
}

std::vector<history_line> faucets_store::history(std::int64_t id) {
  return with_tx([&](pqxx::work& tx) {
    std::vector<history_line> out;
    for (const auto& r : tx.exec_params(
             "SELECT to_char(time AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'), event, detail "
             "FROM faucets_events WHERE job_id = $1 ORDER BY time, ctid",
             id)) {
      out.push_back(history_line{r[0].as<std::string>(), r[1].as<std::string>(), r[2].as<std::string>()});
    }
    return out;
  });
}

void faucets_store::agree_price(std::int64_t id, const std::string& cluster, double price) {
  with_tx([&](pqxx::work& tx) {
    tx.exec_params("INSERT INTO faucets_prices (job_id, cluster, price) VALUES ($1, $2, $3) "
                   "ON CONFLICT (job_id, cluster) DO UPDATE SET price = EXCLUDED.price, time = now()",
                   id, cluster, price);
  });
}

std::optional<double> faucets_store::agreed_price(std::int64_t id, const std::string& cluster) {
  return with_tx([&](pqxx::work& tx) -> std::optional<double> {
    const auto rows = tx.exec_params("SELECT price FROM faucets_prices WHERE job_id = $1 AND cluster = $2", id, cluster);
    if (rows.empty()) return std::nullopt;
    return rows[0]["price"].as<double>();
  });
}

bool faucets_store::charge(const ledger_entry& e, const std::string& detail) {
  return with_tx([&](pqxx::work& tx) {
    const auto r = tx.exec_params(
        "INSERT INTO faucets_ledger (job_id, owner, payer, payee, home_cluster, cluster, proc_seconds, price, "
        "amount_micro) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (job_id) DO NOTHING RETURNING id",
        e.job_id, e.user, e.payer, e.payee, e.home_cluster, e.cluster, e.proc_seconds, e.price, e.amount_micro);
    if (r.empty()) return false;
    tx.exec_params("INSERT INTO faucets_events (job_id, event, detail) VALUES ($1, 'charged', $2)", e.job_id, detail);
    return true;
  });
}

std::map<std::string, std::int64_t> faucets_store::balances() {
  return with_tx([&](pqxx::work& tx) {
    std::map<std::string, std::int64_t> out;
    for (const auto& r : tx.exec(
             "SELECT who, sum(amount)::bigint AS balance FROM ("
             " SELECT payee AS who, amount_micro AS amount FROM faucets_ledger"
             " UNION ALL SELECT payer, -amount_micro FROM faucets_ledger) t GROUP BY who ORDER BY who")) {
      out[r["who"].as<std::string>()] = r["balance"].as<std::int64_t>();
    }
    return out;
  });
}

std::vector<ledger_entry> faucets_store::entries(const std::optional<std::string>& owner, std::int64_t limit) {
  return with_tx([&](pqxx::work& tx) {
    std::vector<ledger_entry> out;
    for (const auto& r : tx.exec_params(
             "SELECT id, job_id, to_char(time AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"') AS t, owner, "
             "payer, payee, home_cluster, cluster, proc_seconds, price, amount_micro FROM faucets_ledger "
             "WHERE ($1::text IS NULL OR payer = $1 OR payee = $1) ORDER BY id DESC LIMIT $2",
             owner, limit)) {
      ledger_entry e;
      e.id = r["id"].as<std::int64_t>();
      e.job_id = r["job_id"].as<std::int64_t>();
      e.time = r["t"].as<std::string>();
      e.user = r["owner"].as<std::string>();
      e.payer = r["payer"].as<std::string>();
      e.payee = r["payee"].as<std::string>();
      e.home_cluster = r["home_cluster"].as<std::string>();
      e.cluster = r["cluster"].as<std::string>();
      e.proc_seconds = r["proc_seconds"].as<double>();
      e.price = r["price"].as<double>();
      e.amount_micro = r["amount_micro"].as<std::int64_t>();
      out.push_back(std::move(e));
    }
    return out;
  });
}

}  // namespace aqs::faucets

// ---- staged files (004_staged_files.sql) ------------------------------

namespace aqs::faucets {

void faucets_store::stage_inputs(std::int64_t id, const std::vector<protocol::staged_file>& files) {
  with_tx([&](pqxx::work& tx) {
    tx.exec_params("INSERT INTO faucets_stage_results (job_id, in_bytes) VALUES ($1, $2)", id,
                   static_cast<std::int64_t>(protocol::staged_bytes(files)));
    for (const auto& f : files) {
      tx.exec_params("INSERT INTO faucets_staged_files (job_id, direction, path, mode, data) VALUES ($1, 'in', $2, $3, $4)",
                     id, f.path, static_cast<int>(f.mode), pqxx::binarystring(f.data.data(), f.data.size()));
    }
    tx.exec_params("INSERT INTO faucets_events (job_id, event, detail) VALUES ($1, 'staged', $2)", id,
                   std::to_string(files.size()) + " file(s), " + std::to_string(protocol::staged_bytes(files)) +
                       " bytes");
  });
}

std::vector<protocol::staged_file> faucets_store::staged(std::int64_t id, const std::string& direction) {
  return with_tx([&](pqxx::work& tx) {
    std::vector<protocol::staged_file> out;
    for (const auto& r : tx.exec_params(
             "SELECT path, mode, data FROM faucets_staged_files WHERE job_id = $1 AND direction = $2 ORDER BY path", id,
             direction)) {
      protocol::staged_file f;
      f.path = r["path"].as<std::string>();
      f.mode = static_cast<std::uint32_t>(r["mode"].as<int>());
      f.data = pqxx::binarystring(r["data"]).str();
      out.push_back(std::move(f));
    }
    return out;
  });
}

std::optional<stage_result> faucets_store::stage_result_of(std::int64_t id) {
  return with_tx([&](pqxx::work& tx) -> std::optional<stage_result> {
    const auto rows = tx.exec_params(
        "SELECT outputs, detail, in_bytes, out_bytes FROM faucets_stage_results WHERE job_id = $1", id);
    if (rows.empty()) return std::nullopt;
    stage_result s;
    s.outputs = rows[0]["outputs"].as<std::string>();
    s.detail = rows[0]["detail"].as<std::string>();
    s.in_bytes = rows[0]["in_bytes"].as<std::int64_t>();
    s.out_bytes = rows[0]["out_bytes"].as<std::int64_t>();
    return s;
  });
}

void faucets_store::outputs_back(std::int64_t id, const std::vector<protocol::staged_file>& files) {
  with_tx([&](pqxx::work& tx) {
    tx.exec_params("DELETE FROM faucets_staged_files WHERE job_id = $1", id);
    for (const auto& f : files) {
      tx.exec_params("INSERT INTO faucets_staged_files (job_id, direction, path, mode, data) VALUES ($1, 'out', $2, $3, $4)",
                     id, f.path, static_cast<int>(f.mode), pqxx::binarystring(f.data.data(), f.data.size()));
    }
    const auto bytes = static_cast<std::int64_t>(protocol::staged_bytes(files));
    tx.exec_params("UPDATE faucets_stage_results SET outputs = 'back', detail = '', out_bytes = $2, time = now() "
                   "WHERE job_id = $1", id, bytes);
    tx.exec_params("INSERT INTO faucets_events (job_id, event, detail) VALUES ($1, 'outputs', $2)", id,
                   std::to_string(files.size()) + " file(s), " + std::to_string(bytes) + " bytes back");
  });
}

void faucets_store::outputs_failed(std::int64_t id, const std::string& why) {
  with_tx([&](pqxx::work& tx) {
    tx.exec_params("DELETE FROM faucets_staged_files WHERE job_id = $1", id);
    tx.exec_params("UPDATE faucets_stage_results SET outputs = 'failed', detail = $2, time = now() WHERE job_id = $1",
                   id, why);
    tx.exec_params("INSERT INTO faucets_events (job_id, event, detail) VALUES ($1, 'outputs', $2)", id,
                   "not back: " + why);
  });
}

std::vector<std::int64_t> faucets_store::outputs_waiting() {
  return with_tx([&](pqxx::work& tx) {
    std::vector<std::int64_t> out;
    for (const auto& r : tx.exec_params(
             "SELECT r.job_id FROM faucets_stage_results r JOIN faucets_jobs j ON j.id = r.job_id "
             "WHERE r.outputs = 'waiting' AND j.state = ANY($1::text[]) ORDER BY r.job_id",
             final_states_array())) {
      out.push_back(r["job_id"].as<std::int64_t>());
    }
    return out;
  });
}

}  // namespace aqs::faucets
