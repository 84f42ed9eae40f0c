// serial_connection: making the connection (serial_connection.hpp).
#include "store/serial_connection.hpp"

#include "store/migrations.hpp"

namespace aqs::store {

serial_connection::serial_connection(std::string conninfo, std::function<void(pqxx::connection&)> prepare)
    : conninfo_(std::move(conninfo)), prepare_(std::move(prepare)) {
  std::lock_guard lock(mu_);
  conn();
}

pqxx::connection& serial_connection::conn() {
  if (conn_ && conn_->is_open()) return *conn_;
  conn_.reset();
  auto c = std::make_unique<pqxx::connection>(conninfo_);
  check_schema_version(*c);
  prepare_(*c);
  conn_ = std::move(c);
  return *conn_;
}

}  // namespace aqs::store
