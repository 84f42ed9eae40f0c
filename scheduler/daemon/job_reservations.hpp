// job_reservations: aqsd's advance reservations (issue 32): kept in
// PostgreSQL (store::reservation_store), handed to the core
// (core::scheduler::set_reservations, which plans around them: see
// core/reservation.hpp), a decision at each one's start and end, the
// `reservations` message (scontrol create/update/delete/show reservation,
// sinfo -T, fctl reserve), the check of a submission's --reservation and
// the pending reasons of the jobs that name one.
//
// A reservation's processors are chosen when it is made
// (core::choose_reservation_procs) and stored by node name and local core,
// so they stay the same processors whatever order nodes register in after
// a restart. When it ends it is deleted (audited, as every change).
//
// Rule: on the scheduling strand, except load() (before the server starts)
// and the store calls, which run on the pipeline's readers.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/reservation.hpp"
#include "core/scheduler.hpp"
#include "daemon/access_view.hpp"
#include "daemon/clock.hpp"
#include "daemon/pipeline.hpp"
#include "daemon/write_pipeline.hpp"
#include "protocol/messages.hpp"
#include "store/reservation_store.hpp"

namespace aqs::daemon {

class job_reservations {
public:
  // `conninfo` empty: in memory only (unit tests).
  job_reservations(std::string conninfo, write_pipeline& pipe, clock& time, core::scheduler& core, access_view& view);
  ~job_reservations();
  job_reservations(const job_reservations&) = delete;
  job_reservations& operator=(const job_reservations&) = delete;

  // Whether an account of this name exists (Accounts= is checked against
  // the accounting tree when there is one).
  void set_account_check(std::function<bool(const std::string&)> f) { account_known_ = std::move(f); }
  // Before the server starts (blocking): the stored reservations.
  void load();
  void start();  // arms the timer of the next start or end (strand)
  void stop();

  // Before each decision (strand): the core plans with the reservations
  // that have not ended, over the nodes registered now.
  void sync(double now);
  // Strand, before a job is stored: "" or the one-line refusal of its
  // --reservation ("account" is the account it is charged to, if any).
  std::string check_submission(const protocol::job_spec& spec, const std::string& user, bool root) const;
  // Why a pending job that names a reservation waits ("Reservation" before
  // its start, "ReservationDeleted" when it is gone), or "".
  std::string pending_reason(const core::job& j, double now) const;
  // Whether any job or reservation makes pending_reason worth asking.
  bool matters() const noexcept { return !entries_.empty() || named_; }

  void handle(const std::shared_ptr<connection>& c, const protocol::reservations& m);

private:
  struct entry {
    store::reservation_row row;
  };
  void create(const std::shared_ptr<connection>& c, const protocol::reservations& m, const std::string& actor);
  void update(const std::shared_ptr<connection>& c, const protocol::reservations& m, const std::string& actor);
  void remove(const std::shared_ptr<connection>& c, const protocol::reservations& m, const std::string& actor);
  // The core's view of the stored ones (those whose nodes are registered).
  std::vector<core::advance_reservation> core_view(double now, const std::string& except = "") const;
  std::string to_json(const store::reservation_row& r, double now) const;
  // write() on the read pool (no store: not at all), then done("" or why
  // it failed) on the strand.
  void store_then(std::function<void()> write, std::function<void(std::string)> done);
  void arm(double now);
  void on_timer();

  std::string conninfo_;
  write_pipeline& pipe_;
  clock& clock_;
  core::scheduler& core_;
  access_view& view_;
  std::unique_ptr<store::reservation_store> store_;
  std::function<bool(const std::string&)> account_known_;
  std::map<std::string, entry> entries_;
  std::map<std::string, store::reservation_row> in_flight_;  // being stored: their names and processors are taken
  bool dirty_ = true;
  bool named_ = false;  // a job named a reservation since the start
  std::size_t synced_size_ = 0;
  std::unique_ptr<timer_handle> timer_;
  bool stopped_ = false;
};

}  // namespace aqs::daemon
