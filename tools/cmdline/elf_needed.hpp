// elf_needed: the shared libraries an executable asks for (DT_NEEDED), so frun can tell an MPI program from others.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace aqs::cmdline {

// The DT_NEEDED names of the ELF file at `file`, in the order of its dynamic
// section: 32- and 64-bit, little- and big-endian, executables and PIEs
// (ET_EXEC, ET_DYN). An ELF without a dynamic section (static) gives an
// empty list. nullopt for anything else: a missing or unreadable file, not
// a regular file, not ELF, an object or core file, or a malformed or
// truncated one (every offset and size is checked against the file; nothing
// past it is read). Reads only the headers, the dynamic section and the
// names, so a large binary costs a few small reads. Never throws.
std::optional<std::vector<std::string>> elf_needed_libraries(const std::string& file) noexcept;

// True for OpenMPI's library as a DT_NEEDED name: "libmpi.so" or
// "libmpi.so.<anything>" (not libmpi_cxx.so, libmpi_mpifh.so: programs that
// use those also need libmpi.so itself).
bool is_libmpi(std::string_view needed) noexcept;

// An MPI program for frun: an ELF file that needs libmpi.so directly.
// Scripts, static executables, and anything unreadable are not.
bool is_mpi_program(const std::string& file) noexcept;

}  // namespace aqs::cmdline
