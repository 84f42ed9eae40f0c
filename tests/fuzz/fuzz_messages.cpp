// Fuzz target for protocol::parse_message on a frame body: a message that re-encodes to itself, or a protocol_error whose reply encodes.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <variant>

#include "protocol/errors.hpp"
#include "protocol/messages.hpp"

using namespace aqs::protocol;

namespace {
[[noreturn]] void violated() { std::abort(); }
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  try {
    const message m = parse_message(body);
    // Whatever parsed must encode (a throw here escapes and is reported) and
    // read back the same, as the server's reply path assumes.
    const std::string text = encode_body(m);
    const message back = parse_message(std::string_view(text));
    if (!(back == m)) violated();
    if (encode_body(back) != text) violated();
    (void)type_of(m);
    (void)id_of(m);
    for (const auto r : {peer_role::client, peer_role::node, peer_role::job}) (void)may_send(r, m);
  } catch (const protocol_error& e) {
    const std::string what = e.what();
    if (what.empty() || what.find('\n') != std::string::npos) violated();
    // The server answers every refusal: that reply must always encode.
    const std::string frame = encode(make_error(e));
    const message reply = parse_message(std::string_view(frame).substr(4));
    const auto* err = std::get_if<error>(&reply);
    if (err == nullptr || err->code != e.code() || err->id != e.request_id()) violated();
  }
  return 0;
}
