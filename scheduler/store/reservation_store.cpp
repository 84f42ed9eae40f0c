// reservation_store: the reservations table and its audit rows.
#include "store/reservation_store.hpp"

#include <pqxx/pqxx>

#include "core/json_string.hpp"
#include "store/sql_text.hpp"

namespace aqs::store {

namespace {

std::int64_t to_us(time_point t) { return t.time_since_epoch().count(); }
time_point from_us(std::int64_t us) { return time_point{std::chrono::microseconds{us}}; }

// Names in the lists never hold a comma (the daemon checks them).
std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  std::size_t at = 0;
  while (at < s.size()) {
    const std::size_t comma = s.find(',', at);
    out.push_back(s.substr(at, comma == std::string::npos ? std::string::npos : comma - at));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return out;
}

std::string json_string(std::string_view text) {
  std::string out;
  core::append_json_string(out, text);
  return out;
}

std::string json_list(const std::vector<std::string>& v) {
  std::string out = "[";
  for (std::size_t i = 0; i < v.size(); ++i) out += (i ? "," : "") + json_string(v[i]);
  return out + "]";
}

std::string detail_of(const reservation_row& r) {
  return "{\"start_us\":" + std::to_string(to_us(r.start)) + ",\"end_us\":" + std::to_string(to_us(r.end)) +
         ",\"procs\":" + json_string(r.procs) + ",\"users\":" + json_list(r.users) +
         ",\"accounts\":" + json_list(r.accounts) + ",\"flags\":" + json_list(r.flags) + "}";
}

void prepare_all(pqxx::connection& c) {
  c.prepare("resv_load",
            "SELECT name, (extract(epoch FROM start_time) * 1000000)::bigint AS start_us,"
            " (extract(epoch FROM end_time) * 1000000)::bigint AS end_us, procs,"
            " array_to_string(users, ',') AS users, array_to_string(accounts, ',') AS accounts,"
            " array_to_string(flags, ',') AS flags, created_by FROM reservations ORDER BY start_time, name");
  c.prepare("resv_insert",
            "INSERT INTO reservations (name, start_time, end_time, procs, users, accounts, flags, created_by)"
            " VALUES ($1, to_timestamp($2::bigint / 1000000.0), to_timestamp($3::bigint / 1000000.0), $4,"
            " $5::text[], $6::text[], $7::text[], $8) ON CONFLICT (name) DO NOTHING");
  c.prepare("resv_update",
            "UPDATE reservations SET start_time = to_timestamp($2::bigint / 1000000.0),"
            " end_time = to_timestamp($3::bigint / 1000000.0), procs = $4, users = $5::text[],"
            " accounts = $6::text[], flags = $7::text[] WHERE name = $1");
  c.prepare("resv_delete", "DELETE FROM reservations WHERE name = $1 RETURNING procs");
  c.prepare("resv_audit",
            "INSERT INTO accounting_audit (actor, action, entity, name, detail) VALUES ($1, $2, 'reservation', $3, $4::jsonb)");
}

}  // namespace

reservation_store::reservation_store(std::string conninfo) : db_(std::move(conninfo), prepare_all) {}

reservation_store::~reservation_store() = default;

std::vector<reservation_row> reservation_store::load() {
  return db_.in_transaction([](pqxx::work& tx) {
    std::vector<reservation_row> out;
    for (const auto& row : tx.exec_prepared("resv_load")) {
      reservation_row r;
      r.name = row["name"].as<std::string>();
      r.start = from_us(row["start_us"].as<std::int64_t>());
      r.end = from_us(row["end_us"].as<std::int64_t>());
      r.procs = row["procs"].as<std::string>();
      r.users = split_commas(row["users"].as<std::string>());
      r.accounts = split_commas(row["accounts"].as<std::string>());
      r.flags = split_commas(row["flags"].as<std::string>());
      r.created_by = row["created_by"].as<std::string>();
      out.push_back(std::move(r));
    }
    return out;
  });
}

void reservation_store::add(const reservation_row& r, const std::string& actor) {
  db_.in_transaction([&](pqxx::work& tx) {
    const auto res = tx.exec_prepared("resv_insert", r.name, to_us(r.start), to_us(r.end), r.procs,
                                      text_array_literal(r.users), text_array_literal(r.accounts),
                                      text_array_literal(r.flags), actor);
    if (res.affected_rows() == 0) throw reservation_refused("reservation " + r.name + " exists already");
    tx.exec_prepared("resv_audit", actor, "add", r.name, detail_of(r));
  });
}

void reservation_store::modify(const reservation_row& r, const std::string& actor) {
  db_.in_transaction([&](pqxx::work& tx) {
    const auto res = tx.exec_prepared("resv_update", r.name, to_us(r.start), to_us(r.end), r.procs,
                                      text_array_literal(r.users), text_array_literal(r.accounts),
                                      text_array_literal(r.flags));
    if (res.affected_rows() == 0) throw not_found("no reservation " + r.name);
    tx.exec_prepared("resv_audit", actor, "modify", r.name, detail_of(r));
  });
}

void reservation_store::remove(const std::string& name, const std::string& actor) {
  db_.in_transaction([&](pqxx::work& tx) {
    const auto res = tx.exec_prepared("resv_delete", name);
    if (res.empty()) throw not_found("no reservation " + name);
    tx.exec_prepared("resv_audit", actor, "delete", name, "{\"procs\":" + json_string(res[0][0].as<std::string>()) + "}");
  });
}

}  // namespace aqs::store
