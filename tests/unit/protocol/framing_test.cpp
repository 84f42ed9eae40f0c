// Unit tests of the frame encoder and the incremental frame decoder.
#include <doctest/doctest.h>

#include <random>
#include <string>
#include <vector>

#include "protocol/errors.hpp"
#include "protocol/framing.hpp"

using namespace aqs::protocol;

TEST_CASE("a frame is a 4-byte big-endian length followed by the body") {
  const std::string f = encode_frame("{\"a\":1}");
  REQUIRE(f.size() == 4 + 7);
  CHECK(f[0] == 0);
  CHECK(f[1] == 0);
  CHECK(f[2] == 0);
  CHECK(f[3] == 7);
  CHECK(f.substr(4) == "{\"a\":1}");

  const std::string big(0x010203, 'x');
  const std::string g = encode_frame(big);
  CHECK(static_cast<unsigned char>(g[0]) == 0x00);
  CHECK(static_cast<unsigned char>(g[1]) == 0x01);
  CHECK(static_cast<unsigned char>(g[2]) == 0x02);
  CHECK(static_cast<unsigned char>(g[3]) == 0x03);
}

TEST_CASE("the encoder refuses a body longer than the maximum frame") {
  CHECK_NOTHROW(encode_frame(std::string(100, 'x'), 100));
  try {
    encode_frame(std::string(101, 'x'), 100);
    FAIL("no error");
  } catch (const protocol_error& e) {
    CHECK(e.code() == error_code::too_large);
  }
}

TEST_CASE("the decoder returns the same frames whatever the chunking of the bytes") {
  std::vector<std::string> bodies = {"{}", "", "{\"type\":\"x\"}", std::string(70000, 'q'), "[1]"};
  std::string stream;
  for (const auto& b : bodies) stream += encode_frame(b);

  std::mt19937 rng(42);
  for (int round = 0; round < 200; ++round) {
    frame_decoder d;
    std::vector<std::string> got;
    std::size_t pos = 0;
    while (pos < stream.size()) {
      // Mostly tiny chunks (splitting headers), sometimes big ones.
      const std::size_t n = (rng() % 4 == 0) ? rng() % 100000 + 1 : rng() % 7 + 1;
      d.feed(std::string_view(stream).substr(pos, n), got);
      pos += n;
    }
    REQUIRE(got == bodies);
    CHECK(d.buffered() == 0);
  }
}

TEST_CASE("the decoder returns a frame as soon as its last byte arrives, not before") {
  frame_decoder d;
  const std::string f = encode_frame("hello");
  CHECK(d.feed(f.substr(0, f.size() - 1)).empty());
  CHECK(d.buffered() == f.size() - 1);
  const auto got = d.feed(f.substr(f.size() - 1));
  REQUIRE(got.size() == 1);
  CHECK(got[0] == "hello");
  // A zero-length frame completes with its header alone.
  const auto empty = d.feed(std::string(4, '\0'));
  REQUIRE(empty.size() == 1);
  CHECK(empty[0].empty());
}

TEST_CASE("an oversized length is refused from the header alone, and the decoder stays failed") {
  frame_decoder d;
  // 16 MiB + 1, announced; no body follows.
  const std::string header = {'\x01', '\x00', '\x00', '\x01'};
  CHECK(d.feed(header.substr(0, 3)).empty());
  try {
    d.feed(header.substr(3));
    FAIL("no error");
  } catch (const protocol_error& e) {
    CHECK(e.code() == error_code::too_large);
    CHECK(std::string(e.what()).find("16777217") != std::string::npos);
  }
  CHECK(d.failed());
  CHECK_THROWS_AS(d.feed("{}"), protocol_error);
}

TEST_CASE("a frame of exactly the maximum size is accepted") {
  frame_decoder d(1000);
  const auto got = d.feed(encode_frame(std::string(1000, 'a'), 1000));
  REQUIRE(got.size() == 1);
  CHECK(got[0].size() == 1000);
  frame_decoder d2(1000);
  CHECK_THROWS_AS(d2.feed(encode_frame(std::string(1001, 'a'), 2000)), protocol_error);
}

TEST_CASE("frames completed in one feed come out in order, frames before an oversized one too") {
  frame_decoder d(10);
  std::string stream = encode_frame("one", 10) + encode_frame("two", 10) + encode_frame(std::string(11, 'x'), 100);
  std::vector<std::string> got;
  CHECK_THROWS_AS(d.feed(stream, got), protocol_error);
  CHECK(got == std::vector<std::string>{"one", "two"});
}
