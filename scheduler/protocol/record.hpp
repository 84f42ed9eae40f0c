// record: internal; one description per wire record drives both its JSON writing and its validating reading.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/job_state.hpp"
#include "protocol/field_reader.hpp"
#include "protocol/messages.hpp"

namespace aqs::protocol::detail {

// A record type R (a message, a reply, a nested object) is described by
//
//   template <> struct record<R> {
//     static constexpr auto fields = std::tuple{
//         field("job_id", &R::job_id, k_job_id),
//         check<R>([](const reader& in, const R& m) { ... in.fail("job_id", "..."); }),
//         ...};
//   };
//
// Entries are read in their order, and a check runs where it stands, so the
// first error reported is the one of a hand-written reader doing the same
// steps. Writing produces a JSON object; its members come out sorted by key
// whatever the order here (nlohmann's object is a std::map). Any type with
// write(json&, const R&) and read(const reader&, R&) can be an entry, for
// members that are read together (messages.cpp's placement_entry).
template <class R>
struct record;

// ---- when a member may be absent, and when it is written -------------------

enum class presence {
  required,   // absent or null: "is missing"
  optional,   // std::optional: absent or null is unset; unset is left out
  nullable,   // std::optional: as optional, but unset is written as null
  defaulted,  // absent or null keeps the member's initial value; always written
  sparse,     // as defaulted, but left out while it equals its type's empty value (false, "", [])
};

template <class T>
inline constexpr bool is_optional = false;
template <class T>
inline constexpr bool is_optional<std::optional<T>> = true;
template <class T>
inline constexpr bool is_vector = false;
template <class T>
inline constexpr bool is_vector<std::vector<T>> = true;

// Optionals are optional; lists and flags may be absent (empty, false);
// everything else is required.
template <class M>
constexpr presence default_presence() {
  if constexpr (is_optional<M>) {
    return presence::optional;
  } else if constexpr (is_vector<M> || std::is_same_v<M, bool>) {
    return presence::defaulted;
  } else {
    return presence::required;
  }
}

inline std::string element_key(std::string_view key, std::size_t i) {
  return std::string(key) + "[" + std::to_string(i) + "]";
}

// ---- entries -------------------------------------------------------------

// A member: its JSON key, the member, its rule (how a value is checked and
// written, see the rules below) and its presence.
template <class R, class M, class Rule>
struct field_entry {
  const char* key;
  M R::*member;
  Rule rule;
  presence when;

  void write(nlohmann::json& j, const R& r) const {
    const M& v = r.*member;
    if constexpr (is_optional<M>) {
      if (v) {
        j[key] = rule.write(*v);
      } else if (when == presence::nullable) {
        j[key] = nullptr;
      }
    } else {
      if (when == presence::sparse && v == M{}) return;
      j[key] = rule.write(v);
    }
  }
  void read(const reader& in, R& r) const {
    const nlohmann::json* v = when == presence::required ? &in.need(key) : in.find(key);
    if (v != nullptr) r.*member = rule.read(in, key, *v);
  }
};

template <class R, class M, class Rule>
constexpr field_entry<R, M, Rule> field(const char* key, M R::*member, Rule rule,
                                        presence when = default_presence<M>()) {
  return {key, member, rule, when};
}

// A rule across fields, run on reading once the fields before it are read.
// `test` calls in.fail(key, what) to refuse.
template <class R, class F>
struct check_entry {
  F test;
  void write(nlohmann::json&, const R&) const {}
  void read(const reader& in, R& r) const { test(in, std::as_const(r)); }
};

template <class R, class F>
constexpr check_entry<R, F> check(F test) {
  return {test};
}

// ---- applying a description ------------------------------------------------

template <class R>
void write_fields(nlohmann::json& j, const R& r) {
  std::apply([&](const auto&... entry) { (entry.write(j, r), ...); }, record<R>::fields);
}

template <class R>
void read_fields(const reader& in, R& r) {
  std::apply([&](const auto&... entry) { (entry.read(in, r), ...); }, record<R>::fields);
}

template <class R>
nlohmann::json to_object(const R& r) {
  nlohmann::json j = nlohmann::json::object();
  write_fields(j, r);
  return j;
}

template <class R>
R from_object(const reader& in) {
  R r;
  read_fields(in, r);
  return r;
}

// ---- rules ---------------------------------------------------------------
// Each has `write(value) -> json` and `read(in, key, json) -> value`, where
// `key` names the value in errors ("cpus[2]"); read throws through in.fail.

// An integer in lo..hi.
struct integer {
  std::int64_t lo;
  std::int64_t hi;
  nlohmann::json write(std::int64_t v) const { return v; }
  std::int64_t read(const reader& in, std::string_view key, const nlohmann::json& v) const {
    return in.integer_of(key, v, lo, hi);
  }
};

struct flag {
  nlohmann::json write(bool v) const { return v; }
  bool read(const reader& in, std::string_view key, const nlohmann::json& v) const {
    if (!v.is_boolean()) in.fail(key, "must be true or false");
    return v.get<bool>();
  }
};

// A string of at most `max` bytes, never with NUL; `nonempty`; `line`: no
// control characters (names shown on one line).
struct text {
  std::size_t max;
  bool nonempty;
  bool line;
  nlohmann::json write(const std::string& v) const { return v; }
  std::string read(const reader& in, std::string_view key, const nlohmann::json& v) const {
    return in.string_of(key, v, {max, nonempty, line});
  }
};

// A job state by its name ("RUNNING").
struct job_state_name {
  nlohmann::json write(core::job_state s) const { return core::to_string(s); }
  core::job_state read(const reader& in, std::string_view key, const nlohmann::json& v) const {
    return in.state_of(key, v);
  }
};

// A JSON array of at most `max` values, each checked by `item`.
template <class Item>
struct list {
  std::size_t max;
  Item item;
  using value_type = std::remove_cvref_t<decltype(std::declval<const Item&>().read(
      std::declval<const reader&>(), std::string_view(), std::declval<const nlohmann::json&>()))>;

  nlohmann::json write(const std::vector<value_type>& v) const {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& x : v) a.push_back(item.write(x));
    return a;
  }
  std::vector<value_type> read(const reader& in, std::string_view key, const nlohmann::json& v) const {
    if (!v.is_array()) in.fail(key, "must be an array");
    if (v.size() > max) in.fail(key, "has more than " + std::to_string(max) + " entries");
    std::vector<value_type> out;
    out.reserve(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) out.push_back(item.read(in, element_key(key, i), v[i]));
    return out;
  }
};

// A JSON object described by record<R>; errors name its fields "key.field".
template <class R>
struct object {
  nlohmann::json write(const R& v) const { return to_object(v); }
  R read(const reader& in, std::string_view key, const nlohmann::json& v) const {
    return from_object<R>(in.nested(key, v));
  }
};

// ---- rules of fields found in several records -----------------------------

inline constexpr integer k_request_id{0, k_max_job_id};
inline constexpr integer k_job_id{1, k_max_job_id};
inline constexpr integer k_pe{1, k_max_pe};
inline constexpr integer k_memory_mb{0, std::int64_t{1} << 40};
inline constexpr integer k_gpus{0, 1 << 16};
inline constexpr text k_name{k_max_name, true, true};  // job, node and user names, tokens
inline constexpr text k_path{k_max_path, true, true};

// An error code from a newer peer reads as internal: the reply is still an
// error, and its message says what happened.
struct error_code_name {
  nlohmann::json write(error_code c) const { return to_string(c); }
  error_code read(const reader& in, std::string_view key, const nlohmann::json& v) const {
    return parse_error_code(k_name.read(in, key, v)).value_or(error_code::internal);
  }
};

// A processor map: only '0' and '1', at least one '1' when `need_one`; ""
// only when not `nonempty` (a job's history: no processors held).
struct proc_map {
  bool need_one;
  bool nonempty = true;
  nlohmann::json write(const std::string& v) const { return v; }
  std::string read(const reader& in, std::string_view key, const nlohmann::json& v) const {
    std::string s = text{static_cast<std::size_t>(k_max_pe), nonempty, true}.read(in, key, v);
    std::size_t ones = 0;
    for (const char c : s) {
      if (c != '0' && c != '1') in.fail(key, "must contain only 0 and 1");
      ones += c == '1' ? 1 : 0;
    }
    if (need_one && ones == 0) in.fail(key, "must contain at least one 1");
    return s;
  }
};

// A host name as resolvers and MPI take it: letters, digits, '-', '.', '_'.
// A cluster id (sql/007_cluster_identity): 32 lowercase hex digits, so
// that it is safe in a file name (the agent's spool directory of a cluster).
struct cluster_id_text {
  static constexpr std::size_t k_length = 32;
  nlohmann::json write(const std::string& v) const { return v; }
  std::string read(const reader& in, std::string_view key, const nlohmann::json& v) const {
    std::string s = k_name.read(in, key, v);
    bool ok = s.size() == k_length;
    for (const char c : s) ok = ok && ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'));
    if (!ok) in.fail(key, "must be a cluster id (32 lowercase hex digits)");
    return s;
  }
};

struct host_name {
  static void check_chars(const reader& in, std::string_view key, const std::string& s) {
    for (const char c : s) {
      const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
                      c == '.' || c == '_';
      if (!ok) in.fail(key, "must be a host name (letters, digits, '-', '.', '_')");
    }
  }
  nlohmann::json write(const std::string& v) const { return v; }
  std::string read(const reader& in, std::string_view key, const nlohmann::json& v) const {
    std::string s = k_name.read(in, key, v);
    check_chars(in, key, s);
    return s;
  }
};

// Host names; every entry is checked as a string before any as a host name.
struct host_list {
  std::size_t max;
  nlohmann::json write(const std::vector<std::string>& v) const { return v; }
  std::vector<std::string> read(const reader& in, std::string_view key, const nlohmann::json& v) const {
    auto out = list<text>{max, k_name}.read(in, key, v);
    for (std::size_t i = 0; i < out.size(); ++i) host_name::check_chars(in, element_key(key, i), out[i]);
    return out;
  }
};

// The latency objects of heartbeat, its ok and list_nodes (latency.hpp).
template <>
struct record<latency_sample> {
  static constexpr auto fields = std::tuple{
      field("node", &latency_sample::node, k_name),
      field("rtt_us", &latency_sample::rtt_us, integer{0, k_max_rtt_us}),
  };
};

template <>
struct record<probe_peer> {
  static constexpr auto fields = std::tuple{
      field("name", &probe_peer::name, k_name),
      field("address", &probe_peer::address, text{k_max_address, true, true}),
      field("port", &probe_peer::port, integer{1, 65535}),
  };
};

inline constexpr list<object<latency_sample>> k_latency_samples{k_max_latency_peers, {}};
inline constexpr list<object<probe_peer>> k_probe_peers{k_max_latency_peers, {}};

}  // namespace aqs::protocol::detail
