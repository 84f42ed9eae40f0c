// framing: length-prefixed frame encoder and incremental decoder.
#include "protocol/framing.hpp"

#include <algorithm>

#include "protocol/errors.hpp"

namespace aqs::protocol {

namespace {
std::string too_large_message(std::uint64_t length, std::size_t max_frame) {
  return "frame of " + std::to_string(length) + " bytes exceeds the maximum of " +
         std::to_string(max_frame) + " bytes";
}
}  // namespace

std::string encode_frame(std::string_view body, std::size_t max_frame) {
  if (body.size() > max_frame || body.size() > 0xffffffffu) {
    throw protocol_error(error_code::too_large, too_large_message(body.size(), max_frame));
  }
  const auto n = static_cast<std::uint32_t>(body.size());
  std::string out;
  out.reserve(k_frame_header + body.size());
  out.push_back(static_cast<char>((n >> 24) & 0xff));
  out.push_back(static_cast<char>((n >> 16) & 0xff));
  out.push_back(static_cast<char>((n >> 8) & 0xff));
  out.push_back(static_cast<char>(n & 0xff));
  out.append(body);
  return out;
}

void frame_decoder::feed(std::string_view bytes, std::vector<std::string>& out) {
  if (failed_) {
    throw protocol_error(error_code::too_large, too_large_message(failed_length_, max_frame_));
  }
  while (!bytes.empty()) {
    if (header_len_ < k_frame_header) {
      const std::size_t take = std::min(k_frame_header - header_len_, bytes.size());
      for (std::size_t i = 0; i < take; ++i) {
        header_[header_len_ + i] = static_cast<unsigned char>(bytes[i]);
      }
      header_len_ += take;
      bytes.remove_prefix(take);
      if (header_len_ < k_frame_header) break;
      const std::uint64_t length = (std::uint64_t{header_[0]} << 24) |
                                   (std::uint64_t{header_[1]} << 16) |
                                   (std::uint64_t{header_[2]} << 8) | std::uint64_t{header_[3]};
      if (length > max_frame_) {
        failed_ = true;
        failed_length_ = length;
        throw protocol_error(error_code::too_large, too_large_message(length, max_frame_));
      }
      expected_ = static_cast<std::size_t>(length);
      if (reserve_ > 0) body_.reserve(std::min(expected_, reserve_));
    }
    const std::size_t take = std::min(expected_ - body_.size(), bytes.size());
    body_.append(bytes.substr(0, take));
    bytes.remove_prefix(take);
    if (body_.size() == expected_) {
      out.push_back(std::move(body_));
      body_.clear();
      header_len_ = 0;
      expected_ = 0;
    }
  }
}

std::vector<std::string> frame_decoder::feed(std::string_view bytes) {
  std::vector<std::string> out;
  feed(bytes, out);
  return out;
}

}  // namespace aqs::protocol
