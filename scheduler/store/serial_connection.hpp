// serial_connection: one PostgreSQL connection used by one call at a time,
// made (schema version checked, statements prepared) on first use and made
// again after it broke; each call one transaction. What account_store and
// reservation_store share.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>

#include <pqxx/pqxx>

namespace aqs::store {

class serial_connection {
public:
  // Connects at once (pqxx::broken_connection when the server cannot be
  // reached; schema_mismatch unless the database is at this build's
  // version), then calls prepare on the new connection.
  serial_connection(std::string conninfo, std::function<void(pqxx::connection&)> prepare);
  serial_connection(const serial_connection&) = delete;
  serial_connection& operator=(const serial_connection&) = delete;

  // body(tx) in one transaction, committed when it returns; its result. A
  // lost connection throws pqxx::broken_connection and is made again on
  // the next call.
  template <class Body>
  auto in_transaction(Body&& body) {
    std::lock_guard lock(mu_);
    try {
      pqxx::work tx(conn());
      if constexpr (std::is_void_v<decltype(body(tx))>) {
        body(tx);
        tx.commit();
      } else {
        auto result = body(tx);
        tx.commit();
        return result;
      }
    } catch (const pqxx::broken_connection&) {
      conn_.reset();
      throw;
    }
  }

private:
  pqxx::connection& conn();

  std::string conninfo_;
  std::function<void(pqxx::connection&)> prepare_;
  std::mutex mu_;
  std::unique_ptr<pqxx::connection> conn_;
};

}  // namespace aqs::store
