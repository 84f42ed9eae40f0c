// json_limits: bounded JSON parsing and strict serialisation.
#include "protocol/json_limits.hpp"

#include <algorithm>
#include <string>

#include "core/utf8.hpp"
#include "protocol/errors.hpp"

namespace aqs::protocol {

namespace {
struct limit_exceeded {
  const char* what;
};

// nlohmann's messages are single-line already; keep only the useful tail.
// They quote the input ("last read: ..."), so they are made UTF-8 too.
std::string one_line(std::string s) {
  for (char& c : s) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  const std::string prefix = "[json.exception.parse_error.101] ";
  if (s.rfind(prefix, 0) == 0) s.erase(0, prefix.size());
  return utf8_safe(s, s.size() * 4);
}

std::string hex_byte(unsigned char c) {
  static constexpr char digits[] = "0123456789ABCDEF";
  return {digits[c >> 4], digits[c & 15]};
}
}  // namespace

std::string utf8_safe(std::string_view text, std::size_t max_bytes) {
  std::string out;
  out.reserve(std::min(text.size(), max_bytes));
  std::size_t i = 0;
  while (i < text.size()) {
    const std::size_t n = core::utf8_sequence_length(text, i);
    if (n == 0) {
      if (out.size() + 4 > max_bytes) break;
      out += "\\x" + hex_byte(static_cast<unsigned char>(text[i]));
      ++i;
    } else {
      if (out.size() + n > max_bytes) break;
      out.append(text.substr(i, n));
      i += n;
    }
  }
  return out;
}

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
  // nlohmann skips a UTF-8 byte-order mark; docs/protocol.md forbids one.
  if (text.substr(0, 3) == "\xEF\xBB\xBF") {
    throw protocol_error(error_code::bad_request,
                         "frame starts with a byte-order mark (EF BB BF), which the protocol forbids");
  }
  // Checked before parsing so that the message names the byte, and so that no
  // error message (nlohmann's quote the input) can carry invalid UTF-8.
  if (const std::size_t bad = find_invalid_utf8(text); bad != std::string_view::npos) {
    throw protocol_error(error_code::bad_request, "frame is not valid UTF-8: byte 0x" +
                                                      hex_byte(static_cast<unsigned char>(text[bad])) +
                                                      " at offset " + std::to_string(bad));
  }
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
