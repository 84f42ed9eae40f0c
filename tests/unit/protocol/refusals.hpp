// refusals: the error parse_message gives a text it must refuse, for the
// protocol tests that check refusals word for word.
#pragma once

#include <string>
#include <string_view>

#include <doctest/doctest.h>

#include "protocol/errors.hpp"
#include "protocol/messages.hpp"

namespace aqs::test {

// Parses `text` and returns the error, failing the test if it parsed.
inline protocol::protocol_error parse_error(const std::string& text) {
  try {
    protocol::parse_message(std::string_view(text));
  } catch (const protocol::protocol_error& e) {
    return e;
  }
  FAIL("parsed without error: " << text);
  return protocol::protocol_error(protocol::error_code::internal, "unreachable");
}

}  // namespace aqs::test
