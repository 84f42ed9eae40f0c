// reservation_store: advance reservations in PostgreSQL
// (sql/009_reservations.sql), each change audited in accounting_audit. The
// one class that owns their SQL; what a reservation means is the core's
// (core/reservation.hpp), who may change one is the daemon's.
#pragma once

#include <string>
#include <vector>

#include "store/records.hpp"
#include "store/serial_connection.hpp"
#include "store/store_errors.hpp"

namespace aqs::store {

// A reservation as stored.
struct reservation_row {
  std::string name;
  time_point start{};
  time_point end{};
  std::string procs;  // "node1:0-3,node2:0-1" (core/map_display's compact form)
  std::vector<std::string> users;
  std::vector<std::string> accounts;
  std::vector<std::string> flags;  // MAINT, IGNORE_JOBS, ...
  std::string created_by;
};

// Each method is one transaction on one connection (calls are serialised).
// Errors: not_found (no reservation of that name), account_refused-like
// store_error for a name taken (reservation_refused, one line, nothing
// written), pqxx exceptions when the database fails (rolled back; a lost
// connection is made again on the next call).
class reservation_refused : public store_error {
public:
  using store_error::store_error;
};

class reservation_store {
public:
  // Connects and checks the schema version (schema_mismatch otherwise).
  explicit reservation_store(std::string conninfo);
  ~reservation_store();
  reservation_store(const reservation_store&) = delete;
  reservation_store& operator=(const reservation_store&) = delete;

  std::vector<reservation_row> load();
  void add(const reservation_row& r, const std::string& actor);
  // Replaces everything but the name and who created it.
  void modify(const reservation_row& r, const std::string& actor);
  void remove(const std::string& name, const std::string& actor);

private:
  serial_connection db_;
};

}  // namespace aqs::store
