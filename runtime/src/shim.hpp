// shim: the state behind the C API of <aqs/adaptive.h>, one per process.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <mpi.h>

#include "aqs/adaptive.h"
#include "control_channel.hpp"
#include "parking.hpp"
#include "placement.hpp"
#include "redistribute.hpp"  // mpi_check

struct aqs_array {
  std::uint64_t n = 0;
  std::size_t elem_size = 0;
  std::size_t ghost = 0;              // elements of spare room on each side
  std::vector<std::byte> storage;     // ghost + local block + ghost
  std::uint64_t begin = 0, end = 0;   // global indices of the local block
  std::size_t index = 0;              // registration order
  bool live = true;
  std::byte* block() { return storage.data() + ghost * elem_size; }
  std::size_t block_bytes() const { return static_cast<std::size_t>(end - begin) * elem_size; }
};

struct aqs_buffer {
  std::vector<std::byte> bytes;
};

namespace aqs::runtime {

struct state_entry {
  AQS_Pack_fn pack = nullptr;
  AQS_Unpack_fn unpack = nullptr;
  AQS_Release_fn release = nullptr;
  void* user = nullptr;
};

struct replicated_entry {
  void* data = nullptr;
  std::size_t len = 0;
};

// A map the leader decided to apply, as every rank learns it.
struct reconfiguration {
  std::int64_t epoch = 0;
  std::string procs;            // as aqsd sent it (echoed in the ack)
  std::vector<slot> next;       // the new map's slots
  std::vector<slot> current;    // the old active ranks' slots, in rank order
  std::int64_t received_at_us = 0;
  std::int64_t migrate_calls = 0;  // the leader's count, for scripted maps
  // The slots ranks join on, in the order they join: parked ranks called
  // back first, then spawned ones (their index in the merged communicator is
  // k + position). Empty: none join.
  std::vector<int> joiners;
  // What every rank registered, so a new rank can check it did the same.
  std::vector<std::uint64_t> signature;
  int cpus_per_rank = 1;  // the job's -c, for ranks that join (and may lead)
};

// Leader only: an expand whose new ranks are started in the background while
// the application goes on computing on its old ranks (MPI_THREAD_MULTIPLE).
// A thread of the leader runs MPI_Comm_spawn on a duplicate of
// MPI_COMM_SELF; the leader's later MPI_Migrate() calls look, without
// waiting, whether it returned and whether every new rank said it is ready;
// only then do the old ranks stop to switch (MPI_Intercomm_create through
// the leader, merge, move data).
struct prepared_expand {
  reconfiguration rc;              // claimed; rc.joiners: the slots spawned, in spawn order
  MPI_Comm self = MPI_COMM_NULL;   // the spawn's communicator (the thread's alone)
  std::thread thread;
  // Written by the thread before `returned` is set; read after it.
  std::atomic<bool> returned{false};
  bool ok = false;
  std::string why;
  MPI_Comm inter = MPI_COMM_NULL;  // leader <-> the new ranks
  std::int64_t spawn_us = 0;       // how long MPI_Comm_spawn took
  std::chrono::steady_clock::time_point spawn_deadline, ready_deadline;
  std::vector<int> ready_flags;
  std::vector<MPI_Request> ready_reqs;
  bool listening = false;  // the Irecvs of the new ranks' "ready" are posted
};

struct shim {
  bool initialized = false;
  bool finalized = false;
  bool adaptive = false;    // maps may come (aqsd or scripted); else MPI_Migrate only returns
  bool joining = false;     // started by an expansion, first MPI_Migrate not yet done
  MPI_Comm active = MPI_COMM_NULL;
  MPI_Comm join_parent = MPI_COMM_NULL;  // joining: the spawn's intercommunicator to the running ranks
  MPI_Comm join_comm = MPI_COMM_NULL;  // joining: parents and new ranks together
  std::optional<reconfiguration> pending_join;
  std::vector<slot> slots;  // slot of every active rank, in rank order
  int cpus_per_rank = 1;    // processors per rank: the job's -c ($AQS_CPUS_PER_TASK)
  int rank = 0;             // in active
  std::size_t map_width = 0;
  std::int64_t epoch = 0;   // maps applied
  std::int64_t passed = 0;  // leader: the newest map aqsd declined at resize_begin (never applied)
  std::int64_t migrate_calls = 0;
  std::string error;

  std::vector<std::unique_ptr<aqs_array>> arrays;
  std::vector<state_entry> states;
  std::vector<replicated_entry> replicated;

  // Leader only: the channel to aqsd.
  std::optional<control_address> control_at;
  std::unique_ptr<control_channel> control;
  std::string range_reason;  // AQS_Range_status's reason, kept for the caller
  // Scripted maps (testing aid, $AQS_TEST_MAPS "CALL:MAP,..."): the leader
  // applies MAP at its CALL-th MPI_Migrate().
  std::vector<std::pair<std::int64_t, std::string>> scripted;
  park_pool pool;  // the leader's: ranks a shrink set aside, waiting to be called back

  AQS_Timings last{};

  // Expands given up while their new ranks had not answered: the spawn's
  // intercommunicator (kept, so that its context id is never reused and a
  // late "ready" can never match a later expand) and, on the leader, the
  // sends of its "abandon" to each new rank, which complete only once that
  // rank wakes and connects. AQS_Finalize waits for them (bounded): a new
  // rank that has not heard it would never leave, and mpirun would wait.
  struct abandoned_expand {
    MPI_Comm inter = MPI_COMM_NULL;
    std::vector<MPI_Request> decisions;
  };
  std::vector<abandoned_expand> abandoned;

  // MPI_THREAD_MULTIPLE: expands prepare their new ranks in the background
  // (unless $AQS_BACKGROUND_SPAWN=0).
  bool thread_multiple = false;
  std::unique_ptr<prepared_expand> preparing;      // leader: the expand under way
  std::vector<std::unique_ptr<prepared_expand>> stuck;  // given up, spawn not returned yet
};

// Leader: ends the expand under way (the job ends), and waits up to `bound`
// for spawns given up to return, so that their new ranks hear "abandon".
void settle_background(shim& s, std::chrono::milliseconds bound);

// Moves the abandoned expands' sends on; with `bound`, waits up to it for
// every one of them (AQS_Finalize).
void progress_abandoned(shim& s, std::chrono::milliseconds bound = std::chrono::milliseconds(0));
// How long AQS_Finalize waits for them: 3 x $AQS_EXPAND_TIMEOUT, at least 60 s.
std::chrono::milliseconds abandoned_wait_bound();

shim& the_shim();
// Records `what` as the last error and returns `code`.
int fail(int code, std::string what);

// "3:1111000,6:11000000" ($AQS_TEST_MAPS). Throws std::invalid_argument.
std::vector<std::pair<std::int64_t, std::string>> parse_scripted_maps(const char* text);

// The ranks of `map` (one per cpus_per_rank processors of a host), placed
// on `cpus` and `hosts` (one per processor, from the launch or a new_map)
// or, when those do not fit the map, guessed on this host. Throws
// std::invalid_argument with a one-line reason when the map is malformed or
// does not split into whole ranks.
std::vector<slot> ranks_of_map(const std::string& map, const std::vector<int>& cpus,
                               const std::vector<std::string>& hosts, int cpus_per_rank);

// migrate.cpp
int migrate();
// A rank a shrink dropped: waits in the leader's pool until an expansion
// calls it back (then returns like MPI_Migrate()) or the job ends (then
// finalizes and exits).
int park(std::string address);
// The first MPI_Migrate() of a rank an expansion started.
int complete_join();
// Joins as a new rank (AQS_Init of a spawned process).
void join_from_parent(MPI_Comm parent);
// Registration signature (arrays' sizes, states and replicated counts).
std::vector<std::uint64_t> signature_of(const shim& s);

}  // namespace aqs::runtime
