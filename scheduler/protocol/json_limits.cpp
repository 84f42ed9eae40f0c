// json_limits: bounded JSON parsing and strict serialisation.
#include "protocol/json_limits.hpp"

#include <string>

#include "protocol/errors.hpp"

namespace aqs::protocol {

namespace {
struct limit_exceeded {
  const char* what;
};

// nlohmann's messages are single-line already; keep only the useful tail.
std::string one_line(std::string s) {
  for (char& c : s) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  const std::string prefix = "[json.exception.parse_error.101] ";
  if (s.rfind(prefix, 0) == 0) s.erase(0, prefix.size());
  return s;
}
}  // namespace

nlohmann::json parse_json_bounded(std::string_view text) {
  std::size_t values = 0;
  auto cb = [&values](int depth, nlohmann::json::parse_event_t ev, nlohmann::json&) {
    using ev_t = nlohmann::json::parse_event_t;
    if (ev == ev_t::object_start || ev == ev_t::array_start || ev == ev_t::value) {
      if (depth > k_max_json_depth) throw limit_exceeded{"JSON nested too deeply"};
      if (++values > k_max_json_values) throw limit_exceeded{"JSON has too many values"};
    }
    return true;
  };
  try {
    return nlohmann::json::parse(text.begin(), text.end(), cb, /*allow_exceptions=*/true,
                                 /*ignore_comments=*/false);
  } catch (const limit_exceeded& e) {
    throw protocol_error(error_code::bad_request, e.what);
  } catch (const nlohmann::json::exception& e) {
    throw protocol_error(error_code::bad_request, "invalid JSON: " + one_line(e.what()));
  }
}

std::string dump_json(const nlohmann::json& j) {
  try {
    return j.dump();
  } catch (const nlohmann::json::exception& e) {
    throw protocol_error(error_code::bad_request, "cannot encode: " + one_line(e.what()));
  }
}

}  // namespace aqs::protocol
