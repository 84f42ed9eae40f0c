// Seeded fuzzing of decoder and parser: random and mutated input is a message or a protocol_error, never anything else.
#include <doctest/doctest.h>

#include <exception>
#include <random>
#include <string>
#include <vector>

#include "protocol/errors.hpp"
#include "protocol/framing.hpp"
#include "protocol/json_limits.hpp"
#include "protocol/messages.hpp"
#include "protocol/replies.hpp"
#include "reply_round_trip.hpp"
#include "samples.hpp"

using namespace aqs::protocol;
using nlohmann::json;

namespace {

struct tally {
  int parsed = 0;
  int refused = 0;
};

void check_replies(const ok& reply) { CHECK(aqs::test::command_replies_round_trip(reply)); }

// The property under test: parse either yields a message that re-encodes
// and re-parses to itself, or throws protocol_error with a known code and a
// one-line message. Any other exception fails the test.
void check_body(std::string_view body, tally& t) {
  try {
    const message m = parse_message(body);
    ++t.parsed;
    std::string again;
    try {
      again = encode_body(m);
    } catch (const protocol_error& e) {
      // Only possible cause: a string that is not UTF-8, which the JSON
      // parser would never have let through.
      FAIL("re-encoding a parsed message failed: " << e.what());
    }
    CHECK(parse_message(std::string_view(again)) == m);
    if (const auto* reply = std::get_if<ok>(&m)) check_replies(*reply);
  } catch (const protocol_error& e) {
    ++t.refused;
    const std::string what = e.what();
    CHECK(!what.empty());
    CHECK(what.find('\n') == std::string::npos);
    CHECK(parse_error_code(to_string(e.code())).has_value());
  } catch (const std::exception& e) {
    FAIL("unexpected exception type: " << e.what() << " for input of " << body.size() << " bytes");
  }
}

std::string random_bytes(std::mt19937& rng, std::size_t n) {
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rng() & 0xff);
  return s;
}

// Byte-level mutations of valid JSON text.
std::string mutate_text(std::string s, std::mt19937& rng) {
  static const std::string interesting = "{}[]\":,0123456789-+.eE\\u tfnr\x00\xff\xc3\xa9";
  const int edits = 1 + static_cast<int>(rng() % 4);
  for (int i = 0; i < edits && !s.empty(); ++i) {
    const std::size_t pos = rng() % s.size();
    switch (rng() % 5) {
      case 0: s[pos] = static_cast<char>(rng() & 0xff); break;
      case 1: s[pos] = interesting[rng() % interesting.size()]; break;
      case 2: s.erase(pos, 1 + rng() % 8); break;
      case 3: s.insert(pos, 1, interesting[rng() % interesting.size()]); break;
      case 4: s.insert(pos, s.substr(rng() % s.size(), rng() % 16)); break;
    }
  }
  return s;
}

// A random JSON value of any type, with the values most likely to break
// validation: extremes, fractions, NUL, empty and long strings, nesting.
json random_value(std::mt19937& rng, int depth = 0) {
  switch (rng() % (depth > 2 ? 9 : 11)) {
    case 0: return nullptr;
    case 1: return rng() % 2 == 0;
    case 2: return static_cast<std::int64_t>(rng() % 20) - 5;
    case 3: return std::numeric_limits<std::int64_t>::min();
    case 4: return std::numeric_limits<std::uint64_t>::max();
    case 5: return 2.5;
    case 6: return std::string("a\0b", 3);
    case 7: return std::string(rng() % 3 == 0 ? 0 : rng() % 300, 'x');
    case 8: {
      static const char* words[] = {"RUNNING", "node", "client", "job", "0110", "0000", "A=B", "/tmp", "stdout", "Zm8="};
      return words[rng() % 10];
    }
    case 9: {
      json a = json::array();
      const int n = static_cast<int>(rng() % 4);
      for (int i = 0; i < n; ++i) a.push_back(random_value(rng, depth + 1));
      return a;
    }
    default: {
      json o = json::object();
      const int n = static_cast<int>(rng() % 3);
      for (int i = 0; i < n; ++i) o["k" + std::to_string(i)] = random_value(rng, depth + 1);
      return o;
    }
  }
}

// Structural mutations: change, delete or add fields (also inside "job").
json mutate_object(json j, std::mt19937& rng) {
  const int edits = 1 + static_cast<int>(rng() % 3);
  for (int i = 0; i < edits; ++i) {
    json* target = &j;
    if (j.contains("job") && j["job"].is_object() && rng() % 2 == 0) target = &j["job"];
    if (target->empty() || rng() % 4 == 0) {
      (*target)["extra" + std::to_string(rng() % 3)] = random_value(rng);
      continue;
    }
    auto it = target->begin();
    std::advance(it, static_cast<long>(rng() % target->size()));
    const std::string key = it.key();
    if (rng() % 3 == 0) {
      target->erase(key);
    } else {
      (*target)[key] = random_value(rng);
    }
  }
  return j;
}

}  // namespace

TEST_CASE("random bytes through the decoder and the parser give messages or protocol errors only") {
  std::mt19937 rng(20261121);
  tally t;
  int decoder_errors = 0;
  for (int round = 0; round < 2000; ++round) {
    frame_decoder d(4096);
    std::string stream = random_bytes(rng, rng() % 600);
    // Half the rounds get a plausible small header, so bodies get parsed.
    if (round % 2 == 0) stream = encode_frame(random_bytes(rng, rng() % 64), 4096) + stream;
    std::vector<std::string> bodies;
    try {
      std::size_t pos = 0;
      while (pos < stream.size()) {
        const std::size_t n = 1 + rng() % 50;
        d.feed(std::string_view(stream).substr(pos, n), bodies);
        pos += n;
      }
    } catch (const protocol_error& e) {
      CHECK(e.code() == error_code::too_large);
      ++decoder_errors;
    }
    CHECK(d.buffered() <= 4 + 4096);
    for (const auto& b : bodies) check_body(b, t);
  }
  CHECK(t.refused > 0);
  CHECK(decoder_errors > 0);
}

TEST_CASE("byte mutations of valid messages give messages or protocol errors only") {
  std::mt19937 rng(7);
  tally t;
  const auto all = aqs::test::samples();
  for (int round = 0; round < 4000; ++round) {
    const std::string text = encode_body(all[rng() % all.size()]);
    check_body(mutate_text(text, rng), t);
  }
  // Both outcomes occur, so the property is not vacuous.
  CHECK(t.parsed > 0);
  CHECK(t.refused > 0);
}

TEST_CASE("field mutations of valid messages give messages or protocol errors only") {
  std::mt19937 rng(11);
  tally t;
  const auto all = aqs::test::samples();
  for (int round = 0; round < 4000; ++round) {
    const json j = mutate_object(to_json(all[rng() % all.size()]), rng);
    check_body(j.dump(), t);
  }
  CHECK(t.parsed > 0);
  CHECK(t.refused > 0);
}

TEST_CASE("deep nesting and huge value counts are refused without exhausting memory") {
  tally t;
  const std::string deep = std::string(200000, '[') + std::string(200000, ']');
  check_body(deep, t);
  std::string many = "{\"type\":\"heartbeat\",\"id\":1,\"running\":[";
  for (int i = 0; i < 300000; ++i) many += "[],";
  many += "1]}";
  check_body(many, t);
  std::string nested_field = R"({"type":"list_nodes","id":1,"x":)" + std::string(100, '[') + std::string(100, ']') + "}";
  check_body(nested_field, t);
  CHECK(t.refused == 3);
  CHECK(t.parsed == 0);
  try {
    parse_json_bounded(deep);
  } catch (const protocol_error& e) {
    CHECK(std::string(e.what()).find("deep") != std::string::npos);
  }
}

TEST_CASE("field mutations of typed replies give replies or protocol errors only") {
  job_info job;
  job.id = 42;
  job.name = "heat";
  job.user = "alice";
  job.procs = "0110";
  job.nprocs = 2;
  job.submit_time = "2026-11-21T21:00:00.000Z";
  listed_node node;
  node.name = "node1";
  node.nprocs = 4;
  node.procs = "0-3";
  node.jobs = {42};
  node.connected = true;
  job_history_reply history{job, {{"2026-11-21T21:00:00.000Z", std::nullopt, aqs::core::job_state::pending, "", "",
                                   "submitted", std::nullopt, std::nullopt},
                                  {"2026-11-21T21:00:01.000Z", aqs::core::job_state::pending,
                                   aqs::core::job_state::failed, "0110", "", "exit 3", 3, std::nullopt}}};
  const std::vector<ok> replies = {
      make_ok(1, hello_reply{}),
      make_ok(2, submit_reply{17, {}}),
      make_ok(3, cancel_reply{{1, 2}, {{3, error_code::not_found, "no pending or running job 3"}}}),
      make_ok(4, list_nodes_reply{{node}, {}, 0, 0}),
      make_ok(5, history),
      make_ok(6, register_reply{8, {5, 6}}),
      make_ok(7, remote_exec_reply{"node1"}),
  };
  std::mt19937 rng(16);
  tally t;
  for (int round = 0; round < 3000; ++round) {
    json j = to_json(replies[rng() % replies.size()]);
    // Into the nested objects too: the job, a node, an event, a failure.
    for (const char* key : {"nodes", "events", "failed"}) {
      if (j.contains(key) && j[key].is_array() && !j[key].empty() && rng() % 2 == 0) {
        j[key][0] = mutate_object(j[key][0], rng);
      }
    }
    check_body(mutate_object(j, rng).dump(), t);
  }
  CHECK(t.parsed > 0);
}
