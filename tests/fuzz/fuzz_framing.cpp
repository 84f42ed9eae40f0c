// Fuzz target for protocol::frame_decoder: any byte stream, in any chunking, gives the same frames or the same too_large refusal.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/errors.hpp"
#include "protocol/framing.hpp"

using namespace aqs::protocol;

namespace {

[[noreturn]] void violated() { std::abort(); }

struct outcome {
  std::vector<std::string> frames;
  bool refused = false;
  std::size_t buffered = 0;
};

// Feeds `stream` in chunks whose sizes come from `seed` (0: all at once).
outcome decode(std::string_view stream, std::size_t max_frame, unsigned seed) {
  frame_decoder d(max_frame);
  outcome o;
  std::uint32_t state = seed * 2654435761u + 1;
  try {
    while (!stream.empty()) {
      std::size_t n = stream.size();
      if (seed != 0) {
        state = state * 1103515245u + 12345u;
        n = std::min<std::size_t>(n, 1 + (state >> 16) % 17);
      }
      d.feed(stream.substr(0, n), o.frames);
      stream.remove_prefix(n);
      if (d.buffered() > k_frame_header + max_frame) violated();
    }
  } catch (const protocol_error& e) {
    if (e.code() != error_code::too_large || !d.failed()) violated();
    o.refused = true;
    // A failed decoder stays failed: the connection must be closed.
    try {
      d.feed("x", o.frames);
      violated();
    } catch (const protocol_error& again) {
      if (again.code() != error_code::too_large) violated();
    }
  }
  o.buffered = d.buffered();
  return o;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  // Byte 0 picks the frame limit (small ones reach the refusal often), byte 1
  // the chunking; the rest is the stream.
  const std::size_t max_frame = data[0] == 0xff ? k_max_frame : std::size_t{data[0]} * 4;
  const unsigned seed = data[1];
  const std::string_view stream(reinterpret_cast<const char*>(data) + 2, size - 2);

  const outcome whole = decode(stream, max_frame, 0);
  const outcome chunked = decode(stream, max_frame, seed + 1);
  if (whole.refused != chunked.refused || whole.frames != chunked.frames) violated();
  if (!whole.refused && whole.buffered != chunked.buffered) violated();

  // The frames re-encode to exactly the bytes they were read from.
  std::string again;
  for (const auto& f : whole.frames) {
    if (f.size() > max_frame) violated();
    again += encode_frame(f, max_frame);
  }
  if (stream.substr(0, again.size()) != again) violated();
  if (!whole.refused && again.size() + whole.buffered != stream.size()) violated();
  return 0;
}
