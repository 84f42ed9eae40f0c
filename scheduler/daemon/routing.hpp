// routing: a table of routes, one per protocol message type: the roles that
// may send it, a further permission rule with its refusal, the thread its
// handler runs on, and the handler. aqsd's table is controller::routes();
// the controller reads every message's route before it runs a handler, so
// a permission is declared once, beside the message, not in each handler.
//
// Rule: built once (add() throws std::logic_error on a type declared
// twice), then read-only and safe to read from any thread.
#pragma once

#include <array>
#include <cstddef>
#include <functional>
#include <initializer_list>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <variant>

#include "daemon_base/dispatcher.hpp"

namespace aqs::daemon {

// Where a handler runs: on the session thread that read the message (it
// answers without the scheduling state, or posts what needs it), or on the
// scheduling strand.
enum class runs_on : unsigned char { session, strand };

template <class Owner>
struct route {
  using handler = std::function<void(Owner&, const std::shared_ptr<connection>&, const protocol::message&)>;
  std::string_view type;  // the wire type; empty: not accepted
  unsigned roles = 0;     // bit (1 << peer_role) per role that may send it
  runs_on where = runs_on::strand;
  // A rule beyond the role (permissions.hpp); `refusal` is the
  // permission_denied message when it says no.
  bool (*gate)(const peer_info&) = nullptr;
  std::string_view refusal;
  handler handle;

  bool accepted() const noexcept { return static_cast<bool>(handle); }
  bool allows(protocol::peer_role r) const noexcept { return (roles & (1u << static_cast<unsigned>(r))) != 0; }
};

template <class Owner>
class routing_table {
public:
  static constexpr std::size_t k_types = std::variant_size_v<protocol::message>;

  // Declares message type T: who may send it, where it runs, its handler
  // and, optionally, a further rule. Throws std::logic_error if T is
  // declared twice.
  template <class T>
  routing_table& add(std::initializer_list<protocol::peer_role> roles, runs_on where,
                     void (*handle)(Owner&, const std::shared_ptr<connection>&, const T&),
                     bool (*gate)(const peer_info&) = nullptr, std::string_view refusal = {}) {
    route<Owner>& r = routes_[index_of<T>()];
    if (r.accepted()) throw std::logic_error("message " + std::string(T::type) + " routed twice");
    r.type = T::type;
    for (auto role : roles) r.roles |= 1u << static_cast<unsigned>(role);
    r.where = where;
    r.gate = gate;
    r.refusal = refusal;
    r.handle = [handle](Owner& o, const std::shared_ptr<connection>& c, const protocol::message& m) {
      handle(o, c, std::get<T>(m));
    };
    return *this;
  }

  // The route of `m` (not accepted() when aqsd does not take it).
  const route<Owner>& of(const protocol::message& m) const noexcept { return routes_[m.index()]; }
  // By the message variant's index, for tests that walk every type.
  const route<Owner>& at(std::size_t index) const { return routes_.at(index); }

private:
  template <class T, std::size_t I = 0>
  static constexpr std::size_t index_of() {
    static_assert(I < k_types, "not a protocol message");
    if constexpr (std::is_same_v<std::variant_alternative_t<I, protocol::message>, T>) {
      return I;
    } else {
      return index_of<T, I + 1>();
    }
  }

  std::array<route<Owner>, k_types> routes_{};
};

}  // namespace aqs::daemon
