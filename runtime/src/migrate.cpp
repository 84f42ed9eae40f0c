// migrate: MPI_Migrate(): agree on a new map, start new ranks, move the
// registered state, switch communicators, pin, park the dropped ranks and
// acknowledge the map to aqsd.
#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>

#include <unistd.h>

#include "block_plan.hpp"
#include "debug_log.hpp"
#include "migration_plan.hpp"
#include "pinning.hpp"
#include "redistribute.hpp"
#include "shim.hpp"

namespace aqs::runtime {

namespace {

std::int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// ---- the reconfiguration as bytes, for MPI_Bcast ---------------------------
struct byte_writer {
  std::vector<std::byte> b;
  void u64(std::uint64_t v) {
    const auto* p = reinterpret_cast<const std::byte*>(&v);
    b.insert(b.end(), p, p + sizeof v);
  }
  void str(const std::string& s) {
    u64(s.size());
    const auto* p = reinterpret_cast<const std::byte*>(s.data());
    b.insert(b.end(), p, p + s.size());
  }
};
struct byte_reader {
  const std::vector<std::byte>& b;
  std::size_t at = 0;
  std::uint64_t u64() {
    if (at + 8 > b.size()) throw std::runtime_error("truncated reconfiguration message");
    std::uint64_t v;
    std::memcpy(&v, b.data() + at, 8);
    at += 8;
    return v;
  }
  std::string str() {
    const std::size_t n = u64();
    if (at + n > b.size()) throw std::runtime_error("truncated reconfiguration message");
    std::string s(reinterpret_cast<const char*>(b.data() + at), n);
    at += n;
    return s;
  }
};

void put_ints(byte_writer& w, const std::vector<int>& v) {
  w.u64(v.size());
  for (const int x : v) w.u64(static_cast<std::uint64_t>(x));
}
std::vector<int> get_ints(byte_reader& r) {
  std::vector<int> v(r.u64());
  for (auto& x : v) x = static_cast<int>(r.u64());
  return v;
}

void put_slots(byte_writer& w, const std::vector<slot>& v) {
  w.u64(v.size());
  for (const auto& s : v) {
    w.u64(static_cast<std::uint64_t>(s.proc));
    w.u64(static_cast<std::uint64_t>(s.cpu));
    w.str(s.host);
    put_ints(w, s.more_procs);
    put_ints(w, s.more_cpus);
  }
}
std::vector<slot> get_slots(byte_reader& r) {
  std::vector<slot> v(r.u64());
  for (auto& s : v) {
    s.proc = static_cast<int>(r.u64());
    s.cpu = static_cast<int>(r.u64());
    s.host = r.str();
    s.more_procs = get_ints(r);
    s.more_cpus = get_ints(r);
  }
  return v;
}

std::vector<std::byte> encode(const reconfiguration& rc) {
  byte_writer w;
  w.u64(static_cast<std::uint64_t>(rc.epoch));
  w.str(rc.procs);
  put_slots(w, rc.next);
  put_slots(w, rc.current);
  w.u64(static_cast<std::uint64_t>(rc.received_at_us));
  w.u64(static_cast<std::uint64_t>(rc.migrate_calls));
  w.u64(rc.signature.size());
  for (auto x : rc.signature) w.u64(x);
  w.u64(rc.joiners.size());
  for (int j : rc.joiners) w.u64(static_cast<std::uint64_t>(j));
  w.u64(static_cast<std::uint64_t>(rc.cpus_per_rank));
  return std::move(w.b);
}
reconfiguration decode(const std::vector<std::byte>& b) {
  byte_reader r{b};
  reconfiguration rc;
  rc.epoch = static_cast<std::int64_t>(r.u64());
  rc.procs = r.str();
  rc.next = get_slots(r);
  rc.current = get_slots(r);
  rc.received_at_us = static_cast<std::int64_t>(r.u64());
  rc.migrate_calls = static_cast<std::int64_t>(r.u64());
  rc.signature.resize(r.u64());
  for (auto& x : rc.signature) x = r.u64();
  rc.joiners.resize(r.u64());
  for (auto& j : rc.joiners) j = static_cast<int>(r.u64());
  rc.cpus_per_rank = static_cast<int>(r.u64());
  return rc;
}

void bcast_bytes(std::vector<std::byte>& buf, int root, MPI_Comm comm) {
  std::uint64_t n = buf.size();
  mpi_check(MPI_Bcast(&n, 1, MPI_UINT64_T, root, comm), "MPI_Bcast");
  buf.resize(n);
  mpi_check(MPI_Bcast(buf.data(), static_cast<int>(n), MPI_BYTE, root, comm), "MPI_Bcast");
}

// The leader's view: is there a map to apply at this call?
std::optional<reconfiguration> leader_decision(shim& s) {
  std::optional<reconfiguration> rc;
  if (s.control) {
    const std::int64_t seen = std::max(s.epoch, s.passed);
    if (s.control->newest_epoch() <= seen) return rc;
    auto u = s.control->newest_after(seen);
    if (!u) return rc;
    // Whole ranks or nothing: a map that does not split into ranks of the
    // job's processors per rank is refused before it is claimed.
    std::vector<slot> next;
    try {
      next = ranks_of_map(u->procs, std::vector<int>(u->cpus.begin(), u->cpus.end()), u->hosts, s.cpus_per_rank);
    } catch (const std::invalid_argument& ex) {
      std::fprintf(stderr, "aqs: cannot apply map %lld: %s\n", static_cast<long long>(u->epoch), ex.what());
      s.passed = u->epoch;
      try {
        s.control->refuse(u->epoch, ex.what());
      } catch (const std::exception&) {
      }
      return rc;
    }
    // Claim it before anything changes: a map whose resize timed out (the
    // job reached MPI_Migrate() late) must not be applied, or the job would
    // run on processors aqsd has taken back.
    switch (s.control->claim(u->epoch, std::chrono::seconds(30))) {
      case control_channel::claim_result::go:
        break;
      case control_channel::claim_result::declined:
        AQS_DEBUG_LOG("map %lld declined by aqsd: keeping the current one", static_cast<long long>(u->epoch));
        s.passed = u->epoch;
        return rc;
      case control_channel::claim_result::lost:
        // aqsd may have taken the claim: tell it plainly the map is not applied.
        s.passed = u->epoch;
        try {
          s.control->refuse(u->epoch, "no answer to resize_begin within 30 s");
        } catch (const std::exception&) {
        }
        return rc;
    }
    rc.emplace();
    rc->epoch = u->epoch;
    rc->procs = u->procs;
    rc->received_at_us = u->received_at_us;
    rc->next = std::move(next);
  } else {
    auto it = std::find_if(s.scripted.begin(), s.scripted.end(),
                           [&](const auto& e) { return e.first == s.migrate_calls; });
    if (it == s.scripted.end()) return rc;
    std::vector<slot> next;
    try {
      next = ranks_of_map(it->second, {}, {}, s.cpus_per_rank);
    } catch (const std::invalid_argument& ex) {
      std::fprintf(stderr, "aqs: cannot apply map %s: %s\n", it->second.c_str(), ex.what());
      return rc;
    }
    rc.emplace();
    rc->epoch = s.epoch + 1;
    rc->procs = it->second;
    rc->received_at_us = now_us();
    rc->next = std::move(next);
  }
  rc->current = s.slots;
  rc->cpus_per_rank = s.cpus_per_rank;
  rc->migrate_calls = s.migrate_calls;
  rc->signature = signature_of(s);
  return rc;
}

// The program's own path and arguments, for the new ranks.
std::string self_exe() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
}
std::vector<std::string> self_args() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> args;
  std::size_t pos = 0;
  while (pos < all.size()) {
    const auto end = all.find('\0', pos);
    args.push_back(all.substr(pos, end - pos));
    if (end == std::string::npos) break;
    pos = end + 1;
  }
  if (!args.empty()) args.erase(args.begin());  // argv[0]
  return args;
}

struct times {
  std::int64_t start_us = 0, spawn_us = 0, data_us = 0;
};

// ---- the wire-up of new ranks, bounded ------------------------------------
// MPI_Comm_spawn returns once the new ranks are through MPI_Init; they may
// still stall before they can take part (a first TCP connection between an
// old and a new rank that is never answered, a rank that never reaches its
// first MPI_Migrate). Nothing in MPI bounds that, so before any blocking
// call spans old and new ranks, every new rank says it is ready to every old
// rank with small non-blocking messages (which also opens each old-new
// connection), and the old ranks wait for that with a deadline. Past it they
// give the expand up, tell the new ranks to leave, and go on as they were.
constexpr int k_tag_ready = 0x41515301;     // new rank -> each old rank
constexpr int k_tag_decision = 0x41515302;  // old leader -> each new rank
constexpr int k_tag_bridge = 0x41515303;    // MPI_Intercomm_create of a background expand
// k_bridge: the new ranks were spawned by the leader alone (in the
// background); old and new ranks meet through MPI_Intercomm_create.
const int k_go = 1, k_abandon = 0, k_bridge = 2;  // static: they outlive their sends

std::chrono::milliseconds expand_timeout() {
  // $AQS_EXPAND_TIMEOUT: seconds (fractions allowed), default 20.
  if (const char* v = std::getenv("AQS_EXPAND_TIMEOUT"); v != nullptr && *v) {
    char* end = nullptr;
    const double sec = std::strtod(v, &end);
    if (end != v && *end == '\0' && sec > 0 && sec < 86400) {
      return std::chrono::milliseconds(static_cast<std::int64_t>(sec * 1000.0));
    }
    static bool said = false;
    if (!said) std::fprintf(stderr, "aqs: AQS_EXPAND_TIMEOUT=%s is not a number of seconds; using 20\n", v);
    said = true;
  }
  return std::chrono::seconds(20);
}

std::string seconds_text(std::chrono::milliseconds d) {
  char b[32];
  std::snprintf(b, sizeof b, "%g s", static_cast<double>(d.count()) / 1000.0);
  return b;
}

// On every old rank (members of `comm`, `inter` the spawn's intercommunicator):
// whether every new rank said it is ready in time. Collective over comm.
bool new_ranks_ready(MPI_Comm comm, MPI_Comm inter, std::chrono::milliseconds timeout) {
  int m = 0;
  MPI_Comm_remote_size(inter, &m);
  std::vector<int> flags(static_cast<std::size_t>(m));
  std::vector<MPI_Request> reqs(static_cast<std::size_t>(m), MPI_REQUEST_NULL);
  for (int r = 0; r < m; ++r) {
    mpi_check(MPI_Irecv(&flags[static_cast<std::size_t>(r)], 1, MPI_INT, r, k_tag_ready, inter,
                        &reqs[static_cast<std::size_t>(r)]),
              "MPI_Irecv");
  }
  const auto until = std::chrono::steady_clock::now() + timeout;
  int done = 0;
  for (;;) {
    mpi_check(MPI_Testall(m, reqs.data(), &done, MPI_STATUSES_IGNORE), "MPI_Testall");
    if (done || std::chrono::steady_clock::now() >= until) break;
    ::usleep(200);
  }
  if (!done) {
    // The receives still open are withdrawn; a late "ready" finds none.
    for (auto& q : reqs) {
      if (q == MPI_REQUEST_NULL) continue;
      MPI_Cancel(&q);
      MPI_Wait(&q, MPI_STATUS_IGNORE);
    }
  }
  int all = done ? 1 : 0;
  mpi_check(MPI_Allreduce(MPI_IN_PLACE, &all, 1, MPI_INT, MPI_MIN, comm), "MPI_Allreduce");
  return all == 1;
}

// The old leader tells every new rank whether the expand goes on. A stalled
// new rank gets its answer when it wakes: the sends of an abandon are
// returned, to be completed later (progress_abandoned); those of a go, to
// ranks that are there, are let go.
std::vector<MPI_Request> tell_new_ranks(MPI_Comm inter, bool go) {
  int m = 0;
  MPI_Comm_remote_size(inter, &m);
  std::vector<MPI_Request> pending;
  for (int r = 0; r < m; ++r) {
    MPI_Request q = MPI_REQUEST_NULL;
    if (MPI_Isend(go ? &k_go : &k_abandon, 1, MPI_INT, r, k_tag_decision, inter, &q) != MPI_SUCCESS) continue;
    if (go) {
      MPI_Request_free(&q);
    } else {
      pending.push_back(q);
    }
  }
  return pending;
}

// Runs MPI_Comm_spawn_multiple rooted at rank 0 of `comm`: one new rank per
// slot in `slots` (indices in rc.next), each on its slot's host, running
// this program with its arguments. Returns whether it worked (else `why`).
bool spawn_ranks(const reconfiguration& rc, const std::vector<int>& slots, MPI_Comm comm, MPI_Comm* inter,
                 std::string& why) {
  const int m = static_cast<int>(slots.size());
  const std::string exe = self_exe();
  std::vector<std::string> args = self_args();
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<char*> commands(static_cast<std::size_t>(m), const_cast<char*>(exe.c_str()));
  std::vector<char**> argvs(static_cast<std::size_t>(m), argv.data());
  std::vector<int> maxprocs(static_cast<std::size_t>(m), 1);
  std::vector<MPI_Info> infos(static_cast<std::size_t>(m));
  for (int j = 0; j < m; ++j) {
    MPI_Info_create(&infos[static_cast<std::size_t>(j)]);
    const slot& sl = rc.next[static_cast<std::size_t>(slots[static_cast<std::size_t>(j)])];
    MPI_Info_set(infos[static_cast<std::size_t>(j)], "host", sl.host.c_str());
  }
  std::vector<int> errcodes(static_cast<std::size_t>(m), MPI_SUCCESS);
  int ok = 1;
  if (std::getenv("AQS_TEST_SPAWN_FAIL") != nullptr) {
    // Testing aid: behave as if MPI_Comm_spawn had failed.
    ok = 0;
    why = "MPI_Comm_spawn failed: AQS_TEST_SPAWN_FAIL is set";
  } else {
    AQS_DEBUG_LOG("map %lld: spawning %d rank(s)", static_cast<long long>(rc.epoch), m);
    const int rc2 = MPI_Comm_spawn_multiple(m, commands.data(), argvs.data(), maxprocs.data(), infos.data(), 0,
                                            comm, inter, errcodes.data());
    if (rc2 != MPI_SUCCESS) {
      char msg[MPI_MAX_ERROR_STRING];
      int len = 0;
      MPI_Error_string(rc2, msg, &len);
      ok = 0;
      why = "MPI_Comm_spawn failed: " + std::string(msg, static_cast<std::size_t>(len));
    }
    for (int e : errcodes) {
      if (e != MPI_SUCCESS && ok) {
        ok = 0;
        why = "MPI_Comm_spawn could not start every new rank";
      }
    }
  }
  for (auto& i : infos) MPI_Info_free(&i);
  return ok != 0;
}

// Starts one new rank per slot in `slots` (indices in rc.next), each on its
// slot's host, and merges them after the members of `comm` (collective over
// comm). Returns the merged communicator, or MPI_COMM_NULL after telling why
// in `why`.
MPI_Comm spawn_new_ranks(shim& s, const reconfiguration& rc, const std::vector<int>& slots, MPI_Comm comm,
                         std::string& why) {
  const int m = static_cast<int>(slots.size());
  MPI_Comm inter = MPI_COMM_NULL;
  const int ok = spawn_ranks(rc, slots, comm, &inter, why) ? 1 : 0;
  int all_ok = ok;
  MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, comm);
  if (!all_ok) {
    if (why.empty()) why = "MPI_Comm_spawn failed on another rank";
    if (inter != MPI_COMM_NULL) MPI_Comm_free(&inter);
    return MPI_COMM_NULL;
  }
  MPI_Comm_set_errhandler(inter, MPI_ERRORS_RETURN);
  const auto timeout = expand_timeout();
  AQS_DEBUG_LOG("map %lld: waiting up to %lld ms for %d new rank(s) to wire up", static_cast<long long>(rc.epoch),
                static_cast<long long>(timeout.count()), m);
  const bool ready = new_ranks_ready(comm, inter, timeout);
  int me = 0;
  MPI_Comm_rank(comm, &me);
  std::vector<MPI_Request> told;
  if (me == 0) told = tell_new_ranks(inter, ready);
  if (!ready) {
    // The new ranks leave by themselves once they hear it (MPI_Finalize, exit
    // 0): mpirun sees a child job end normally. No collective spans them.
    why = "new ranks did not reach MPI_Migrate within " + seconds_text(timeout) + " of their spawn";
    AQS_DEBUG_LOG("map %lld: %s; abandoning the expand", static_cast<long long>(rc.epoch), why.c_str());
    s.abandoned.push_back({inter, std::move(told)});
    return MPI_COMM_NULL;
  }
  MPI_Comm merged = MPI_COMM_NULL;
  mpi_check(MPI_Intercomm_merge(inter, 0, &merged), "MPI_Intercomm_merge");
  MPI_Comm_free(&inter);
  MPI_Comm_set_errhandler(merged, MPI_ERRORS_RETURN);
  AQS_DEBUG_LOG("map %lld: spawned rank(s) merged", static_cast<long long>(rc.epoch));
  if (std::getenv("AQS_TEST_CRASH_IN_MIGRATE") != nullptr && s.rank == static_cast<int>(s.slots.size()) - 1 &&
      s.rank >= 0) {
    // Testing aid: the app dies mid-change, with the new ranks already joined.
    std::raise(SIGKILL);
  }
  return merged;
}

// A rank leaving the active set lets go of the application's state (the
// arrays keep their handles, empty) and of the channel to aqsd.
void prepare_to_park(shim& s) {
  for (auto& st : s.states) {
    if (st.release) st.release(st.user);
  }
  for (auto& a : s.arrays) {
    std::vector<std::byte>().swap(a->storage);
    a->begin = a->end = 0;
  }
  s.control.reset();
  s.rank = -1;
}

[[noreturn]] void finish_parked() {
  MPI_Finalize();
  std::exit(0);
}

// Moves the state over `c` (old ranks first, new ranks after them), switches
// to the new active communicator, pins, parks the ranks that leave, and
// acknowledges. `merged`: c was made for this change and is freed here.
int switch_to(shim& s, const reconfiguration& rc, const migration_plan& plan, MPI_Comm c, bool merged, times t) {
  const int k = static_cast<int>(rc.current.size());
  int me = 0;
  MPI_Comm_rank(c, &me);
  std::vector<int> old_owners(static_cast<std::size_t>(k));
  for (int r = 0; r < k; ++r) old_owners[static_cast<std::size_t>(r)] = r;
  std::vector<int> new_owners(rc.next.size(), -1);
  for (int r = 0; r < k; ++r) {
    if (plan.assigned[static_cast<std::size_t>(r)] >= 0) {
      new_owners[static_cast<std::size_t>(plan.assigned[static_cast<std::size_t>(r)])] = r;
    }
  }
  for (std::size_t j = 0; j < rc.joiners.size(); ++j) {
    new_owners[static_cast<std::size_t>(rc.joiners[j])] = k + static_cast<int>(j);
  }
  const auto mine = std::find(new_owners.begin(), new_owners.end(), me);
  const int my_index = mine == new_owners.end() ? -1 : static_cast<int>(mine - new_owners.begin());
  const bool old_rank = me < k;
  const std::uint64_t nnew = rc.next.size();
  AQS_DEBUG_LOG("map %lld: moving data, rank %d of the change, new rank %d", static_cast<long long>(rc.epoch), me,
                my_index);

  const std::int64_t t_data = now_us();
  for (auto& a : s.arrays) {
    if (!a->live) continue;
    std::span<const std::byte> old_block;
    if (old_rank) old_block = std::span<const std::byte>(a->block(), a->block_bytes());
    index_range r{0, 0};
    if (my_index >= 0) r = block_of(a->n, nnew, static_cast<std::uint64_t>(my_index));
    std::vector<std::byte> storage((2 * a->ghost + r.size()) * a->elem_size);
    redistribute_blocks_into(c, a->n, a->elem_size, old_owners, new_owners, old_block,
                             std::span<std::byte>(storage.data() + a->ghost * a->elem_size, r.size() * a->elem_size));
    a->storage = std::move(storage);
    a->begin = r.begin;
    a->end = r.end;
  }
  for (auto& st : s.states) {
    std::vector<std::vector<std::byte>> out;
    if (old_rank) {
      for (std::uint64_t j = 0; j < nnew; ++j) {
        aqs_buffer b;
        if (st.pack) st.pack(st.user, static_cast<int>(j), static_cast<int>(nnew), &b);
        out.push_back(std::move(b.bytes));
      }
    }
    auto in = exchange_blobs(c, old_owners, new_owners, std::move(out));
    if (my_index >= 0 && st.unpack) {
      for (std::size_t i = 0; i < in.size(); ++i) {
        st.unpack(st.user, static_cast<int>(i), k, in[i].data(), in[i].size());
      }
    }
  }
  for (auto& r : s.replicated) {
    if (r.len > 0) mpi_check(MPI_Bcast(r.data, static_cast<int>(r.len), MPI_BYTE, 0, c), "MPI_Bcast");
  }
  t.data_us = now_us() - t_data;

  // Where the ranks that leave wait: in the new leader's pool, which the old
  // leader hands its parked ranks to when leadership moves.
  const bool someone_leaves = std::count(plan.assigned.begin(), plan.assigned.end(), -1) > 0;
  const bool leader_moves = new_owners[0] != 0;
  std::string park_address;
  if (someone_leaves || leader_moves) {
    std::vector<std::byte> buf;
    if (me == new_owners[0]) {
      const std::string a = s.pool.address();
      buf.assign(reinterpret_cast<const std::byte*>(a.data()), reinterpret_cast<const std::byte*>(a.data()) + a.size());
    }
    bcast_bytes(buf, new_owners[0], c);
    park_address.assign(reinterpret_cast<const char*>(buf.data()), buf.size());
  }
  if (leader_moves && me == 0) s.pool.move_all(park_address);

  MPI_Comm next = MPI_COMM_NULL;
  mpi_check(MPI_Comm_split(c, my_index >= 0 ? 0 : MPI_UNDEFINED, my_index, &next), "MPI_Comm_split");
  if (merged) MPI_Comm_free(&c);
  if (s.active != MPI_COMM_NULL) MPI_Comm_free(&s.active);
  s.epoch = rc.epoch;
  AQS_DEBUG_LOG("map %lld: switched, rank %d", static_cast<long long>(rc.epoch), my_index);
  if (my_index < 0) return park(park_address);

  s.active = next;
  MPI_Comm_set_errhandler(s.active, MPI_ERRORS_RETURN);
  s.rank = my_index;
  s.slots = rc.next;
  s.map_width = std::max(s.map_width, rc.procs.size());
  s.migrate_calls = std::max(s.migrate_calls, rc.migrate_calls);
  s.cpus_per_rank = rc.cpus_per_rank;
  pin_process_to(cpus_of(rc.next[static_cast<std::size_t>(my_index)]));

  const std::int64_t end = now_us();
  s.last.epoch = rc.epoch;
  s.last.wait_ms = static_cast<double>(std::max<std::int64_t>(0, t.start_us - rc.received_at_us)) / 1000.0;
  s.last.spawn_ms = static_cast<double>(t.spawn_us) / 1000.0;
  s.last.data_ms = static_cast<double>(t.data_us) / 1000.0;
  s.last.total_ms = static_cast<double>(std::max<std::int64_t>(0, end - rc.received_at_us)) / 1000.0;

  // The leader (rank 0) speaks for the job; leadership may have moved.
  if (s.rank != 0) {
    s.control.reset();
    return AQS_SUCCESS;
  }
  if (!s.control && s.control_at) {
    try {
      // It says which maps the job has seen, as a reconnecting leader does.
      s.control = std::make_unique<control_channel>(*s.control_at, std::max(s.epoch, s.passed));
    } catch (const std::exception& ex) {
      std::fprintf(stderr, "aqs: the new leader cannot reach aqsd: %s\n", ex.what());
    }
  }
  if (s.control) {
    control_channel::ack_times at;
    at.received_at_us = rc.received_at_us;
    at.wait_us = std::max<std::int64_t>(0, t.start_us - rc.received_at_us);
    at.spawn_us = t.spawn_us;
    at.data_us = t.data_us;
    at.total_us = std::max<std::int64_t>(0, end - rc.received_at_us);
    try {
      s.control->acknowledge(rc.epoch, rc.procs, at);
    } catch (const std::exception& ex) {
      std::fprintf(stderr, "aqs: %s\n", ex.what());
    }
  }
  return AQS_SUCCESS;
}

// $AQS_CALL_BACK_PARKED=0 makes every expansion start new processes (to
// measure spawning, or should a call-back ever misbehave).
bool call_back_parked() {
  const char* v = std::getenv("AQS_CALL_BACK_PARKED");
  return v == nullptr || std::strcmp(v, "0") != 0;
}

// Brings in the ranks of the slots in plan.spawn, collectively over `cur`
// (the old active ranks, plus the parked ranks called back so far; it may be
// the communicator of a called-back rank's own join): first, one round each,
// parked ranks the leader (rank 0 of cur) calls back from its pool on the
// slot's host; then new processes for the slots left. rc.joiners grows with
// every slot filled, in join order. Returns the communicator of everyone, or
// MPI_COMM_NULL when spawning failed (why says why; `cur` then holds the old
// ranks and those called back).
MPI_Comm call_back_and_spawn(shim& s, reconfiguration& rc, const migration_plan& plan, MPI_Comm& cur,
                             std::string& why) {
  int me = 0;
  MPI_Comm_rank(cur, &me);
  auto filled = [&](int j) { return std::find(rc.joiners.begin(), rc.joiners.end(), j) != rc.joiners.end(); };
  for (;;) {
    int slot = -1;
    char port[MPI_MAX_PORT_NAME] = {};
    if (me == 0 && call_back_parked()) {
      s.pool.collect();
      for (int j : plan.spawn) {
        if (s.pool.parked() == 0) break;
        if (filled(j)) continue;
        mpi_check(MPI_Open_port(MPI_INFO_NULL, port), "MPI_Open_port");
        if (s.pool.call_back(rc.next[static_cast<std::size_t>(j)].host, port)) {
          slot = j;
          break;
        }
        MPI_Close_port(port);
      }
    }
    mpi_check(MPI_Bcast(&slot, 1, MPI_INT, 0, cur), "MPI_Bcast");
    AQS_DEBUG_LOG("map %lld: call-back round, rank %d, slot %d", static_cast<long long>(rc.epoch), me, slot);
    if (slot < 0) break;
    MPI_Comm inter = MPI_COMM_NULL, merged = MPI_COMM_NULL;
    mpi_check(MPI_Comm_accept(port, MPI_INFO_NULL, 0, cur, &inter), "MPI_Comm_accept");
    AQS_DEBUG_LOG("map %lld: accepted slot %d", static_cast<long long>(rc.epoch), slot);
    if (me == 0) MPI_Close_port(port);
    mpi_check(MPI_Intercomm_merge(inter, 0, &merged), "MPI_Intercomm_merge");
    MPI_Comm_free(&inter);
    MPI_Comm_set_errhandler(merged, MPI_ERRORS_RETURN);
    if (cur != s.active) MPI_Comm_free(&cur);
    cur = merged;
    rc.joiners.push_back(slot);
    // The rank called back learns where things stand.
    std::vector<std::byte> hdr = encode(rc);
    bcast_bytes(hdr, 0, cur);
  }
  std::vector<int> rest;
  for (int j : plan.spawn) {
    if (!filled(j)) rest.push_back(j);
  }
  if (rest.empty()) return cur;
  MPI_Comm c = spawn_new_ranks(s, rc, rest, cur, why);
  if (c == MPI_COMM_NULL) return c;
  rc.joiners.insert(rc.joiners.end(), rest.begin(), rest.end());
  // The new ranks wait in AQS_Init for this.
  std::vector<std::byte> hdr = encode(rc);
  bcast_bytes(hdr, 0, c);
  if (cur != s.active) MPI_Comm_free(&cur);
  return c;
}

// ---- expands prepared in the background ------------------------------------
// $AQS_BACKGROUND_SPAWN=0 makes every expansion spawn inside MPI_Migrate()
// (to measure the difference, or should the background spawn misbehave).
bool background_spawn_wanted() {
  const char* v = std::getenv("AQS_BACKGROUND_SPAWN");
  return v == nullptr || std::strcmp(v, "0") != 0;
}

// Leader: whether this expand's new ranks can be started while the
// application computes. Parked ranks are called back inside MPI_Migrate()
// as before (they are up already).
bool prepare_in_background(shim& s, const migration_plan& plan) {
  if (!s.thread_multiple || !background_spawn_wanted() || plan.changes_nothing || plan.spawn.empty()) return false;
  if (!call_back_parked()) return true;
  // The pool counts only the ranks it has taken in: without this, ranks a
  // shrink parked were never called back and piled up (405 processes after
  // 200 shrink/grow cycles of a 4-rank job).
  s.pool.collect();
  return s.pool.parked() == 0;
}

// Leader: claims are made, the map is the job's; starts the spawn thread.
void start_prepare(shim& s, reconfiguration rc, const migration_plan& plan) {
  auto p = std::make_unique<prepared_expand>();
  p->rc = std::move(rc);
  p->rc.joiners = plan.spawn;
  mpi_check(MPI_Comm_dup(MPI_COMM_SELF, &p->self), "MPI_Comm_dup");
  MPI_Comm_set_errhandler(p->self, MPI_ERRORS_RETURN);
  p->spawn_deadline = std::chrono::steady_clock::now() + expand_timeout();
  AQS_DEBUG_LOG("map %lld: preparing %zu new rank(s) in the background", static_cast<long long>(p->rc.epoch),
                plan.spawn.size());
  prepared_expand* raw = p.get();
  p->thread = std::thread([raw] {
    const std::int64_t t0 = now_us();
    raw->ok = spawn_ranks(raw->rc, raw->rc.joiners, raw->self, &raw->inter, raw->why);
    raw->spawn_us = now_us() - t0;
    if (!raw->ok && raw->inter != MPI_COMM_NULL) MPI_Comm_free(&raw->inter);
    raw->returned.store(true, std::memory_order_release);
  });
  s.preparing = std::move(p);
}

// Leader: a prepared expand whose thread has returned leaves nothing open
// but, if it spawned, its new ranks: they are told to leave.
void close_prepared(shim& s, prepared_expand& p) {
  if (p.thread.joinable()) p.thread.join();
  if (p.inter != MPI_COMM_NULL) {
    s.abandoned.push_back({p.inter, tell_new_ranks(p.inter, false)});
    p.inter = MPI_COMM_NULL;
  }
  if (p.self != MPI_COMM_NULL) MPI_Comm_free(&p.self);
}

// Leader: gives the expand under way up. The job goes on where it was: the
// other ranks never left their map; aqsd hears why and takes the processors
// back.
void give_up_prepared(shim& s, const std::string& why) {
  auto p = std::move(s.preparing);
  const std::int64_t epoch = p->rc.epoch;
  std::fprintf(stderr, "aqs: cannot apply map %lld: %s\n", static_cast<long long>(epoch), why.c_str());
  AQS_DEBUG_LOG("map %lld: %s; abandoning the expand", static_cast<long long>(epoch), why.c_str());
  s.passed = std::max(s.passed, epoch);
  if (s.control) {
    try {
      s.control->refuse(epoch, why);
    } catch (const std::exception& ex) {
      std::fprintf(stderr, "aqs: %s\n", ex.what());
    }
  }
  for (auto& q : p->ready_reqs) {
    if (q == MPI_REQUEST_NULL) continue;
    MPI_Cancel(&q);
    MPI_Wait(&q, MPI_STATUS_IGNORE);
  }
  if (p->returned.load(std::memory_order_acquire)) {
    close_prepared(s, *p);
  } else {
    // MPI_Comm_spawn cannot be interrupted: its thread is left to return
    // (a stopped new rank that wakes, say); its ranks then hear "abandon".
    s.stuck.push_back(std::move(p));
  }
}

// Leader: spawns given up whose thread has returned since.
void reap_stuck(shim& s) {
  for (auto it = s.stuck.begin(); it != s.stuck.end();) {
    if ((*it)->returned.load(std::memory_order_acquire)) {
      close_prepared(s, **it);
      it = s.stuck.erase(it);
    } else {
      ++it;
    }
  }
}

// Leader, at each MPI_Migrate() while an expand is prepared, without
// waiting: true when its new ranks are all up and ready, so the old ranks
// may switch now. Past a deadline the expand is given up.
bool prepared_ready(shim& s) {
  prepared_expand& p = *s.preparing;
  const auto now = std::chrono::steady_clock::now();
  if (!p.returned.load(std::memory_order_acquire)) {
    if (now >= p.spawn_deadline) {
      give_up_prepared(s, "MPI_Comm_spawn did not return within " + seconds_text(expand_timeout()));
    }
    return false;
  }
  if (p.thread.joinable()) p.thread.join();
  if (!p.ok) {
    give_up_prepared(s, p.why);
    return false;
  }
  if (!p.listening) {
    int m = 0;
    MPI_Comm_set_errhandler(p.inter, MPI_ERRORS_RETURN);
    MPI_Comm_remote_size(p.inter, &m);
    p.ready_flags.assign(static_cast<std::size_t>(m), 0);
    p.ready_reqs.assign(static_cast<std::size_t>(m), MPI_REQUEST_NULL);
    for (int r = 0; r < m; ++r) {
      mpi_check(MPI_Irecv(&p.ready_flags[static_cast<std::size_t>(r)], 1, MPI_INT, r, k_tag_ready, p.inter,
                          &p.ready_reqs[static_cast<std::size_t>(r)]),
                "MPI_Irecv");
    }
    p.ready_deadline = now + expand_timeout();
    p.listening = true;
    AQS_DEBUG_LOG("map %lld: %d new rank(s) spawned in %.1f ms; waiting for them", static_cast<long long>(p.rc.epoch),
                  m, static_cast<double>(p.spawn_us) / 1000.0);
  }
  int done = 0;
  mpi_check(MPI_Testall(static_cast<int>(p.ready_reqs.size()), p.ready_reqs.data(), &done, MPI_STATUSES_IGNORE),
            "MPI_Testall");
  if (done) return true;
  if (now >= p.ready_deadline) {
    give_up_prepared(s, "new ranks did not reach MPI_Migrate within " + seconds_text(expand_timeout()) +
                            " of their spawn");
  }
  return false;
}

// Every old rank: the switch of an expand prepared in the background. The
// new ranks are up and waiting; the old ranks meet them through the leader
// (MPI_Intercomm_create), check every old-new connection with a deadline,
// merge and move the data.
int switch_prepared(shim& s, reconfiguration& rc, const migration_plan& plan, times t) {
  MPI_Comm bridge = MPI_COMM_NULL;  // leader + new ranks
  if (s.rank == 0) {
    auto p = std::move(s.preparing);
    t.spawn_us = p->spawn_us;
    for (int r = 0; r < static_cast<int>(p->ready_reqs.size()); ++r) {
      mpi_check(MPI_Send(&k_bridge, 1, MPI_INT, r, k_tag_decision, p->inter), "MPI_Send");
    }
    mpi_check(MPI_Intercomm_merge(p->inter, 0, &bridge), "MPI_Intercomm_merge");
    MPI_Comm_free(&p->inter);
    MPI_Comm_free(&p->self);
  }
  MPI_Bcast(&t.spawn_us, 1, MPI_INT64_T, 0, s.active);
  MPI_Comm inter = MPI_COMM_NULL;
  mpi_check(MPI_Intercomm_create(s.active, 0, bridge, 1, k_tag_bridge, &inter), "MPI_Intercomm_create");
  if (bridge != MPI_COMM_NULL) MPI_Comm_free(&bridge);
  MPI_Comm_set_errhandler(inter, MPI_ERRORS_RETURN);
  AQS_DEBUG_LOG("map %lld: bridged to the new ranks", static_cast<long long>(rc.epoch));
  const bool ready = new_ranks_ready(s.active, inter, expand_timeout());
  AQS_DEBUG_LOG("map %lld: every old-new pair connected: %d", static_cast<long long>(rc.epoch), ready ? 1 : 0);
  std::vector<MPI_Request> told;
  if (s.rank == 0) told = tell_new_ranks(inter, ready);
  if (!ready) {
    const std::string why =
        "new ranks could not reach every running rank within " + seconds_text(expand_timeout());
    s.abandoned.push_back({inter, std::move(told)});
    if (s.rank == 0) {
      std::fprintf(stderr, "aqs: cannot apply map %lld: %s\n", static_cast<long long>(rc.epoch), why.c_str());
      s.passed = std::max(s.passed, rc.epoch);
      if (s.control) s.control->refuse(rc.epoch, why);
    }
    return AQS_SUCCESS;
  }
  MPI_Comm merged = MPI_COMM_NULL;
  mpi_check(MPI_Intercomm_merge(inter, 0, &merged), "MPI_Intercomm_merge");
  MPI_Comm_free(&inter);
  MPI_Comm_set_errhandler(merged, MPI_ERRORS_RETURN);
  if (std::getenv("AQS_TEST_CRASH_IN_MIGRATE") != nullptr && s.rank == static_cast<int>(s.slots.size()) - 1 &&
      s.rank >= 0) {
    // Testing aid: the app dies mid-change, with the new ranks already joined.
    std::raise(SIGKILL);
  }
  std::vector<std::byte> hdr = encode(rc);
  bcast_bytes(hdr, 0, merged);
  return switch_to(s, rc, plan, merged, true, t);
}

// An expansion, from the call-backs to the switch, on every rank taking part
// (old active ranks, and a parked rank from its call-back on).
int expand_and_switch(shim& s, reconfiguration& rc, const migration_plan& plan, MPI_Comm cur, times t) {
  std::string why;
  const std::int64_t t_spawn = now_us();
  MPI_Comm c = call_back_and_spawn(s, rc, plan, cur, why);
  t.spawn_us = now_us() - t_spawn;
  if (c != MPI_COMM_NULL) return switch_to(s, rc, plan, c, true, t);

  // The job goes on where it was; aqsd gives the processors back. Ranks
  // called back for this change park again.
  s.epoch = rc.epoch;
  const int k = static_cast<int>(rc.current.size());
  int me = 0, size = 0;
  MPI_Comm_rank(cur, &me);
  MPI_Comm_size(cur, &size);
  std::string address;
  if (size > k) {
    std::vector<std::byte> buf;
    if (me == 0) {
      const std::string a = s.pool.address();
      buf.assign(reinterpret_cast<const std::byte*>(a.data()), reinterpret_cast<const std::byte*>(a.data()) + a.size());
    }
    bcast_bytes(buf, 0, cur);
    address.assign(reinterpret_cast<const char*>(buf.data()), buf.size());
  }
  if (cur != s.active) MPI_Comm_free(&cur);
  if (me >= k) return park(address);
  if (s.rank == 0) {
    std::fprintf(stderr, "aqs: cannot apply map %lld: %s\n", static_cast<long long>(rc.epoch), why.c_str());
    if (s.control) s.control->refuse(rc.epoch, why);
  }
  return fail(AQS_ERR_SPAWN, why);
}

}  // namespace

void progress_abandoned(shim& s, std::chrono::milliseconds bound) {
  const auto until = std::chrono::steady_clock::now() + bound;
  for (;;) {
    std::size_t open = 0;
    for (auto& a : s.abandoned) {
      if (a.decisions.empty()) continue;
      int done = 0;
      MPI_Testall(static_cast<int>(a.decisions.size()), a.decisions.data(), &done, MPI_STATUSES_IGNORE);
      if (done) {
        a.decisions.clear();
      } else {
        ++open;
      }
    }
    if (open == 0) return;
    if (std::chrono::steady_clock::now() >= until) {
      if (bound.count() > 0) {
        std::fprintf(stderr,
                     "aqs: new ranks of %zu abandoned expand(s) never answered within %lld ms; mpirun may wait for "
                     "them\n",
                     open, static_cast<long long>(bound.count()));
      }
      return;
    }
    ::usleep(1000);
  }
}

void settle_background(shim& s, std::chrono::milliseconds bound) {
  if (s.preparing) give_up_prepared(s, "the job ended before its new ranks joined");
  const auto until = std::chrono::steady_clock::now() + bound;
  for (;;) {
    reap_stuck(s);
    if (s.stuck.empty()) return;
    if (std::chrono::steady_clock::now() >= until) break;
    ::usleep(2000);
  }
  std::fprintf(stderr, "aqs: %zu spawn(s) given up never returned within %lld ms; mpirun may wait for them\n",
               s.stuck.size(), static_cast<long long>(bound.count()));
  // The threads still reference their expands: those are let go, not freed.
  for (auto& p : s.stuck) {
    p->thread.detach();
    static_cast<void>(p.release());
  }
  s.stuck.clear();
}

std::chrono::milliseconds abandoned_wait_bound() { return std::max(3 * expand_timeout(), std::chrono::milliseconds(60'000)); }

int migrate() {
  shim& s = the_shim();
  ++s.migrate_calls;
  if (!s.abandoned.empty()) progress_abandoned(s);
  try {
    std::optional<reconfiguration> rc;
    // What the leader decided: the map's epoch (0: none now) and whether its
    // new ranks were prepared in the background (1) or not (0).
    std::int64_t decision[2] = {0, 0};
    if (s.rank == 0) {
      if (!s.stuck.empty()) reap_stuck(s);
      if (s.preparing) {
        if (prepared_ready(s)) {
          rc = s.preparing->rc;
          rc->migrate_calls = s.migrate_calls;  // the leader's count now, for ranks that join
          decision[0] = rc->epoch;
          decision[1] = 1;
        }
      } else {
        rc = leader_decision(s);
        if (rc) {
          const migration_plan plan = plan_migration(rc->current, rc->next);
          if (prepare_in_background(s, plan)) {
            start_prepare(s, std::move(*rc), plan);
            rc.reset();
          } else {
            decision[0] = rc->epoch;
          }
        }
      }
    }
    // The no-change path: one broadcast of two integers.
    mpi_check(MPI_Bcast(decision, 2, MPI_INT64_T, 0, s.active), "MPI_Bcast");
    if (decision[0] == 0) return AQS_SUCCESS;

    times t;
    t.start_us = now_us();
    std::vector<std::byte> buf;
    if (s.rank == 0) buf = encode(*rc);
    bcast_bytes(buf, 0, s.active);
    if (s.rank != 0) rc = decode(buf);
    AQS_DEBUG_LOG("map %lld (%s): rank %d of %zu begins", static_cast<long long>(rc->epoch), rc->procs.c_str(), s.rank,
                  rc->current.size());

    const migration_plan plan = plan_migration(rc->current, rc->next);
    if (decision[1] == 1) return switch_prepared(s, *rc, plan, t);
    if (plan.changes_nothing) {
      s.epoch = rc->epoch;
      if (s.rank == 0 && s.control) {
        control_channel::ack_times at;
        at.received_at_us = rc->received_at_us;
        at.total_us = std::max<std::int64_t>(0, now_us() - rc->received_at_us);
        s.control->acknowledge(rc->epoch, rc->procs, at);
      }
      return AQS_SUCCESS;
    }
    if (plan.spawn.empty()) return switch_to(s, *rc, plan, s.active, false, t);
    return expand_and_switch(s, *rc, plan, s.active, t);
  } catch (const std::exception& ex) {
    return fail(AQS_ERR_MPI, ex.what());
  }
}

int park(std::string address) {
  shim& s = the_shim();
  prepare_to_park(s);
  const auto port = wait_parked(std::move(address));
  if (!port) finish_parked();
  // Called back: the running ranks accept on `port`.
  try {
    times t;
    t.start_us = now_us();
    MPI_Comm inter = MPI_COMM_NULL, cur = MPI_COMM_NULL;
    AQS_DEBUG_LOG("called back: connecting to %s", port->c_str());
    mpi_check(MPI_Comm_connect(port->c_str(), MPI_INFO_NULL, 0, MPI_COMM_SELF, &inter), "MPI_Comm_connect");
    AQS_DEBUG_LOG("called back: connected");
    mpi_check(MPI_Intercomm_merge(inter, 1, &cur), "MPI_Intercomm_merge");
    MPI_Comm_free(&inter);
    MPI_Comm_set_errhandler(cur, MPI_ERRORS_RETURN);
    std::vector<std::byte> hdr;
    bcast_bytes(hdr, 0, cur);
    reconfiguration rc = decode(hdr);
    const migration_plan plan = plan_migration(rc.current, rc.next);
    return expand_and_switch(s, rc, plan, cur, t);
  } catch (const std::exception& ex) {
    // The others are inside the same collective change: nothing to go back to.
    std::fprintf(stderr, "aqs: a parked rank could not rejoin: %s\n", ex.what());
    MPI_Abort(MPI_COMM_WORLD, 70);
  }
  return AQS_ERR_MPI;
}

void join_from_parent(MPI_Comm parent) {
  shim& s = the_shim();
  if (const char* v = std::getenv("AQS_TEST_JOIN_STALL_S"); v != nullptr && *v) {
    // Testing aid: a new rank that is up (MPI_Init done) but stalls before
    // it wires up to the running ranks, as one whose first connection is
    // never answered does.
    AQS_DEBUG_LOG("spawned: stalling %s s before wire-up (AQS_TEST_JOIN_STALL_S)", v);
    ::sleep(static_cast<unsigned>(std::strtoul(v, nullptr, 10)));
  }
  // The old ranks are told this rank is ready at its first MPI_Migrate(),
  // once the app has registered its state: until then they wait for it with
  // a deadline, not inside a collective.
  MPI_Comm_set_errhandler(parent, MPI_ERRORS_RETURN);
  s.join_parent = parent;
  s.joining = true;
  s.adaptive = true;
  s.control_at = control_address_from_env();
  try {
    if (const char* t = std::getenv("AQS_TEST_MAPS"); t && *t) s.scripted = parse_scripted_maps(t);
  } catch (const std::exception&) {
    s.scripted.clear();
  }
  s.rank = -1;
}

namespace {

// A new rank: says it is ready to every old rank, and learns whether the
// expand goes on. Past the old ranks' deadline it does not: this rank leaves
// (MPI_Finalize, exit 0) and its MPI_Migrate() never returns.
// Returns the decision (k_go or k_bridge) heard from rank 0 of `to`.
int wire_up_or_leave(shim& s, MPI_Comm to) {
  int k = 0;
  MPI_Comm_remote_size(to, &k);
  static const int ready = 1;
  for (int r = 0; r < k; ++r) {
    MPI_Request q = MPI_REQUEST_NULL;
    mpi_check(MPI_Isend(&ready, 1, MPI_INT, r, k_tag_ready, to, &q), "MPI_Isend");
    MPI_Request_free(&q);
  }
  // The answer may take as long as the application's next MPI_Migrate():
  // wait for it asleep, not in a blocking receive (OpenMPI spins there, on
  // the cpus the running ranks compute on).
  int go = 0, done = 0;
  MPI_Request q = MPI_REQUEST_NULL;
  mpi_check(MPI_Irecv(&go, 1, MPI_INT, 0, k_tag_decision, to, &q), "MPI_Irecv");
  for (;;) {
    mpi_check(MPI_Test(&q, &done, MPI_STATUS_IGNORE), "MPI_Test");
    if (done) break;
    ::usleep(500);
  }
  if (go == k_go || go == k_bridge) return go;
  AQS_DEBUG_LOG("spawned: the running ranks gave the expand up; leaving");
  s.joining = false;
  s.control_at.reset();
  MPI_Finalize();
  std::exit(0);
}

}  // namespace

int complete_join() {
  shim& s = the_shim();
  try {
    MPI_Comm c = MPI_COMM_NULL;
    if (wire_up_or_leave(s, s.join_parent) == k_bridge) {
      // Spawned by the leader alone, in the background: meet every old rank
      // through it, then say ready to each (which opens the connections)
      // and hear whether the expand goes on.
      MPI_Comm bridge = MPI_COMM_NULL, inter = MPI_COMM_NULL;
      mpi_check(MPI_Intercomm_merge(s.join_parent, 1, &bridge), "MPI_Intercomm_merge");
      mpi_check(MPI_Intercomm_create(MPI_COMM_WORLD, 0, bridge, 0, k_tag_bridge, &inter), "MPI_Intercomm_create");
      MPI_Comm_free(&bridge);
      MPI_Comm_set_errhandler(inter, MPI_ERRORS_RETURN);
      wire_up_or_leave(s, inter);
      mpi_check(MPI_Intercomm_merge(inter, 1, &c), "MPI_Intercomm_merge");
      MPI_Comm_free(&inter);
    } else {
      mpi_check(MPI_Intercomm_merge(s.join_parent, 1, &c), "MPI_Intercomm_merge");
    }
    MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
    std::vector<std::byte> hdr;
    bcast_bytes(hdr, 0, c);
    s.pending_join = decode(hdr);
    AQS_DEBUG_LOG("map %lld: spawned, joining", static_cast<long long>(s.pending_join->epoch));
    s.join_comm = c;
    s.epoch = s.pending_join->epoch - 1;
    s.migrate_calls = s.pending_join->migrate_calls;
  } catch (const std::exception& ex) {
    return fail(AQS_ERR_MPI, ex.what());
  }
  const reconfiguration rc = *s.pending_join;
  if (signature_of(s) != rc.signature) {
    std::fprintf(stderr,
                 "aqs: a new rank registered different state than the running ranks (arrays, states or "
                 "replicated values differ in number or size); aborting the job\n");
    MPI_Abort(s.join_comm, 70);
  }
  try {
    const migration_plan plan = plan_migration(rc.current, rc.next);
    times t;
    t.start_us = now_us();
    MPI_Comm c = s.join_comm;
    s.join_comm = MPI_COMM_NULL;
    s.joining = false;
    s.pending_join.reset();
    return switch_to(s, rc, plan, c, true, t);
  } catch (const std::exception& ex) {
    return fail(AQS_ERR_MPI, ex.what());
  }
}

}  // namespace aqs::runtime
