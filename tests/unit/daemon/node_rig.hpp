// node_rig: the nodes part (node_manager) built alone, as the parts that
// read it (steps, watchers, resizes) need it in their unit tests: a
// recording pipeline over an in-memory store, a jobs' side that keeps
// nothing, agents on fake connections, virtual time.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <doctest/doctest.h>

#include "core/strategy.hpp"
#include "daemon/node_manager.hpp"
#include "fake_connection.hpp"
#include "manual_clock.hpp"
#include "protocol/replies.hpp"
#include "store/memory_job_store.hpp"

namespace aqs::test {

// The controller's side of a part, recorded: store operations run at once
// on an in-memory store (and are counted), transitions and decisions are kept.
struct recording_pipeline final : daemon::pipeline {
  store::memory_job_store store;
  struct moved {
    std::int64_t job;
    core::job_state to;
    std::optional<core::processor_set> procs;
    std::string reason;
  };
  std::vector<moved> transitions;
  std::vector<store::control_change> updates;
  std::size_t store_ops = 0, decisions = 0, kicks = 0;
  std::vector<std::string> fatal_errors;
  bool is_stopped = false;

  void transition(std::int64_t job, core::job_state to, std::optional<core::processor_set> procs, std::string reason,
                  std::optional<std::int32_t>, std::optional<std::int32_t>) override {
    transitions.push_back({job, to, std::move(procs), std::move(reason)});
  }
  void record_update(store::control_change u) override { updates.push_back(std::move(u)); }
  void store_op(std::function<void(store::job_store&)> op) override {
    ++store_ops;
    op(store);
  }
  void store_task(std::function<void(store::job_store&)> op, std::function<void()> then) override {
    op(store);
    then();
  }
  void after_commit(std::function<void()> f) override { f(); }
  void kick() override { ++kicks; }
  void decide() override { ++decisions; }
  void notify(std::int64_t, core::job_state, std::optional<std::int32_t>, std::optional<std::int32_t>,
              const core::processor_set*) override {}
  void fatal(const std::string& why) override { fatal_errors.push_back(why); }
  bool stopped() const noexcept override { return is_stopped; }
};

struct quiet_node_jobs final : daemon::node_jobs {
  std::string id = "0123456789abcdef0123456789abcdef";
  std::vector<std::int64_t> adopt_running(std::size_t, const std::vector<std::int64_t>&) override { return {}; }
  bool still_wanted(std::size_t, const protocol::message&) override { return true; }
  void jobs_reported(std::size_t, const std::vector<std::int64_t>&) override {}
  void refresh_spans() override {}
  void refresh_agent_addresses() override {}
  const std::string& cluster_id() const override { return id; }
};

struct node_rig {
  boost::asio::io_context io;
  manual_clock clock;
  core::scheduler core{core::cluster{}, core::make_strategy("fcfs")};
  recording_pipeline out;
  quiet_node_jobs node_jobs;
  daemon::node_manager nodes{core, clock, io.get_executor(), out, node_jobs, std::chrono::milliseconds(1000)};
  std::int64_t next_rid = 1;

  // A node's agent registers (host: the machine's name as MPI knows it).
  std::shared_ptr<fake_connection> agent(const std::string& name, std::int64_t procs, std::string host = "") {
    auto c = std::make_shared<fake_connection>(protocol::peer_role::node);
    protocol::register_node m;
    m.id = next_rid++;
    m.name = name;
    m.procs = procs;
    m.host = std::move(host);
    for (std::int64_t i = 0; i < procs; ++i) m.cpus.push_back(i);
    nodes.handle_register(c, m);
    REQUIRE(c->reply(m.id, std::chrono::milliseconds(0)));
    return c;
  }
  // A job the core holds, running on `procs` (`adaptive`: resizable in [min, max]).
  void running(std::int64_t id, const core::processor_set& procs, std::size_t min = 0, std::size_t max = 0,
               bool adaptive = false) {
    core::job_request r;
    r.id = static_cast<core::job_id>(id);
    r.user = "alice";
    r.min_pe = min ? min : procs.count();
    r.max_pe = max ? max : procs.count();
    r.adaptive = adaptive;
    core.restore(r, core::job_state::running, procs, clock.wall_seconds());
  }
  core::processor_set procs(std::initializer_list<std::size_t> bits) const {
    core::processor_set s(core.machine().size());
    for (auto b : bits) s.set(b);
    return s;
  }
};

// A part's reply: an ok, or an error and its code.
inline bool is_ok(const std::optional<protocol::message>& m) { return m && std::holds_alternative<protocol::ok>(*m); }
inline protocol::error_code code_of(const std::optional<protocol::message>& m) {
  REQUIRE(m);
  REQUIRE(std::holds_alternative<protocol::error>(*m));
  return std::get<protocol::error>(*m).code;
}

}  // namespace aqs::test
