/* aqs/adaptive.h: the AQS runtime shim, the C API that adaptive MPI apps use
 * so that the scheduler can shrink and expand them while they run.
 *
 * The life of an adaptive program:
 *
 *     MPI_Init(&argc, &argv);
 *     AQS_Init();                        after MPI_Init, every rank
 *     ... register state: AQS_Array_create, AQS_Register_state,
 *         AQS_Register_replicated ...
 *     while (!done) {
 *       MPI_Migrate();                   safe point: the map may change here
 *       MPI_Comm comm = AQS_Comm();      the active ranks, in processor order
 *       ... compute and communicate on comm ...
 *     }
 *     AQS_Finalize();
 *     MPI_Finalize();
 *
 * Ranks that MPI_Migrate() drops hand over their data and never return from
 * it (they wait blocked, then finalize and exit when the job ends). Ranks it
 * adds start the program from main() again: their AQS_Init() joins the job,
 * their registrations create empty state, and their first MPI_Migrate()
 * receives the data, the replicated values (a loop counter, say) and the
 * communicator, so that from then on they run the loop like everyone else.
 * An app therefore calls MPI_Migrate() first thing in its loop, before it
 * communicates, and keeps anything a new rank needs in registered state.
 *
 * Outside AQS (no AQS_JOB_ID in the environment, e.g. plain mpirun), the
 * same binary runs as an ordinary MPI program: AQS_Comm() is a duplicate of
 * MPI_COMM_WORLD and MPI_Migrate() only returns.
 *
 * Every function returns AQS_SUCCESS or an error code; AQS_Error_string()
 * tells what went wrong last on this rank. None is thread-safe: call them
 * from the thread that calls MPI. */
#ifndef AQS_ADAPTIVE_H
#define AQS_ADAPTIVE_H

#include <stddef.h>
#include <stdint.h>

#include <mpi.h>

#if defined(__GNUC__)
#define AQS_API __attribute__((visibility("default")))
#else
#define AQS_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

enum {
  AQS_SUCCESS = 0,
  AQS_ERR_ARG = 1,       /* a bad argument (null pointer, unknown handle, ...) */
  AQS_ERR_STATE = 2,     /* called out of order (before AQS_Init, after AQS_Finalize, ...) */
  AQS_ERR_MPI = 3,       /* an MPI call failed */
  AQS_ERR_CONTROL = 4,   /* the control channel to aqsd failed */
  AQS_ERR_SPAWN = 5      /* new ranks could not be started: the job goes on with its old ranks */
};

/* Starts the shim. Collective over MPI_COMM_WORLD (or, in a rank started by
 * an expansion, over the job's ranks it joins). MPI must be initialized. */
AQS_API int AQS_Init(void);

/* Ends the shim: wakes every rank an earlier shrink set aside so that all of
 * them can call MPI_Finalize. Collective over the active ranks. Frees every
 * registered array. */
AQS_API int AQS_Finalize(void);

/* The communicator of the active ranks, rank order = processor order. Valid
 * until the next MPI_Migrate() that changes the map (do not free it). */
AQS_API MPI_Comm AQS_Comm(void);

/* The reconfiguration point. Collective over the active ranks, called where
 * no request is pending on AQS_Comm(). Applies the newest processor map the
 * scheduler sent, if any: moves registered data, starts or drops ranks, pins
 * every rank to its processor, and acknowledges the map to the scheduler.
 * Without a new map it costs one small collective. If starting new ranks
 * fails, the job stays on its old processors, the scheduler is told, and
 * AQS_ERR_SPAWN is returned (the app may simply go on).
 * A rank that a shrink drops does not return: it waits, using no CPU, and
 * either finalizes when the job ends or is called back by a later expansion
 * (which prefers such ranks to starting processes). Called back, its
 * MPI_Migrate() returns like everyone else's, with the registered state of
 * its new processor; anything else it kept dates from when it left, so
 * derive such values from registered state after every MPI_Migrate(), as a
 * rank the expansion started would. */
AQS_API int MPI_Migrate(void);
AQS_API int AQS_Migrate(void); /* the same */

/* 1 if this process runs under AQS with a control channel to aqsd, 0 when it
 * runs as a plain MPI program. */
AQS_API int AQS_Adaptive(void);

/* The number of maps applied so far (0 before the first change). Equal on
 * every active rank. */
AQS_API int64_t AQS_Epoch(void);

/* This rank's processor: its global number in the scheduler's map and the
 * CPU of its node it is pinned to (-1, -1 outside AQS). A rank of several
 * processors (a job with -c C): its first processor and that one's CPU; it
 * is pinned to the CPUs of all C. */
AQS_API int AQS_Processor(int* global_processor, int* cpu);

/* How the last change of map went on this rank (zeros before the first):
 * wait: from the map's arrival to the MPI_Migrate() that took it up; spawn:
 * starting new ranks; data: moving registered state; total: from arrival to
 * the end of the change. Milliseconds. */
typedef struct {
  int64_t epoch;
  double wait_ms;
  double spawn_ms;
  double data_ms;
  double total_ms;
} AQS_Timings;
AQS_API int AQS_Last_timings(AQS_Timings* timings);

/* ----- asking for a new range ---------------------------------------------
 * A running job asks the scheduler to run it on min..max processors from now
 * on (its fsub --min/--max, or fctl update): more in an expensive phase, fewer
 * after. Non-blocking: the request is sent and the call returns; the
 * scheduler stores the range and decides again, and a new map, if any,
 * arrives at a later MPI_Migrate() (a grow waits until processors are free).
 * Not collective and no communication: call it on every active rank (the
 * rank that holds the connection to aqsd sends it; on the others it only
 * returns AQS_SUCCESS). AQS_ERR_ARG for min < 1 or max < min; AQS_ERR_STATE
 * outside AQS_Init .. AQS_Finalize or when the job does not run under AQS;
 * AQS_ERR_CONTROL when the connection to aqsd is gone. */
AQS_API int AQS_Request_range(int min, int max);

/* What became of the newest AQS_Request_range() on this rank:
 * AQS_RANGE_NONE (never asked, or not the rank that sends), _PENDING (no
 * answer yet), _ACCEPTED (stored; maps follow as processors allow) or
 * _REFUSED (*reason, if not null, points at aqsd's one-line reason, e.g.
 * "job 12 can never have that: it needs 64 processors; there are 16";
 * valid until the next request). */
enum { AQS_RANGE_NONE = 0, AQS_RANGE_PENDING = 1, AQS_RANGE_ACCEPTED = 2, AQS_RANGE_REFUSED = 3 };
AQS_API int AQS_Range_status(int* status, const char** reason);

/* ----- live values ----------------------------------------------------------
 * Publishes a named value (a residual, an energy, the number of ranks) to
 * the scheduler, which shows it as a live chart on the job's page of aqsd's
 * dashboard and over its REST API (GET /api/v1/jobs/ID/values). Non-blocking
 * and not collective: values are batched and sent by the rank holding the
 * connection to aqsd (active rank 0); on the other ranks it only checks its
 * arguments and returns AQS_SUCCESS, so call it on every rank with the same
 * value (after an MPI_Allreduce, say) or on active rank 0. The name is 1 to
 * 64 letters, digits, '_', '.', ':' or '-'; the value finite (else
 * AQS_ERR_ARG). aqsd keeps each job's newest points per name, for a bounded
 * number of names, and drops what a job publishes beyond its rate (by
 * default 200 values a second): publishing in a tight loop costs the job
 * nothing but loses points. AQS_ERR_STATE outside AQS_Init .. AQS_Finalize
 * or when the job does not run under AQS; AQS_ERR_CONTROL when the
 * connection to aqsd is gone (the value is dropped; the app may go on). */
AQS_API int AQS_Publish(const char* name, double value);

/* ----- block-distributed arrays -------------------------------------------
 * An array of `n` elements of `elem_size` bytes, distributed in blocks over
 * the active ranks in rank order (rank i of p holds n/p elements, one more
 * for the first n%p ranks). The shim owns the memory; on a change of map it
 * moves only the ranges that change owner. A 2-D array distributed by rows
 * is an array of `rows` elements of `cols * elem_size` bytes; `ghost_rows`
 * extra rows before and after the local block are kept for halo exchange
 * (their contents are not moved). */
typedef struct aqs_array* AQS_Array;

/* Creates the array (collective over the active ranks, same arguments
 * everywhere, in the same order on every rank, new ranks included). The
 * local block is zeroed. ghost_elems: elements of spare room on each side of
 * the block (0 for none). */
AQS_API int AQS_Array_create(uint64_t n, size_t elem_size, size_t ghost_elems, AQS_Array* array);
AQS_API int AQS_Array2d_create(uint64_t rows, uint64_t cols, size_t elem_size, size_t ghost_rows, AQS_Array* array);
/* The local block: *data points at its first element (the ghost room lies
 * before it and after its last element); [*begin, *end) are the global
 * indices (rows for a 2-D array) it holds. The pointer may change at every
 * MPI_Migrate(). */
AQS_API int AQS_Array_local(AQS_Array array, void** data, uint64_t* begin, uint64_t* end);
AQS_API int AQS_Array_free(AQS_Array* array);

/* ----- arbitrary state -----------------------------------------------------
 * At a change of map, every old active rank packs one buffer for each new
 * active rank (pack is called once per new rank, `to` = its index among the
 * new ranks, `nto` = their number), and every new active rank unpacks the
 * buffers addressed to it, one per old rank in old rank order (`from`,
 * `nfrom`). A rank that stays packs its part for itself too: its state is
 * rebuilt from the buffers alone, so unpack starts afresh at from == 0. A
 * rank that leaves is then told to release its state, so that it holds no
 * application memory while it waits. */
typedef struct aqs_buffer* AQS_Buffer;
AQS_API int AQS_Buffer_append(AQS_Buffer buffer, const void* data, size_t len);

typedef void (*AQS_Pack_fn)(void* user, int to, int nto, AQS_Buffer out);
typedef void (*AQS_Unpack_fn)(void* user, int from, int nfrom, const void* data, size_t len);
typedef void (*AQS_Release_fn)(void* user);

/* Registers state (collective, same order on every rank). Any callback may
 * be NULL. Returns an id (>= 0) through *id if id is not NULL. */
AQS_API int AQS_Register_state(AQS_Pack_fn pack, AQS_Unpack_fn unpack, AQS_Release_fn release, void* user,
                       int* id);

/* A value every active rank holds the same copy of (an iteration counter, a
 * simulated time, parameters): at a change of map, active rank 0's bytes
 * are copied to every new rank. */
AQS_API int AQS_Register_replicated(void* data, size_t len);

/* A one-line description of the last error on this rank ("" if none). */
AQS_API const char* AQS_Error_string(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* AQS_ADAPTIVE_H */
