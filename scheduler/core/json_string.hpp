// json_string: a string written as a JSON string literal, for the code that
// builds JSON text by hand on hot paths (the protocol's job and node lists,
// the store's submission batches).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace aqs::core {

// Appends `text` to `out` as a JSON string: quotes, backslashes and every
// control character escaped, every other byte (UTF-8 included) as it is.
inline void append_json_string(std::string& out, std::string_view text) {
  static constexpr char hex[] = "0123456789abcdef";
  out += '"';
  std::size_t plain = 0;  // start of the run of bytes copied as they are
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    out.append(text.data() + plain, i - plain);
    plain = i + 1;
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        out += "\\u00";
        out += hex[c >> 4];
        out += hex[c & 15];
    }
  }
  out.append(text.data() + plain, text.size() - plain);
  out += '"';
}

}  // namespace aqs::core
