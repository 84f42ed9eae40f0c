// json_limits: bounded JSON parsing and strict serialisation.
#include "protocol/json_limits.hpp"

#include <algorithm>
#include <string>

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

// Length of the well-formed UTF-8 sequence starting at text[i], or 0 when the
// byte there does not start one (RFC 3629 table 3-7 of Unicode).
std::size_t utf8_sequence_length(std::string_view text, std::size_t i) noexcept {
  const auto b = [&text](std::size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char c = b(i);
  if (c < 0x80) return 1;
  std::size_t n = 0;
  unsigned char lo = 0x80, hi = 0xbf;  // range of the second byte
  if (c >= 0xc2 && c <= 0xdf) {
    n = 2;
  } else if (c >= 0xe0 && c <= 0xef) {
    n = 3;
    if (c == 0xe0) lo = 0xa0;  // overlong
    if (c == 0xed) hi = 0x9f;  // surrogates
  } else if (c >= 0xf0 && c <= 0xf4) {
    n = 4;
    if (c == 0xf0) lo = 0x90;  // overlong
    if (c == 0xf4) hi = 0x8f;  // above U+10FFFF
  } else {
    return 0;  // continuation byte, C0/C1 overlong lead, or F5..FF
  }
  if (text.size() - i < n) return 0;
  if (b(i + 1) < lo || b(i + 1) > hi) return 0;
  for (std::size_t k = 2; k < n; ++k) {
    if (b(i + k) < 0x80 || b(i + k) > 0xbf) return 0;
  }
  return n;
}

std::string hex_byte(unsigned char c) {
  static constexpr char digits[] = "0123456789ABCDEF";
  return {digits[c >> 4], digits[c & 15]};
}
}  // namespace

std::size_t find_invalid_utf8(std::string_view text) noexcept {
  std::size_t i = 0;
  while (i < text.size()) {
    // Frames are mostly ASCII: skip it a byte at a time without the decoder.
    if (static_cast<unsigned char>(text[i]) < 0x80) {
      ++i;
      continue;
    }
    const std::size_t n = utf8_sequence_length(text, i);
    if (n == 0) return i;
    i += n;
  }
  return std::string_view::npos;
}

std::string utf8_safe(std::string_view text, std::size_t max_bytes) {
  std::string out;
  out.reserve(std::min(text.size(), max_bytes));
  std::size_t i = 0;
  while (i < text.size()) {
    const std::size_t n = utf8_sequence_length(text, i);
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
