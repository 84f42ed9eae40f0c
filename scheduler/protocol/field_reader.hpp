// field_reader: internal helper that validates the fields of one JSON object, naming them in errors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/job_state.hpp"
#include "protocol/errors.hpp"
#include "protocol/json_limits.hpp"

namespace aqs::protocol::detail {

using nlohmann::json;

inline std::string range_text(std::int64_t lo, std::int64_t hi) {
  return std::to_string(lo) + ".." + std::to_string(hi);
}

// Reads the fields of one JSON object, naming them "prefix.field" in errors.
class reader {
public:
  reader(const json& obj, std::string prefix) : obj_(obj), prefix_(std::move(prefix)) {}

  [[noreturn]] void fail(std::string_view key, std::string_view what) const {
    throw protocol_error(error_code::bad_request,
                         "field '" + prefix_ + std::string(key) + "' " + std::string(what));
  }

  // The member, or nullptr when absent or null.
  const json* find(const char* key) const {
    const auto it = obj_.find(key);
    if (it == obj_.end() || it->is_null()) return nullptr;
    return &*it;
  }
  const json& need(const char* key) const {
    const json* v = find(key);
    if (v == nullptr) fail(key, "is missing");
    return *v;
  }

  std::int64_t integer_of(std::string_view key, const json& v, std::int64_t lo, std::int64_t hi) const {
    if (!v.is_number_integer()) fail(key, "must be an integer in " + range_text(lo, hi));
    if (v.is_number_unsigned()) {
      const auto u = v.get<std::uint64_t>();
      if (hi < 0 || u > static_cast<std::uint64_t>(hi)) fail(key, "must be in " + range_text(lo, hi));
      const auto s = static_cast<std::int64_t>(u);
      if (s < lo) fail(key, "must be in " + range_text(lo, hi));
      return s;
    }
    const auto s = v.get<std::int64_t>();
    if (s < lo || s > hi) fail(key, "must be in " + range_text(lo, hi));
    return s;
  }
  std::int64_t integer(const char* key, std::int64_t lo, std::int64_t hi) const {
    return integer_of(key, need(key), lo, hi);
  }
  std::optional<std::int64_t> opt_integer(const char* key, std::int64_t lo, std::int64_t hi) const {
    const json* v = find(key);
    if (v == nullptr) return std::nullopt;
    return integer_of(key, *v, lo, hi);
  }
  std::int64_t integer_or(const char* key, std::int64_t lo, std::int64_t hi, std::int64_t def) const {
    return opt_integer(key, lo, hi).value_or(def);
  }

  bool boolean(const char* key, bool def) const {
    const json* v = find(key);
    if (v == nullptr) return def;
    if (!v->is_boolean()) fail(key, "must be true or false");
    return v->get<bool>();
  }

  // String rules: no NUL ever; `line` additionally forbids control characters
  // (names that end up in one-line displays).
  struct str_rule {
    std::size_t max;
    bool nonempty = true;
    bool line = false;
  };
  std::string string_of(std::string_view key, const json& v, str_rule rule) const {
    if (!v.is_string()) fail(key, "must be a string");
    const auto& s = v.get_ref<const std::string&>();
    if (s.size() > rule.max) fail(key, "is longer than " + std::to_string(rule.max) + " bytes");
    if (rule.nonempty && s.empty()) fail(key, "must not be empty");
    // Text frames were checked whole by parse_json_bounded; a json built in
    // memory was not, and a string that is not UTF-8 could not be encoded.
    if (find_invalid_utf8(s) != std::string::npos) fail(key, "is not valid UTF-8");
    for (const char c : s) {
      if (c == '\0') fail(key, "contains a NUL character");
      if (rule.line && static_cast<unsigned char>(c) < 0x20) fail(key, "contains a control character");
    }
    return s;
  }
  std::string string(const char* key, str_rule rule) const {
    return string_of(key, need(key), rule);
  }
  std::optional<std::string> opt_string(const char* key, str_rule rule) const {
    const json* v = find(key);
    if (v == nullptr) return std::nullopt;
    return string_of(key, *v, rule);
  }

  const json* array(const char* key, std::size_t max_items, bool required) const {
    const json* v = required ? &need(key) : find(key);
    if (v == nullptr) return nullptr;
    if (!v->is_array()) fail(key, "must be an array");
    if (v->size() > max_items) fail(key, "has more than " + std::to_string(max_items) + " entries");
    return v;
  }
  std::vector<std::string> strings(const char* key, std::size_t max_items, str_rule rule,
                                   bool required = false) const {
    std::vector<std::string> out;
    const json* a = array(key, max_items, required);
    if (a == nullptr) return out;
    out.reserve(a->size());
    for (std::size_t i = 0; i < a->size(); ++i) {
      out.push_back(string_of(std::string(key) + "[" + std::to_string(i) + "]", (*a)[i], rule));
    }
    return out;
  }
  std::vector<std::int64_t> integers(const char* key, std::size_t max_items, std::int64_t lo,
                                     std::int64_t hi) const {
    std::vector<std::int64_t> out;
    const json* a = array(key, max_items, false);
    if (a == nullptr) return out;
    out.reserve(a->size());
    const std::string k(key);
    for (std::size_t i = 0; i < a->size(); ++i) {
      out.push_back(integer_of(k + "[" + std::to_string(i) + "]", (*a)[i], lo, hi));
    }
    return out;
  }

  reader object(const char* key) const { return nested(key, need(key)); }
  // A reader of the object `v`, the member `key` of this one (an array
  // element's key is "name[i]").
  reader nested(std::string_view key, const json& v) const {
    if (!v.is_object()) fail(key, "must be an object");
    return reader(v, name_of(key) + ".");
  }
  // The full name of a member, as errors show it ("jobs[3].state").
  std::string name_of(std::string_view key) const { return prefix_ + std::string(key); }

  core::job_state state_of(std::string_view key, const json& v) const {
    if (!v.is_string()) fail(key, "must be a job state string");
    const auto st = core::parse_job_state(v.get_ref<const std::string&>());
    if (!st) fail(key, "is not a job state (PENDING, RUNNING, ... NODE_FAIL)");
    return *st;
  }

private:
  const json& obj_;
  std::string prefix_;
};

}  // namespace aqs::protocol::detail
