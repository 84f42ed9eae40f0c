// records: node states as the store spells them.
#include "store/records.hpp"

namespace aqs::store {

std::string_view to_string(node_state s) noexcept {
  switch (s) {
    case node_state::up: return "UP";
    case node_state::down: return "DOWN";
    case node_state::drained: return "DRAINED";
  }
  return "UP";
}

std::optional<node_state> parse_node_state(std::string_view text) noexcept {
  if (text == "UP") return node_state::up;
  if (text == "DOWN") return node_state::down;
  if (text == "DRAINED") return node_state::drained;
  return std::nullopt;
}

}  // namespace aqs::store
