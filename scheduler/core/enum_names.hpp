// enum_names: an enum's spellings in one table that both directions read
// (to text for the wire, the store and the screen; back with validation).
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string_view>
#include <utility>

namespace aqs::core {

template <class E, std::size_t N>
using enum_table = std::array<std::pair<E, std::string_view>, N>;

// The spelling of `v`, or `otherwise` for a value missing from the table.
template <class E, std::size_t N>
constexpr std::string_view name_in(const enum_table<E, N>& table, E v, std::string_view otherwise) noexcept {
  for (const auto& [value, name] : table) {
    if (value == v) return name;
  }
  return otherwise;
}

// The value spelt `text` (exactly), or nullopt.
template <class E, std::size_t N>
constexpr std::optional<E> value_in(const enum_table<E, N>& table, std::string_view text) noexcept {
  for (const auto& [value, name] : table) {
    if (name == text) return value;
  }
  return std::nullopt;
}

}  // namespace aqs::core
