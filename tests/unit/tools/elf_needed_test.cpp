// Unit tests of the DT_NEEDED reader behind frun's MPI detection: real programs, scripts, and made-up ELF files of
// every class and byte order, whole, truncated and garbled.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <elf.h>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <sys/stat.h>
#include <vector>

#include "cmdline/elf_needed.hpp"
#include "file_text.hpp"
#include "temp_dir.hpp"

namespace fs = std::filesystem;
using namespace aqs::cmdline;
using names = std::vector<std::string>;

namespace {

void write_file(const fs::path& p, const std::string& bytes) { std::ofstream(p, std::ios::binary) << bytes; }

struct elf_shape {
  bool big = false;
  std::uint16_t type = ET_DYN;
  bool dynamic = true;
  names needed;
};

// A minimal dynamically linked ELF file as a linker lays it out: headers,
// one PT_LOAD mapping the whole file at 0x400000, PT_DYNAMIC, the dynamic
// entries, then the string table (addressed by DT_STRTAB in memory).
template <class ehdr, class phdr, class dyn>
std::string make_elf(const elf_shape& e, unsigned char elf_class) {
  std::string dynstr(1, '\0');
  std::vector<std::uint64_t> name_at;
  for (const auto& n : e.needed) {
    name_at.push_back(dynstr.size());
    dynstr += n + '\0';
  }
  const std::uint64_t base = 0x400000;
  const std::size_t phoff = sizeof(ehdr), dynoff = phoff + 2 * sizeof(phdr);
  const std::size_t ndyn = e.needed.size() + 3;
  const std::size_t stroff = dynoff + ndyn * sizeof(dyn);
  std::string b(stroff + dynstr.size(), '\0');
  b.replace(stroff, dynstr.size(), dynstr);
  const auto put = [&](std::size_t off, std::uint64_t v, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) {
      const auto byte = static_cast<char>((v >> (8 * (e.big ? n - 1 - i : i))) & 0xff);
      b[off + i] = byte;
    }
  };
#define PUT(at, type, field, value) put((at) + offsetof(type, field), (value), sizeof(type::field))
  b.replace(0, SELFMAG, ELFMAG);
  b[EI_CLASS] = static_cast<char>(elf_class);
  b[EI_DATA] = e.big ? ELFDATA2MSB : ELFDATA2LSB;
  b[EI_VERSION] = EV_CURRENT;
  PUT(0, ehdr, e_type, e.type);
  PUT(0, ehdr, e_version, EV_CURRENT);
  PUT(0, ehdr, e_phoff, phoff);
  PUT(0, ehdr, e_ehsize, sizeof(ehdr));
  PUT(0, ehdr, e_phentsize, sizeof(phdr));
  PUT(0, ehdr, e_phnum, e.dynamic ? 2 : 1);
  PUT(phoff, phdr, p_type, PT_LOAD);
  PUT(phoff, phdr, p_vaddr, base);
  PUT(phoff, phdr, p_filesz, b.size());
  PUT(phoff, phdr, p_memsz, b.size());
  if (e.dynamic) {
    const std::size_t p = phoff + sizeof(phdr);
    PUT(p, phdr, p_type, PT_DYNAMIC);
    PUT(p, phdr, p_offset, dynoff);
    PUT(p, phdr, p_vaddr, base + dynoff);
    PUT(p, phdr, p_filesz, ndyn * sizeof(dyn));
    PUT(p, phdr, p_memsz, ndyn * sizeof(dyn));
    std::size_t d = dynoff;
    for (const auto at : name_at) {
      PUT(d, dyn, d_tag, DT_NEEDED);
      PUT(d, dyn, d_un.d_val, at);
      d += sizeof(dyn);
    }
    PUT(d, dyn, d_tag, DT_STRTAB);
    PUT(d, dyn, d_un.d_ptr, base + stroff);
    d += sizeof(dyn);
    PUT(d, dyn, d_tag, DT_STRSZ);
    PUT(d, dyn, d_un.d_val, dynstr.size());
  }
#undef PUT
  return b;
}

std::string make_elf(bool is64, const elf_shape& e) {
  return is64 ? make_elf<Elf64_Ehdr, Elf64_Phdr, Elf64_Dyn>(e, ELFCLASS64)
              : make_elf<Elf32_Ehdr, Elf32_Phdr, Elf32_Dyn>(e, ELFCLASS32);
}

}  // namespace

TEST_CASE("the MPI probe is an MPI program; /bin/true, a shell script and a missing file are not") {
  const auto probe = elf_needed_libraries(MPI_PROBE);
  REQUIRE(probe.has_value());
  CHECK(std::count_if(probe->begin(), probe->end(), [](const auto& n) { return n.starts_with("libmpi.so."); }) == 1);
  CHECK(is_mpi_program(MPI_PROBE));

  const auto t = elf_needed_libraries("/bin/true");
  REQUIRE(t.has_value());
  CHECK(std::find(t->begin(), t->end(), "libc.so.6") != t->end());
  CHECK_FALSE(is_mpi_program("/bin/true"));

  aqs::test::temp_dir dir;
  const auto script = dir.path() / "run.sh";
  write_file(script, "#!/bin/sh\nexec mpirun ./app\n");
  fs::permissions(script, fs::perms::owner_all);
  CHECK_FALSE(elf_needed_libraries(script.string()).has_value());
  CHECK_FALSE(is_mpi_program(script.string()));
  CHECK_FALSE(is_mpi_program((dir.path() / "missing").string()));
  CHECK_FALSE(is_mpi_program(""));
  CHECK_FALSE(is_mpi_program(dir.path().string()));  // a directory
  CHECK_FALSE(is_mpi_program("/dev/null"));
  const auto fifo = dir.path() / "fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK_FALSE(is_mpi_program(fifo.string()));  // and does not wait for a writer
}

TEST_CASE("a truncated or garbled copy of the probe is read without a crash and is not an MPI program") {
  aqs::test::temp_dir dir;
  const std::string probe = aqs::test::slurp(MPI_PROBE);
  REQUIRE(probe.size() > 4096);
  const auto copy = dir.path() / "copy";
  for (const std::size_t n : {std::size_t{0}, std::size_t{4}, std::size_t{16}, std::size_t{63}, std::size_t{64},
                              std::size_t{100}, std::size_t{1000}}) {
    CAPTURE(n);
    write_file(copy, probe.substr(0, n));
    CHECK_FALSE(elf_needed_libraries(copy.string()).has_value());
    CHECK_FALSE(is_mpi_program(copy.string()));
  }
  // Random bytes after a valid identification, and random damage to the
  // probe's first pages: any answer is fine, as long as nothing breaks
  // (the sanitizer build checks that nothing outside the file is read).
  std::mt19937 rng(12345);
  std::uniform_int_distribution<int> byte(0, 255);
  for (int round = 0; round < 200; ++round) {
    std::string junk = probe.substr(0, EI_NIDENT);
    junk.resize(static_cast<std::size_t>(64 + round * 13));
    for (std::size_t i = EI_NIDENT; i < junk.size(); ++i) junk[i] = static_cast<char>(byte(rng));
    write_file(copy, junk);
    (void)elf_needed_libraries(copy.string());
    std::string damaged = probe;
    for (int k = 0; k < 8; ++k) {
      damaged[static_cast<std::size_t>(byte(rng)) * 16 + static_cast<std::size_t>(byte(rng)) % 16] =
          static_cast<char>(byte(rng));
    }
    write_file(copy, damaged);
    (void)elf_needed_libraries(copy.string());
  }
}

TEST_CASE("32- and 64-bit ELF files of either byte order give their DT_NEEDED names in order") {
  aqs::test::temp_dir dir;
  const auto file = dir.path() / "app";
  for (const bool is64 : {false, true}) {
    for (const bool big : {false, true}) {
      CAPTURE(is64);
      CAPTURE(big);
      write_file(file, make_elf(is64, {big, ET_DYN, true, {"libm.so.6", "libmpi.so.40", "libc.so.6"}}));
      CHECK(elf_needed_libraries(file.string()) == names{"libm.so.6", "libmpi.so.40", "libc.so.6"});
      CHECK(is_mpi_program(file.string()));
      write_file(file, make_elf(is64, {big, ET_EXEC, true, {"libc.so.6"}}));
      CHECK(elf_needed_libraries(file.string()) == names{"libc.so.6"});
      CHECK_FALSE(is_mpi_program(file.string()));
      // Static: no dynamic section, nothing needed.
      write_file(file, make_elf(is64, {big, ET_EXEC, false, {}}));
      CHECK(elf_needed_libraries(file.string()) == names{});
      // A relocatable object is no program, whatever it lists.
      write_file(file, make_elf(is64, {big, ET_REL, true, {"libmpi.so.40"}}));
      CHECK_FALSE(elf_needed_libraries(file.string()).has_value());
      // Every truncation is refused or, once the names are in, read whole.
      const std::string whole = make_elf(is64, {big, ET_DYN, true, {"libmpi.so.40"}});
      for (std::size_t n = 0; n < whole.size(); ++n) {
        write_file(file, whole.substr(0, n));
        const auto r = elf_needed_libraries(file.string());
        CHECK_MESSAGE((!r || *r == names{"libmpi.so.40"}), "cut at " << n);
      }
      // An unknown class or byte order is refused.
      std::string odd = whole;
      odd[EI_DATA] = 3;
      write_file(file, odd);
      CHECK_FALSE(elf_needed_libraries(file.string()).has_value());
      odd = whole;
      odd[EI_CLASS] = 3;
      write_file(file, odd);
      CHECK_FALSE(elf_needed_libraries(file.string()).has_value());
    }
  }
}

TEST_CASE("only libmpi.so itself, any version, makes an MPI program") {
  for (const char* yes : {"libmpi.so", "libmpi.so.40", "libmpi.so.40.30.5", "libmpi.so.12"}) {
    CAPTURE(yes);
    CHECK(is_libmpi(yes));
  }
  for (const char* no : {"libmpi_cxx.so.40", "libmpi_mpifh.so.40", "libmpich.so.12", "libmpi.sox", "xlibmpi.so",
                         "libmpi", ""}) {
    CAPTURE(no);
    CHECK_FALSE(is_libmpi(no));
  }
}
