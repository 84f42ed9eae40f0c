// Unit tests of the protocol's text rules: frames must be UTF-8 without a byte-order mark, and every error reply can be encoded.
#include <doctest/doctest.h>

#include <string>
#include <variant>

#include "protocol/errors.hpp"
#include "protocol/json_limits.hpp"
#include "protocol/messages.hpp"
#include "refusals.hpp"
#include "samples.hpp"

using namespace aqs::protocol;
using aqs::test::sample_job;
using aqs::test::parse_error;
using nlohmann::json;

namespace {

std::string hex(const std::string& s) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (const char c : s) {
    out += digits[static_cast<unsigned char>(c) >> 4];
    out += digits[static_cast<unsigned char>(c) & 15];
  }
  return out;
}

// What the server does with a refusal: make_error, then encode. Returns the
// error as the peer would read it back.
error reply_to(const protocol_error& e) {
  std::string frame;
  REQUIRE_NOTHROW(frame = encode(make_error(e)));
  const message m = parse_message(std::string_view(frame).substr(4));
  REQUIRE(std::holds_alternative<error>(m));
  return std::get<error>(m);
}

// A valid submit body with `name` spliced in raw, bytes and all.
std::string submit_with_name(const std::string& raw_name) {
  json j = to_json(submit{7, sample_job()});
  j["job"]["name"] = "@@NAME@@";
  std::string text = j.dump();
  text.replace(text.find("@@NAME@@"), 8, raw_name);
  return text;
}

}  // namespace

TEST_CASE("invalid UTF-8 in a request is a bad_request whose reply can be encoded") {
  for (const std::string& bad : {
           std::string("caf\xe9"),              // Latin-1, not UTF-8
           std::string("\xc3"),                 // truncated two-byte sequence
           std::string("\xc0\x80"),             // overlong NUL
           std::string("\xe0\x80\xaf"),         // overlong '/'
           std::string("\xed\xa0\x80"),         // a UTF-16 surrogate written as UTF-8
           std::string("\xf4\x90\x80\x80"),     // beyond U+10FFFF
           std::string("\xf8\x88\x80\x80\x80"), // five-byte form
           std::string("\xff"),
           std::string("a\x80z"),               // lone continuation byte
       }) {
    const std::string shown = hex(bad);
    CAPTURE(shown);
    const protocol_error e = parse_error(submit_with_name(bad));
    CHECK(e.code() == error_code::bad_request);
    CHECK(std::string(e.what()).find("UTF-8") != std::string::npos);
    const error reply = reply_to(e);
    CHECK(reply.code == error_code::bad_request);
  }
}

TEST_CASE("invalid UTF-8 in a field name or outside strings is a bad_request too") {
  CHECK(parse_error("{\"type\":\"list_nodes\",\"id\":1,\"x\xff\":1}").code() == error_code::bad_request);
  CHECK(parse_error("{\"type\":\"list_nodes\",\"id\":1}\xc3\xa9").code() == error_code::bad_request);
  CHECK(parse_error("\xe9{\"type\":\"list_nodes\",\"id\":1}").code() == error_code::bad_request);
  CHECK(reply_to(parse_error("{\"type\":\"list_nodes\",\"id\":1,\"x\xff\":1}")).code == error_code::bad_request);
}

TEST_CASE("valid multi-byte UTF-8 in a request is accepted and round-trips") {
  const std::string name = "caf\xc3\xa9-\xe2\x82\xac-\xf0\x9f\x9a\x80-\xef\xbb\xbf";  // é, €, 🚀, U+FEFF inside
  const message m = parse_message(std::string_view(submit_with_name(name)));
  CHECK(std::get<submit>(m).job.name == name);
  CHECK(parse_message(std::string_view(encode_body(m))) == m);
}

TEST_CASE("a leading byte-order mark is refused as bad_request") {
  const std::string body = "\xef\xbb\xbf{\"type\":\"list_nodes\",\"id\":1}";
  const protocol_error e = parse_error(body);
  CHECK(e.code() == error_code::bad_request);
  CHECK(std::string(e.what()).find("byte-order mark") != std::string::npos);
  CHECK(reply_to(e).code == error_code::bad_request);
  // Without it the same frame is fine.
  CHECK(std::holds_alternative<list_nodes>(parse_message(std::string_view(body).substr(3))));
  // And parse_json_bounded refuses it for every caller, not only messages.
  CHECK_THROWS_AS(parse_json_bounded(body), protocol_error);
}

TEST_CASE("an unknown type cut at its display limit inside a multi-byte character still encodes") {
  // 63 ASCII bytes then a two-byte character: the 64-byte excerpt splits it.
  const std::string t = std::string(63, 'x') + "\xc3\xa9" + "tail";
  const protocol_error e = parse_error("{\"type\":\"" + t + "\",\"id\":9}");
  CHECK(e.code() == error_code::unknown_type);
  CHECK(e.request_id() == 9);
  const error reply = reply_to(e);
  CHECK(reply.code == error_code::unknown_type);
  CHECK(reply.id == 9);
}

TEST_CASE("an error reply always encodes, whatever bytes its message holds, within k_max_text") {
  // Messages built by handlers may quote what a peer sent or what the OS said.
  const error raw{5, error_code::not_found, "no job caf\xe9\n\x01 \xf0\x9f"};
  std::string frame;
  REQUIRE_NOTHROW(frame = encode(raw));
  const error back = std::get<error>(parse_message(std::string_view(frame).substr(4)));
  CHECK(back.id == 5);
  CHECK(back.code == error_code::not_found);
  CHECK(back.message.rfind("no job caf", 0) == 0);

  // A long message of multi-byte characters is cut on a character boundary.
  std::string euros;
  for (std::size_t i = 0; i < k_max_text; ++i) euros += "\xe2\x82\xac";
  const error cut = make_error(protocol_error(error_code::bad_request, euros));
  CHECK(cut.message.size() <= k_max_text);
  REQUIRE_NOTHROW(frame = encode(cut));
  CHECK(std::get<error>(parse_message(std::string_view(frame).substr(4))).message.size() <= k_max_text);
  const error long_raw{1, error_code::internal, euros};
  REQUIRE_NOTHROW(frame = encode(long_raw));
  CHECK(std::get<error>(parse_message(std::string_view(frame).substr(4))).message.size() <= k_max_text);
}
