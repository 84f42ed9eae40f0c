// account_store: accounts, users in accounts, QOS, usage records and the
// audit trail of every change, in PostgreSQL (sql/008_accounting.sql). The
// one class that owns accounting's SQL; the tree's rules are core's
// (core/accounts.hpp), checked on the whole tree before anything is written.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <pqxx/connection>

#include "core/accounts.hpp"
#include "store/records.hpp"
#include "store/serial_connection.hpp"
#include "store/store_errors.hpp"


namespace aqs::store {

// A change the tree's rules refuse (a cycle, an unknown parent, a user not
// in the account, a limit past its bound, a name taken, an account that
// still has users...). what() is one line; nothing was written.
class account_refused : public store_error {
public:
  using store_error::store_error;
};

// What one job was charged, written once when it ends.
struct usage_record {
  std::int64_t job_id = 0;
  std::string user;
  std::string account;
  std::string qos;
  time_point start{};
  time_point end{};
  double cpu_seconds = 0;     // processor-seconds: core::processor_seconds of its maps
  double mem_mb_seconds = 0;  // where it asked for memory
  double gpu_seconds = 0;     // where it asked for GPUs
};

// Usage of one user in one account over a period.
struct usage_total {
  std::string user;
  std::string account;
  std::int64_t jobs = 0;
  double cpu_seconds = 0;
  double mem_mb_seconds = 0;
  double gpu_seconds = 0;
};

// One change: who made it, when, to what, and the record after it (JSON;
// for a delete, the record before).
struct audit_entry {
  std::int64_t id = 0;
  time_point at{};
  std::string actor;
  std::string action;  // add, modify, delete
  std::string entity;  // account, user, qos
  std::string name;    // account or QOS name; "user@account" for a user
  std::string detail;  // JSON object
};

// Every method runs in one transaction on one connection (calls are
// serialised); a change takes a lock on the accounts table, reads the whole
// tree, applies the change to it, checks it with core::validate, and only
// then writes the row and its audit entry together. Errors: account_refused
// (one line, nothing written), not_found for a record that is not there,
// pqxx exceptions when the database fails (the transaction is rolled back;
// a lost connection is made again on the next call).
class account_store {
public:
  // Connects and checks the schema version (schema_mismatch unless the
  // database is at latest_schema_version()); pqxx::broken_connection if the
  // server cannot be reached.
  explicit account_store(std::string conninfo);
  ~account_store();
  account_store(const account_store&) = delete;
  account_store& operator=(const account_store&) = delete;

  // The whole tree (accounts, users in accounts, defaults, QOS): what the
  // daemon builds its core::account_index from.
  core::account_tree load();

  void add_account(const core::account& a, const std::string& actor);
  // Replaces the account's parent, shares, limits, description and
  // organization with a's (found by a.name).
  void modify_account(const core::account& a, const std::string& actor);
  // Refused while it has sub-accounts or users, and for root.
  void delete_account(const std::string& name, const std::string& actor);

  // Adds the user to u.account; the user's first account becomes its
  // default, as does this one with make_default.
  void add_user(const core::user_association& u, bool make_default, const std::string& actor);
  // Replaces shares and limits of (u.user, u.account).
  void modify_user(const core::user_association& u, const std::string& actor);
  void set_default_account(const std::string& user, const std::string& account, const std::string& actor);
  // Refused for the user's default account while the user has others.
  void delete_user(const std::string& user, const std::string& account, const std::string& actor);

  void add_qos(const core::qos& q, const std::string& actor);
  void modify_qos(const core::qos& q, const std::string& actor);
  void delete_qos(const std::string& name, const std::string& actor);

  // Writes a job's charge; false (and nothing written) when that job was
  // already charged. Throws std::invalid_argument for negative or
  // non-finite amounts or an end before the start.
  bool record_usage(const usage_record& r);
  // Records of jobs that ended at or after `from`, oldest first: what the
  // daemon replays into its decayed usage ledger at start.
  std::vector<usage_record> usage_since(time_point from);
  // Per user and account, the jobs that ended in [from, to).
  std::vector<usage_total> usage_between(time_point from, time_point to);
  // The newest `limit` changes, newest first.
  std::vector<audit_entry> audit(std::size_t limit = 100);

private:
  template <class Body>
  auto in_transaction(Body&& body) {
    return db_.in_transaction(std::forward<Body>(body));
  }
  template <class Change>
  void change_tree(Change&& change);
  // add (add = true) or modify of a named record: a core::account or a core::qos.
  template <class Named>
  void put(const Named& x, bool add, const std::string& actor);

  serial_connection db_;
};

}  // namespace aqs::store
