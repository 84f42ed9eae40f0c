// faucets_gate: the Faucets part of aqsd's queue. Jobs a Faucets server
// placed here run only while this cluster and the server agree they are its.
// After a restart they wait until the uplink has heard from the server;
// while the server is unreachable, those still pending leave the queue
// (reason FaucetsSync). When the server comes back it lists the jobs it
// placed here: those run again; any other copy (a forward whose answer was
// lost with the link, a job the server placed elsewhere since) is reported
// to the server and keeps waiting until the server releases or cancels it.
// Held in the core, not in the store: the mark is the job's submit token, so
// a restart closes the gate again by itself. Before such a job is launched,
// the server is asked (start_check) to record that it starts.
//
// Rule: it owns whether the gate is open, the jobs waiting behind it and the
// start check; its public calls (from the uplink's threads) post to the
// strand, everything else runs there. It holds and releases jobs in the
// core, sets their reasons in the read view, and asks `admit` for a job the
// core does not hold yet; it never ends or launches a job.
#pragma once

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "core/scheduler.hpp"
#include "daemon/access_view.hpp"
#include "daemon/job_table.hpp"
#include "daemon/observe.hpp"
#include "daemon/write_pipeline.hpp"

namespace aqs::daemon {

class faucets_gate {
public:
  // Asked before a job a Faucets server placed here is launched: `done(true)`
  // once the server has recorded that it starts (so it never places it
  // elsewhere), `done(false)` if it refused, did not answer, or is
  // unreachable; then the job goes back to the queue, behind the gate.
  // `done` may be called on any thread.
  using start_check =
      std::function<void(std::int64_t job_id, const std::string& submit_token, std::function<void(bool)> done)>;

  // `open`: no Faucets uplink (the gate never closes), else closed until the
  // server is heard. `admit` queues a job the core does not hold yet.
  faucets_gate(bool open, core::scheduler& core, const job_table& jobs, access_view& view, write_pipeline& pipe,
               std::function<void(std::int64_t)> admit)
      : open_(open), core_(core), jobs_(jobs), view_(view), pipe_(pipe), admit_(std::move(admit)) {}

  // ---- from the uplink (any thread; posted to the strand) ----------------
  // The server is unreachable: its pending jobs leave the queue.
  void close();
  // The server has listed the jobs it placed here (`theirs`, local ids): the
  // gate opens, those of them waiting run again, and every other live job a
  // Faucets server placed here is passed to `rest` on the strand; those of
  // them still waiting keep waiting for release() or a cancel.
  void follow(std::set<std::int64_t> theirs, std::function<void(std::vector<faucets_copy>)> rest);
  // The server says this copy is its job's placement: it may run.
  void release(std::int64_t id);
  // Set before the daemon starts.
  void on_start(start_check check) { check_ = std::move(check); }

  // ---- on the strand ------------------------------------------------------
  // Whether a job of the server's must be asked about before it starts.
  bool checks_starts() const noexcept { return static_cast<bool>(check_); }
  void check_start(std::int64_t id, const std::string& submit_token, std::function<void(bool)> done) const {
    check_(id, submit_token, std::move(done));
  }
  // A new job of the server's arrives: false if it must wait behind the
  // closed gate (then it waits there, reason FaucetsSync).
  bool admits(std::int64_t id);
  // A job of the server's that it did not let start: behind the gate again
  // (the core holds it) until the server lists or releases it.
  void hold_back(std::int64_t id);

private:
  bool let_run(std::int64_t id);

  bool open_;
  std::set<std::int64_t> waiting_;  // pending jobs behind the gate
  start_check check_;               // set before start
  core::scheduler& core_;
  const job_table& jobs_;
  access_view& view_;
  write_pipeline& pipe_;
  std::function<void(std::int64_t)> admit_;
};

}  // namespace aqs::daemon
