// samples: one valid instance of every protocol message, shared by the protocol tests.
#pragma once

#include <string>
#include <vector>

#include "protocol/messages.hpp"
#include "protocol/results.hpp"

namespace aqs::test {

using namespace aqs::protocol;
using aqs::core::job_state;
using nlohmann::json;

inline job_spec sample_job() {
  job_spec s;
  s.name = "heat";
  s.script = "#!/bin/sh\n#AQS -n 4\nsrun ./heat\n";
  s.argv = {"--steps", "100"};
  s.workdir = "/home/alice/run";
  s.environment = {"PATH=/usr/bin:/bin", "EMPTY=", "X=a=b"};
  s.stdout_pattern = "out-%j.txt";
  s.stderr_pattern = "err-%x.txt";
  s.min_pe = 2;
  s.max_pe = 8;
  s.adaptive = true;
  s.walltime_s = 3600;
  s.afterok = {3, 4};
  s.requeue = true;
  s.submit_token = "tok-123";
  s.interactive = false;
  s.umask = 077;
  return s;
}

// One sample of every message type, with optional fields set.
inline std::vector<message> samples() {
  job_spec cmd;
  cmd.name = "hostname";
  cmd.argv = {"hostname"};
  cmd.workdir = "/";
  cmd.interactive = true;
  return {
      hello{7, k_protocol_version, peer_role::node, std::string(64, 'a'), std::nullopt, false},
      hello{8, k_protocol_version, peer_role::job, std::nullopt, 12, false},
      hello{8, k_protocol_version, peer_role::job, std::nullopt, 12, true},
      challenge{std::string(64, 'f')},
      ok{3, json{{"job_id", 17}, {"nested", {{"a", json::array({1, 2})}}}}},
      ok{4, json::object()},
      error{5, error_code::not_found, "no job 99"},
      error{std::nullopt, error_code::bad_request, "invalid JSON"},
      output{9, 17, "stderr", std::string("bin\0ary\xff\n", 10)},
      output{std::nullopt, 17, "stdout", ""},
      submit{1, sample_job()},
      submit{2, cmd},
      cancel{3, {1, 2, 3}, 9, std::string("alice"), {"5_7"}},
      cancel{4, {}, std::nullopt, std::string("bob"), {}},
      list_jobs{5, true, std::string("alice"), {job_state::running, job_state::node_fail}, {7}, 100, 50, false, std::nullopt},
      list_jobs{6, false, std::nullopt, {}, {}, std::nullopt, std::nullopt, false, std::nullopt},
      list_jobs{6, true, std::nullopt, {}, {}, std::nullopt, 1000, true, 4242},
      list_nodes{6},
      job_history{7, 42},
      watch_job{8, 42},
      shutdown{9},
      job_event{8, 42, job_state::completed, 0, std::nullopt, std::nullopt},
      job_event{std::nullopt, 42, job_state::running, std::nullopt, std::nullopt, std::string("0011")},
      register_node{10, "node2", 16, {0, 1, 2, 3}, 64000, 2, {5, 6}, {}},
      register_node{10, "node3", 2, {0, 1}, 0, 0, {}, "host-b.example"},
      heartbeat{11, {5}},
      job_started{12, 5},
      job_exited{13, 5, job_state::failed, 3, std::nullopt},
      job_exited{14, 6, job_state::cancelled, std::nullopt, 15},
      launch{15, 5, sample_job(), "alice", 1000, 1000, "0111", 3, {0, 1, 2}, "node2:0-2",
             std::string("secret"), {}, {}, {}},
      launch{15, 5, sample_job(), "alice", 1000, 1000, "0111", 3, {0, 1, 2}, "node2:0-2",
             std::nullopt, {"h1", "h1", "h2"}, {1, 0, 3}, {}},
      launch{15, 5, sample_job(), "alice", 1000, 1000, "0111", 3, {0, 1, 2}, "node2:0-2",
             std::nullopt, {"h1", "h1", "h2"}, {1, 0, 3}, {"h3", "h4.example"}},
      kill{16, 5, 15, 30},
      kill{17, 5, 10, 0, false},
      new_map{5, 2, "1100", {}, {}},
      new_map{5, 3, "0110", {"h1", "h2"}, {1, 0}},
      resize_ack{17, 5, 2, "1100", {}, {}, {}, {}, {}},
      resize_ack{18, 5, 3, "0110", 1763900000000000, 120, 250000, 4000, 260000},
      resize_refused{19, 5, 4, "MPI_Comm_spawn failed: no slots"},
      remote_exec{20, 5, "host1", " orted -mca ess \"env\"", {"PATH=/usr/bin", "OMPI_MCA_x=1"}},
      step_ended{5, "node1", 0, std::nullopt},
      step_ended{5, "node1", std::nullopt, 9},
      node_leaving{21},
      resize_begin{22, 5, 3},
      publish{30, 5, {{"residual", 1.5e-4, 1700000000000000}, {"ranks", 4, std::nullopt}}},
      issue_token{23, 3600},
      issue_token{24, std::nullopt},
      revoke_token{25, std::string("0123abcd"), false},
      revoke_token{26, std::nullopt, true},
      control{27, "hold", {4, 5}, std::nullopt, std::nullopt, std::nullopt},
      control{28, "update", {4}, 2, 8, 3600},
      register_node{29, "node4", 2, {0, 1}, 0, 0, {}, "", 40123},
      heartbeat{30, {5}, std::vector<latency_sample>{{"node2", 81}, {"node3", 20112}}},
      heartbeat{31, {}, std::vector<latency_sample>{}},
      kill{17, 5, 28, 0, false, true},
      job_signal{32, 5, 10},
      job_cpus{33, 5, {2, 3}},
      job_cpus{34, 5, {}},  // none left on that node
      accounts{35, "show", std::nullopt, std::nullopt, std::nullopt, std::nullopt, false, std::nullopt, std::nullopt},
      accounts{36, "add", "user", R"({"user":"alice","account":"physics","shares":2})", std::nullopt, std::nullopt, true,
               std::nullopt, std::nullopt},
      accounts{37, "delete", "user", std::nullopt, "alice", "physics", false, std::nullopt, std::nullopt},
      accounts{38, "usage", std::nullopt, std::nullopt, std::nullopt, std::nullopt, false, 1700000000, 1800000000},
      reservations{39, "show", std::nullopt, std::nullopt},
      reservations{40, "create", "maint", R"({"name":"maint","duration_s":600,"nodes":"node1","users":["root"]})"},
      submit{41, cmd, true},
      // Issue 32: what an agent measured, and a listing with each job's usage.
      job_exited{42, 6, job_state::completed, 0, std::nullopt, std::nullopt, 2'000'123, 40'000, 102'456},
      list_jobs{43, true, std::nullopt, {}, {7}, std::nullopt, std::nullopt, false, std::nullopt, true},
  };
}

// A listed job (fjobs), as results_test and replies_test encode and read it.
inline job_info sample_job_info() {
  job_info j;
  j.id = 42;
  j.name = "heat";
  j.user = "alice";
  j.state = job_state::running;
  j.adaptive = true;
  j.min_pe = 2;
  j.max_pe = 8;
  j.procs = "00111100";
  j.nprocs = 4;
  j.nodes = "node0:2-3,node1:0-1";
  j.submit_time = "2026-11-21T21:00:00Z";
  j.start_time = "2026-11-21T21:00:01Z";
  j.walltime_s = 600;
  return j;
}

}  // namespace aqs::test
