// pinning: binds every thread of this process to its rank's cpus.
#pragma once

#include <vector>

namespace aqs::runtime {

// Pins all threads of the process (MPI's progress threads too) to the set
// of `cpus` (a rank of C processors: its C cpus; repeats count once).
// Returns false if the set is empty, a cpu is out of range, or the kernel
// refused (no such cpu online, say); the process then runs where it ran
// before (threads the kernel refused keep their old set).
bool pin_process_to(const std::vector<int>& cpus) noexcept;

// The number of cpus this machine has online (at least 1).
int online_cpus() noexcept;

}  // namespace aqs::runtime
