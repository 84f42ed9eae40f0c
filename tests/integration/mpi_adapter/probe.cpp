// probe: the MPI program of the mpi_adapter integration test and of the
// end-to-end MPI launch test; each rank prints "rank R host H cpus LIST",
// LIST being its affinity mask ("1", "0,1"), then sleeps SECONDS if given
// (probe [SECONDS]), so that a test can kill a running job. Under AQS, rank 0
// first prints the placement the agent gave the job ("cpus $AQS_CPUS",
// "hosts $AQS_HOSTS"), so that a job started without a script of its own
// (frun) reports what its ranks should match.
#include <mpi.h>
#include <sched.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0) {
    if (const char* cpus = std::getenv("AQS_CPUS")) std::printf("cpus %s\n", cpus);
    if (const char* hosts = std::getenv("AQS_HOSTS")) std::printf("hosts %s\n", hosts);
  }

  // The test's launch agent gives each pretend host's daemon (and so its
  // ranks) a host name of its own.
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);

  cpu_set_t set;
  CPU_ZERO(&set);
  std::string cpus;
  if (::sched_getaffinity(0, sizeof set, &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (!CPU_ISSET(c, &set)) continue;
      if (!cpus.empty()) cpus += ',';
      cpus += std::to_string(c);
    }
  }
  std::printf("rank %d host %s cpus %s\n", rank, host, cpus.empty() ? "?" : cpus.c_str());
  std::fflush(stdout);
  if (argc > 1) ::sleep(static_cast<unsigned>(std::atoi(argv[1])));
  MPI_Finalize();
  return 0;
}
