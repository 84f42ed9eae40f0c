// Fuzz target for parse_message and read_reply: what is read re-encodes to itself, a refusal encodes as an error.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <variant>

#include "protocol/errors.hpp"
#include "protocol/json_limits.hpp"
#include "protocol/messages.hpp"
#include "protocol/replies.hpp"
#include "protocol/results.hpp"
#include "reply_round_trip.hpp"

using namespace aqs::protocol;

namespace {
[[noreturn]] void violated() { std::abort(); }

// A list the results parser accepts re-encodes to itself, item by item; one
// it refuses is refused as bad_request.
template <class ParseList, class ParseOne>
void check_results(const nlohmann::json& result, ParseList parse_list, ParseOne parse_one) {
  decltype(parse_list(result)) items;
  try {
    items = parse_list(result);
  } catch (const protocol_error& e) {
    if (e.code() != error_code::bad_request) violated();
    return;
  }
  for (const auto& item : items) {
    if (!(parse_one(parse_json_bounded(dump_json(to_json(item))), "") == item)) violated();
  }
}

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
    // fjobs and fnodes read the result of an ok with the results parsers.
    if (const auto* reply = std::get_if<ok>(&m)) {
      check_results(reply->result, parse_job_list, parse_job_info);
      check_results(reply->result, parse_node_list, parse_node_info);
      // The commands read the results as typed replies.
      if (!aqs::test::command_replies_round_trip(*reply)) violated();
    }
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
