// elf_needed: a minimal, bounds-checked reader of an ELF file's DT_NEEDED entries (what the dynamic loader reads).
#include "cmdline/elf_needed.hpp"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <type_traits>
#include <unistd.h>

namespace aqs::cmdline {

namespace {

// Bounds for what a garbage file could otherwise make us allocate: real
// program headers and dynamic sections are a few KB, library names short.
constexpr std::uint64_t k_max_table = 1 << 20;
constexpr std::uint64_t k_max_name = 4096;

class file_reader {
public:
  // O_NONBLOCK: a FIFO named like a program must not hang frun (it is then
  // refused as not a regular file).
  explicit file_reader(const std::string& path) noexcept
      : fd_(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)) {
    struct stat st {};
    if (fd_ >= 0 && ::fstat(fd_, &st) == 0 && S_ISREG(st.st_mode)) {
      size_ = static_cast<std::uint64_t>(st.st_size);
    } else if (fd_ >= 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }
  ~file_reader() {
    if (fd_ >= 0) ::close(fd_);
  }
  file_reader(const file_reader&) = delete;
  file_reader& operator=(const file_reader&) = delete;

  bool ok() const noexcept { return fd_ >= 0; }
  std::uint64_t size() const noexcept { return size_; }

  // Exactly n bytes at `off`, or false when they are not all in the file
  // (also when it shrank since it was opened).
  bool read(std::uint64_t off, void* out, std::uint64_t n) const noexcept {
    if (off > size_ || n > size_ - off) return false;
    auto* p = static_cast<char*>(out);
    while (n > 0) {
      const ssize_t r = ::pread(fd_, p, n, static_cast<off_t>(off));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return false;
      p += r;
      off += static_cast<std::uint64_t>(r);
      n -= static_cast<std::uint64_t>(r);
    }
    return true;
  }

private:
  int fd_;
  std::uint64_t size_ = 0;
};

// A field as the file stores it, in our byte order.
template <class T>
T host_order(T v, bool swap) noexcept {
  if (!swap) return v;
  using u = std::make_unsigned_t<T>;
  auto x = static_cast<u>(v);
  if constexpr (sizeof(T) == 2) x = static_cast<u>(__builtin_bswap16(x));
  if constexpr (sizeof(T) == 4) x = static_cast<u>(__builtin_bswap32(x));
  if constexpr (sizeof(T) == 8) x = static_cast<u>(__builtin_bswap64(x));
  return static_cast<T>(x);
}

// The same walk as the dynamic loader's: program headers, PT_DYNAMIC, its
// DT_NEEDED and DT_STRTAB entries, DT_STRTAB's address mapped to the file
// through the PT_LOAD segment holding it. (Section headers are optional in
// an executable, so they are not used.)
template <class ehdr, class phdr, class dyn>
std::optional<std::vector<std::string>> needed_of(const file_reader& f, bool swap) {
  const auto o = [swap](auto v) { return host_order(v, swap); };
  ehdr h{};
  if (!f.read(0, &h, sizeof h)) return std::nullopt;
  const auto type = o(h.e_type);
  if (type != ET_EXEC && type != ET_DYN) return std::nullopt;
  const std::uint64_t phentsize = o(h.e_phentsize), phnum = o(h.e_phnum);
  // PN_XNUM (the count kept elsewhere) never occurs in a real program.
  if (phnum == PN_XNUM || phentsize < sizeof(phdr) || phnum * phentsize > k_max_table) return std::nullopt;
  std::vector<unsigned char> table(phnum * phentsize);
  if (!f.read(o(h.e_phoff), table.data(), table.size())) return std::nullopt;
  std::vector<phdr> loads;
  std::optional<phdr> dynamic;
  for (std::uint64_t i = 0; i < phnum; ++i) {
    phdr p{};
    std::memcpy(&p, table.data() + i * phentsize, sizeof p);
    if (o(p.p_type) == PT_LOAD) loads.push_back(p);
    if (o(p.p_type) == PT_DYNAMIC && !dynamic) dynamic = p;
  }
  if (!dynamic) return std::vector<std::string>{};  // statically linked

  const std::uint64_t dyn_size = o(dynamic->p_filesz);
  if (dyn_size > k_max_table) return std::nullopt;
  std::vector<dyn> entries(dyn_size / sizeof(dyn));
  if (!f.read(o(dynamic->p_offset), entries.data(), entries.size() * sizeof(dyn))) return std::nullopt;
  std::vector<std::uint64_t> needed;
  std::optional<std::uint64_t> strtab, strsz;
  for (const auto& d : entries) {
    const auto tag = static_cast<std::int64_t>(o(d.d_tag));
    const auto value = static_cast<std::uint64_t>(o(d.d_un.d_val));
    if (tag == DT_NULL) break;
    if (tag == DT_NEEDED) needed.push_back(value);
    if (tag == DT_STRTAB) strtab = value;
    if (tag == DT_STRSZ) strsz = value;
  }
  if (needed.empty()) return std::vector<std::string>{};
  if (!strtab || !strsz) return std::nullopt;

  std::optional<std::uint64_t> strtab_off;
  for (const auto& p : loads) {
    const std::uint64_t vaddr = o(p.p_vaddr), filesz = o(p.p_filesz);
    if (*strtab >= vaddr && *strtab - vaddr < filesz) {
      std::uint64_t off = 0;
      if (__builtin_add_overflow(static_cast<std::uint64_t>(o(p.p_offset)), *strtab - vaddr, &off)) return std::nullopt;
      strtab_off = off;
      break;
    }
  }
  if (!strtab_off) return std::nullopt;

  std::vector<std::string> out;
  for (const std::uint64_t at : needed) {
    std::uint64_t pos = 0;
    if (at >= *strsz || __builtin_add_overflow(*strtab_off, at, &pos) || pos >= f.size()) return std::nullopt;
    // The name ends at a NUL inside the string table and the file.
    std::string name(static_cast<std::size_t>(std::min({k_max_name, *strsz - at, f.size() - pos})), '\0');
    if (!f.read(pos, name.data(), name.size())) return std::nullopt;
    const auto nul = name.find('\0');
    if (nul == std::string::npos) return std::nullopt;
    name.resize(nul);
    out.push_back(std::move(name));
  }
  return out;
}

}  // namespace

std::optional<std::vector<std::string>> elf_needed_libraries(const std::string& file) noexcept {
  try {
    const file_reader f(file);
    unsigned char ident[EI_NIDENT];
    if (!f.ok() || !f.read(0, ident, sizeof ident)) return std::nullopt;
    if (std::memcmp(ident, ELFMAG, SELFMAG) != 0 || ident[EI_VERSION] != EV_CURRENT) return std::nullopt;
    bool big = false;
    switch (ident[EI_DATA]) {
      case ELFDATA2LSB: big = false; break;
      case ELFDATA2MSB: big = true; break;
      default: return std::nullopt;
    }
    const bool swap = big != (std::endian::native == std::endian::big);
    switch (ident[EI_CLASS]) {
      case ELFCLASS32: return needed_of<Elf32_Ehdr, Elf32_Phdr, Elf32_Dyn>(f, swap);
      case ELFCLASS64: return needed_of<Elf64_Ehdr, Elf64_Phdr, Elf64_Dyn>(f, swap);
      default: return std::nullopt;
    }
  } catch (...) {
    return std::nullopt;  // out of memory: the caller treats the file as not MPI
  }
}

bool is_libmpi(std::string_view needed) noexcept {
  constexpr std::string_view base = "libmpi.so";
  return needed.starts_with(base) && (needed.size() == base.size() || needed[base.size()] == '.');
}

bool is_mpi_program(const std::string& file) noexcept {
  const auto needed = elf_needed_libraries(file);
  return needed && std::any_of(needed->begin(), needed->end(), [](const std::string& n) { return is_libmpi(n); });
}

}  // namespace aqs::cmdline
