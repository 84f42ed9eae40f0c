// lsan_suppressions: leaks inside third-party libraries that sanitizer builds
// (AQS_SANITIZE) would otherwise report at the exit of every test program.
// Linked into each test executable; LeakSanitizer calls it at start-up.
//   libpq: keeps about 1 KB when a connection dies mid-statement, which the
//     store's durability tests do on purpose.
//   OpenMPI (libmpi, libopen-pal, libopen-rte, PMIx, libevent) and hwloc:
//     allocations made in MPI_Init and never freed by MPI_Finalize.
extern "C" const char* __lsan_default_suppressions();
extern "C" const char* __lsan_default_suppressions() {
  return "leak:libpq.so\n"
         "leak:libmpi.so\n"
         "leak:libopen-pal.so\n"
         "leak:libopen-rte.so\n"
         "leak:libpmix.so\n"
         "leak:libevent\n"
         "leak:libhwloc.so\n"
         "leak:mca_\n";
}
