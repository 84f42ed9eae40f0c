// shim: the C API of <aqs/adaptive.h>: start and end, registration, queries.
#include "shim.hpp"

#include <csignal>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <stdexcept>

#include <unistd.h>

#include "pinning.hpp"
#include "protocol/messages.hpp"

namespace aqs::runtime {

shim& the_shim() {
  static shim s;
  return s;
}

int fail(int code, std::string what) {
  the_shim().error = std::move(what);
  return code;
}

namespace {

// Testing aid ($AQS_TEST_STOP_SPAWNED=FILE): rank 0 of a job an expansion
// spawned writes its pid to FILE and stops itself (SIGSTOP) before the
// program's main(), so before MPI_Init: the parent's MPI_Comm_spawn cannot
// return until someone sends it SIGCONT. OpenMPI's launch gives the first
// job the local job id 1 ($OMPI_MCA_ess_base_jobid, low 16 bits), spawns 2
// and up.
__attribute__((constructor)) void stop_spawned_for_test() {
  const char* file = std::getenv("AQS_TEST_STOP_SPAWNED");
  const char* job = std::getenv("OMPI_MCA_ess_base_jobid");
  const char* rank = std::getenv("PMIX_RANK");
  if (file == nullptr || !*file || job == nullptr || rank == nullptr || std::strcmp(rank, "0") != 0) return;
  if ((std::strtoull(job, nullptr, 10) & 0xffffu) < 2) return;
  std::ofstream(file) << ::getpid() << "\n";
  std::raise(SIGSTOP);
}

}  // namespace

std::vector<std::uint64_t> signature_of(const shim& s) {
  std::vector<std::uint64_t> sig;
  for (const auto& a : s.arrays) {
    if (!a->live) continue;
    sig.push_back(a->n);
    sig.push_back(a->elem_size);
  }
  sig.push_back(s.states.size());
  for (const auto& r : s.replicated) sig.push_back(r.len);
  return sig;
}

std::vector<std::pair<std::int64_t, std::string>> parse_scripted_maps(const char* text) {
  std::vector<std::pair<std::int64_t, std::string>> out;
  std::string all(text);
  std::size_t pos = 0;
  while (pos < all.size()) {
    auto comma = all.find(',', pos);
    if (comma == std::string::npos) comma = all.size();
    const std::string item = all.substr(pos, comma - pos);
    const auto colon = item.find(':');
    if (colon == std::string::npos) throw std::invalid_argument("bad AQS_TEST_MAPS entry '" + item + "'");
    char* end = nullptr;
    const long long call = std::strtoll(item.c_str(), &end, 10);
    if (end != item.c_str() + colon || call < 1) throw std::invalid_argument("bad AQS_TEST_MAPS entry '" + item + "'");
    const std::string map = item.substr(colon + 1);
    parse_map(map);  // throws on a bad map
    out.emplace_back(call, map);
    pos = comma + 1;
  }
  return out;
}

std::vector<slot> ranks_of_map(const std::string& map, const std::vector<int>& cpus,
                               const std::vector<std::string>& hosts, int cpus_per_rank) {
  const std::vector<int> procs = parse_map(map);
  std::vector<slot> each;
  try {
    each = make_slots(procs, cpus, hosts, local_host_name(), online_cpus());
  } catch (const std::invalid_argument&) {
    each = make_slots(procs, {}, {}, local_host_name(), online_cpus());
  }
  return group_ranks(each, cpus_per_rank);
}

namespace {

std::vector<int> env_cpus() {
  const char* t = std::getenv("AQS_CPUS");
  return t && *t ? parse_cpu_list(t) : std::vector<int>{};
}
std::vector<std::string> env_hosts() {
  const char* t = std::getenv("AQS_HOSTS");
  return t && *t ? parse_host_runs(t) : std::vector<std::string>{};
}

// A world rank's start: which processor it has and whether maps may come.
void init_world(shim& s) {
  mpi_check(MPI_Comm_dup(MPI_COMM_WORLD, &s.active), "MPI_Comm_dup");
  MPI_Comm_set_errhandler(s.active, MPI_ERRORS_RETURN);
  int size = 0;
  MPI_Comm_rank(s.active, &s.rank);
  MPI_Comm_size(s.active, &size);

  // Rank 0 decides whether this is an adaptive run, so that all agree.
  int mode = 0;  // 0 plain MPI, 1 adaptive
  std::string why;
  // Every rank reads the script and the address: leadership may move.
  try {
    if (const char* t = std::getenv("AQS_TEST_MAPS"); t && *t) s.scripted = parse_scripted_maps(t);
  } catch (const std::exception& ex) {
    if (s.rank == 0) std::fprintf(stderr, "aqs: %s; ignoring AQS_TEST_MAPS\n", ex.what());
    s.scripted.clear();
  }
  s.control_at = control_address_from_env();
  if (s.rank == 0) {
    try {
      if (s.control_at) s.control = std::make_unique<control_channel>(*s.control_at);
      mode = (s.control || !s.scripted.empty()) ? 1 : 0;
    } catch (const std::exception& ex) {
      std::fprintf(stderr, "aqs: %s; running without resizes\n", ex.what());
      s.control.reset();
      mode = s.scripted.empty() ? 0 : 1;
    }
  }
  mpi_check(MPI_Bcast(&mode, 1, MPI_INT, 0, s.active), "MPI_Bcast");
  s.adaptive = mode == 1;

  // With -c C each rank holds C processors of one node (every rank reads
  // the same environment, so all agree).
  try {
    s.cpus_per_rank = parse_cpus_per_task(std::getenv("AQS_CPUS_PER_TASK"));
  } catch (const std::exception& ex) {
    if (s.rank == 0 && s.adaptive) std::fprintf(stderr, "aqs: %s; one processor per rank\n", ex.what());
    s.cpus_per_rank = 1;
  }
  std::vector<int> procs;
  const char* map = std::getenv("AQS_PROCS");
  if (map && *map) {
    procs = parse_map(map);
    s.map_width = std::strlen(map);
  } else {
    const int n = size * s.cpus_per_rank;
    for (int i = 0; i < n; ++i) procs.push_back(i);
    s.map_width = static_cast<std::size_t>(n);
  }
  std::vector<slot> each;
  try {
    each = make_slots(procs, env_cpus(), env_hosts(), local_host_name(), online_cpus());
  } catch (const std::exception& ex) {
    if (s.rank == 0) std::fprintf(stderr, "aqs: %s; guessing cpus\n", ex.what());
    each = make_slots(procs, {}, {}, local_host_name(), online_cpus());
  }
  std::vector<slot> all;
  try {
    all = group_ranks(each, s.cpus_per_rank);
  } catch (const std::exception& ex) {
    if (s.rank == 0 && s.adaptive) std::fprintf(stderr, "aqs: %s; one processor per rank\n", ex.what());
    s.cpus_per_rank = 1;
    all = std::move(each);
  }
  if (static_cast<std::size_t>(size) != all.size() && s.rank == 0 && s.adaptive) {
    std::fprintf(stderr, "aqs: %d ranks for %zu ranks of %d processor(s) in the map; ranks share them round-robin\n",
                 size, all.size(), s.cpus_per_rank);
  }
  for (int r = 0; r < size; ++r) s.slots.push_back(all[static_cast<std::size_t>(r) % all.size()]);
  if (s.adaptive) pin_process_to(cpus_of(s.slots[static_cast<std::size_t>(s.rank)]));
}

}  // namespace

}  // namespace aqs::runtime

using namespace aqs::runtime;

extern "C" {

int AQS_Init(void) {
  shim& s = the_shim();
  if (s.initialized) return fail(AQS_ERR_STATE, "AQS_Init called twice");
  int mpi_up = 0;
  MPI_Initialized(&mpi_up);
  if (!mpi_up) return fail(AQS_ERR_STATE, "AQS_Init called before MPI_Init");
  try {
    int level = MPI_THREAD_SINGLE;
    MPI_Query_thread(&level);
    s.thread_multiple = level == MPI_THREAD_MULTIPLE;
    MPI_Comm parent = MPI_COMM_NULL;
    MPI_Comm_get_parent(&parent);
    if (parent != MPI_COMM_NULL) {
      join_from_parent(parent);
    } else {
      init_world(s);
    }
    s.initialized = true;
    return AQS_SUCCESS;
  } catch (const std::exception& ex) {
    return fail(AQS_ERR_MPI, ex.what());
  }
}

int AQS_Finalize(void) {
  shim& s = the_shim();
  if (!s.initialized || s.finalized) return fail(AQS_ERR_STATE, "AQS_Finalize without AQS_Init");
  s.finalized = true;
  // An expand still being prepared is given up; new ranks of an expand given
  // up must hear it before the job can end.
  if (s.preparing || !s.stuck.empty()) settle_background(s, abandoned_wait_bound());
  if (!s.abandoned.empty()) progress_abandoned(s, abandoned_wait_bound());
  // Everyone parked with us may now finalize too.
  s.pool.close();
  s.control.reset();
  s.arrays.clear();
  if (s.active != MPI_COMM_NULL) MPI_Comm_free(&s.active);
  return AQS_SUCCESS;
}

MPI_Comm AQS_Comm(void) {
  const shim& s = the_shim();
  return s.initialized && !s.finalized ? s.active : MPI_COMM_NULL;
}

int AQS_Request_range(int min, int max) {
  shim& s = the_shim();
  if (!s.initialized || s.finalized) return fail(AQS_ERR_STATE, "AQS_Request_range outside AQS_Init .. AQS_Finalize");
  if (min < 1 || max < min) return fail(AQS_ERR_ARG, "AQS_Request_range: need 1 <= min <= max");
  if (!s.adaptive) return fail(AQS_ERR_STATE, "AQS_Request_range: the job does not run under AQS");
  // Only the rank holding the connection to aqsd sends it; on the others
  // (ranks an expansion started included) there is nothing to do.
  if (!s.control) return AQS_SUCCESS;
  try {
    s.control->request_range(min, max);
  } catch (const std::exception& ex) {
    return fail(AQS_ERR_CONTROL, std::string("AQS_Request_range: ") + ex.what());
  }
  return AQS_SUCCESS;
}

int AQS_Publish(const char* name, double value) {
  shim& s = the_shim();
  if (name == nullptr || !aqs::protocol::valid_value_name(name)) {
    return fail(AQS_ERR_ARG, "AQS_Publish: the name must be 1.." + std::to_string(aqs::protocol::k_max_value_name) +
                                 " letters, digits, '_', '.', ':' or '-'");
  }
  if (!std::isfinite(value)) return fail(AQS_ERR_ARG, "AQS_Publish: the value must be finite");
  if (!s.initialized || s.finalized) return fail(AQS_ERR_STATE, "AQS_Publish outside AQS_Init .. AQS_Finalize");
  // Outside AQS (plain mpirun), and on the ranks that do not speak for the
  // job, there is no one to tell: the value goes nowhere.
  if (!s.control) return AQS_SUCCESS;
  if (!s.control->publish(name, value)) {
    return fail(AQS_ERR_CONTROL, "AQS_Publish: the connection to aqsd is gone");
  }
  return AQS_SUCCESS;
}

int AQS_Range_status(int* status, const char** reason) {
  shim& s = the_shim();
  if (status == nullptr) return fail(AQS_ERR_ARG, "AQS_Range_status: null status");
  *status = AQS_RANGE_NONE;
  if (reason != nullptr) *reason = nullptr;
  if (!s.control) return AQS_SUCCESS;
  auto [state, why] = s.control->range_status();
  s.range_reason = std::move(why);
  using rs = control_channel::range_state;
  *status = state == rs::pending ? AQS_RANGE_PENDING
            : state == rs::accepted ? AQS_RANGE_ACCEPTED
            : state == rs::refused  ? AQS_RANGE_REFUSED
                                    : AQS_RANGE_NONE;
  if (reason != nullptr && state == rs::refused) *reason = s.range_reason.c_str();
  return AQS_SUCCESS;
}

int MPI_Migrate(void) {
  shim& s = the_shim();
  if (!s.initialized || s.finalized) return fail(AQS_ERR_STATE, "MPI_Migrate outside AQS_Init .. AQS_Finalize");
  if (s.joining) return complete_join();
  if (!s.adaptive) return AQS_SUCCESS;
  return migrate();
}

int AQS_Migrate(void) { return MPI_Migrate(); }

int AQS_Adaptive(void) { return the_shim().adaptive ? 1 : 0; }

int64_t AQS_Epoch(void) { return the_shim().epoch; }

int AQS_Processor(int* global_processor, int* cpu) {
  const shim& s = the_shim();
  if (!s.initialized) return fail(AQS_ERR_STATE, "AQS_Processor before AQS_Init");
  const bool known = s.adaptive && static_cast<std::size_t>(s.rank) < s.slots.size();
  if (global_processor) *global_processor = known ? s.slots[static_cast<std::size_t>(s.rank)].proc : -1;
  if (cpu) *cpu = known ? s.slots[static_cast<std::size_t>(s.rank)].cpu : -1;
  return AQS_SUCCESS;
}

int AQS_Last_timings(AQS_Timings* timings) {
  if (timings == nullptr) return fail(AQS_ERR_ARG, "AQS_Last_timings: null pointer");
  *timings = the_shim().last;
  return AQS_SUCCESS;
}

int AQS_Array_create(uint64_t n, size_t elem_size, size_t ghost_elems, AQS_Array* array) {
  shim& s = the_shim();
  if (!s.initialized || s.finalized) return fail(AQS_ERR_STATE, "AQS_Array_create outside AQS_Init .. AQS_Finalize");
  if (array == nullptr || elem_size == 0) return fail(AQS_ERR_ARG, "AQS_Array_create: null handle or zero element size");
  auto a = std::make_unique<aqs_array>();
  a->n = n;
  a->elem_size = elem_size;
  a->ghost = ghost_elems;
  a->index = s.arrays.size();
  if (!s.joining) {
    int size = 1;
    MPI_Comm_size(s.active, &size);
    const std::uint64_t p = static_cast<std::uint64_t>(size), r = static_cast<std::uint64_t>(s.rank);
    a->begin = n / p * r + std::min(r, n % p);
    a->end = a->begin + n / p + (r < n % p ? 1 : 0);
  }
  // A joining rank holds nothing until its first MPI_Migrate() brings its block.
  a->storage.assign((2 * ghost_elems + (a->end - a->begin)) * elem_size, std::byte{0});
  *array = a.get();
  s.arrays.push_back(std::move(a));
  return AQS_SUCCESS;
}

int AQS_Array2d_create(uint64_t rows, uint64_t cols, size_t elem_size, size_t ghost_rows, AQS_Array* array) {
  if (cols == 0 || elem_size == 0) return fail(AQS_ERR_ARG, "AQS_Array2d_create: zero columns or element size");
  return AQS_Array_create(rows, static_cast<size_t>(cols) * elem_size, ghost_rows, array);
}

int AQS_Array_local(AQS_Array array, void** data, uint64_t* begin, uint64_t* end) {
  if (array == nullptr || !array->live) return fail(AQS_ERR_ARG, "AQS_Array_local: not an array");
  if (data) *data = array->block();
  if (begin) *begin = array->begin;
  if (end) *end = array->end;
  return AQS_SUCCESS;
}

int AQS_Array_free(AQS_Array* array) {
  if (array == nullptr || *array == nullptr || !(*array)->live) return fail(AQS_ERR_ARG, "AQS_Array_free: not an array");
  // The slot stays (registration order is the redistribution order); only
  // its memory goes.
  (*array)->live = false;
  std::vector<std::byte>().swap((*array)->storage);
  *array = nullptr;
  return AQS_SUCCESS;
}

int AQS_Buffer_append(AQS_Buffer buffer, const void* data, size_t len) {
  if (buffer == nullptr || (data == nullptr && len > 0)) return fail(AQS_ERR_ARG, "AQS_Buffer_append: null pointer");
  const auto* p = static_cast<const std::byte*>(data);
  buffer->bytes.insert(buffer->bytes.end(), p, p + len);
  return AQS_SUCCESS;
}

int AQS_Register_state(AQS_Pack_fn pack, AQS_Unpack_fn unpack, AQS_Release_fn release, void* user, int* id) {
  shim& s = the_shim();
  if (!s.initialized || s.finalized) return fail(AQS_ERR_STATE, "AQS_Register_state outside AQS_Init .. AQS_Finalize");
  s.states.push_back(state_entry{pack, unpack, release, user});
  if (id) *id = static_cast<int>(s.states.size() - 1);
  return AQS_SUCCESS;
}

int AQS_Register_replicated(void* data, size_t len) {
  shim& s = the_shim();
  if (!s.initialized || s.finalized) return fail(AQS_ERR_STATE, "AQS_Register_replicated outside AQS_Init .. AQS_Finalize");
  if (data == nullptr && len > 0) return fail(AQS_ERR_ARG, "AQS_Register_replicated: null pointer");
  s.replicated.push_back(replicated_entry{data, len});
  return AQS_SUCCESS;
}

const char* AQS_Error_string(void) { return the_shim().error.c_str(); }

}  // extern "C"
