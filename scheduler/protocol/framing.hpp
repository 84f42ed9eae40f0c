// framing: length-prefixed frames (4-byte big-endian length, then the JSON body).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace aqs::protocol {

// Largest frame body accepted or produced: 16 MiB, enough for a 1 MB script
// with 1,000 environment variables and room to spare.
inline constexpr std::size_t k_max_frame = std::size_t{16} << 20;
inline constexpr std::size_t k_frame_header = 4;

// The 4-byte header followed by `body`. Throws protocol_error(too_large) if
// body is longer than max_frame. The body is not inspected.
std::string encode_frame(std::string_view body, std::size_t max_frame = k_max_frame);

// Incremental decoder for one connection: feed it bytes as they arrive, in any
// chunking, and collect the complete frame bodies. It buffers at most one
// partial frame (never more than header + announced length). It reserves at
// most `reserve_up_front` bytes of an announced length before they arrive: a
// server keeps the default (none), so a slow sender of a huge length costs
// only what it has sent; a client of its own server reserves whole frames, so a large
// reply is not copied again and again as it grows.
//
// Errors: a header announcing more than max_frame throws
// protocol_error(too_large) as soon as the 4 header bytes are in, before any of
// the body is read. After an error the decoder is failed(): the connection
// must be closed, and further feed() calls throw the same error again. An
// empty (zero-length) frame is returned as an empty body; parse_message
// rejects it as bad_request.
class frame_decoder {
public:
  static constexpr std::size_t k_default_reserve = 0;
  explicit frame_decoder(std::size_t max_frame = k_max_frame, std::size_t reserve_up_front = k_default_reserve) noexcept
      : max_frame_(max_frame), reserve_(reserve_up_front) {}

  // Appends each frame body completed by `bytes` to `out`, in order.
  void feed(std::string_view bytes, std::vector<std::string>& out);
  // Convenience: the frames completed by `bytes`.
  std::vector<std::string> feed(std::string_view bytes);

  // Bytes of the current partial frame (header included) held so far.
  std::size_t buffered() const noexcept { return header_len_ + body_.size(); }
  bool failed() const noexcept { return failed_; }
  std::size_t max_frame() const noexcept { return max_frame_; }

private:
  std::size_t max_frame_;
  std::size_t reserve_;
  unsigned char header_[k_frame_header] = {};
  std::size_t header_len_ = 0;
  std::size_t expected_ = 0;  // body length once the header is complete
  std::string body_;
  bool failed_ = false;
  std::uint64_t failed_length_ = 0;
};

}  // namespace aqs::protocol
