// utf8: well-formed UTF-8, byte by byte.
#include "core/utf8.hpp"

namespace aqs::core {

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

std::size_t find_invalid_utf8(std::string_view text) noexcept {
  std::size_t i = 0;
  while (i < text.size()) {
    // Mostly ASCII: a byte at a time without the decoder.
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

}  // namespace aqs::core
