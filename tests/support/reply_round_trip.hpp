// reply_round_trip: the property the typed reply readers owe, checked by the
// seeded fuzz test (tests/unit/protocol) and the libFuzzer target
// (tests/fuzz/fuzz_messages): a reply read_reply accepts is sent again by
// make_ok as one it reads back the same; one it refuses is refused as
// bad_request. Test code only.
#pragma once

#include <string_view>
#include <variant>

#include "protocol/errors.hpp"
#include "protocol/framing.hpp"
#include "protocol/messages.hpp"
#include "protocol/replies.hpp"

namespace aqs::test {

// Whether the property holds for `Reply` read from `reply`.
template <class Reply>
bool reply_round_trips(const protocol::ok& reply) {
  Reply r;
  try {
    r = protocol::read_reply<Reply>(reply);
  } catch (const protocol::protocol_error& e) {
    return e.code() == protocol::error_code::bad_request;
  }
  const protocol::message again =
      protocol::parse_message(std::string_view(protocol::encode_body(protocol::make_ok(reply.id, r))));
  return protocol::read_reply<Reply>(std::get<protocol::ok>(again)) == r;
}

// Whether it holds for every typed reply the commands read.
inline bool command_replies_round_trip(const protocol::ok& reply) {
  using namespace protocol;
  return reply_round_trips<hello_reply>(reply) & reply_round_trips<submit_reply>(reply) &
         reply_round_trips<cancel_reply>(reply) & reply_round_trips<list_jobs_reply>(reply) &
         reply_round_trips<list_nodes_reply>(reply) & reply_round_trips<job_history_reply>(reply) &
         reply_round_trips<register_reply>(reply) & reply_round_trips<remote_exec_reply>(reply);
}

}  // namespace aqs::test
