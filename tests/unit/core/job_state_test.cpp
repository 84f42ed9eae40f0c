// Unit tests of the job state names and the transition table.
#include <doctest/doctest.h>

#include "core/job_state.hpp"

using namespace aqs::core;

TEST_CASE("every state's name parses back to the same state and nothing else parses") {
  for (job_state s : k_all_job_states) CHECK(parse_job_state(to_string(s)) == s);
  CHECK_FALSE(parse_job_state("running").has_value());
  CHECK_FALSE(parse_job_state("").has_value());
  CHECK_FALSE(parse_job_state("RUNNING ").has_value());
}

TEST_CASE("the transition table allows exactly the documented transitions") {
  using enum job_state;
  int legal = 0;
  for (job_state a : k_all_job_states) {
    for (job_state b : k_all_job_states) legal += is_legal_transition(a, b) ? 1 : 0;
  }
  CHECK(legal == 3 + 9 + 8 + 7 + 1);  // running, resizing, suspended may be requeued
  CHECK(is_legal_transition(pending, running));
  CHECK(is_legal_transition(running, resizing));
  CHECK(is_legal_transition(resizing, running));
  CHECK(is_legal_transition(node_fail, pending));
  CHECK_FALSE(is_legal_transition(pending, completed));
  CHECK_FALSE(is_legal_transition(pending, resizing));
  CHECK_FALSE(is_legal_transition(completed, running));
  CHECK_FALSE(is_legal_transition(running, running));
  CHECK_FALSE(is_legal_transition(cancelled, pending));
}

TEST_CASE("final states are the ends of the table, except a requeueable NODE_FAIL") {
  for (job_state s : k_all_job_states) {
    bool has_exit = false;
    for (job_state t : k_all_job_states) has_exit = has_exit || is_legal_transition(s, t);
    if (s == job_state::node_fail) {
      CHECK(is_final(s));
      CHECK(has_exit);
    } else {
      CHECK(is_final(s) == !has_exit);
    }
  }
  CHECK(holds_processors(job_state::suspended));
  CHECK_FALSE(holds_processors(job_state::pending));
}
