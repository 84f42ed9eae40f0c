// pinning: binds every thread of this process to one cpu.
#pragma once

namespace aqs::runtime {

// Pins all threads of the process (MPI's progress threads too) to `cpu`.
// Returns false if the kernel refused (the cpu does not exist, say); the
// process then runs where it ran before.
bool pin_process_to(int cpu) noexcept;

// The number of cpus this machine has online (at least 1).
int online_cpus() noexcept;

}  // namespace aqs::runtime
