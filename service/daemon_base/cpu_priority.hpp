// cpu_priority: a daemon's claim on the CPU when it shares the machine with
// jobs (a head node that also computes, or the tests' namespace hosts): its
// nice value, and, when it leads a session of its own, that session's kernel
// scheduling autogroup's, since with autogroups (sched_autogroup_enabled,
// the default of most distributions) the kernel shares the CPU between
// sessions first and a process's own nice counts only inside its session.
//
// Why (issue 30): with 96 oversubscribed MPI ranks on 2 cores in another
// session, aqsd's threads waited up to 30 s for a CPU while runnable, and the
// node agents fenced the job for want of acknowledged heartbeats.
#pragma once

#include <string>

namespace aqs::daemon {

// Sets this process's nice to `nice` (-20..19; threads started later inherit
// it) and, if this process leads its own session and the kernel has
// autogroups, its autogroup's nice too. Call before starting threads.
// Returns what was done, for the log. Throws std::runtime_error with a
// one-line reason when the value is out of range or not permitted (a
// negative nice needs CAP_SYS_NICE or RLIMIT_NICE).
std::string apply_cpu_nice(int nice);

}  // namespace aqs::daemon
