// launch_app: the MPI program bench_launch starts: each rank prints the wall
// clock (microseconds since the epoch) at which its MPI_Init returned and
// its host (so that the bench sees the ranks spanned the hosts), then ends
// at once.
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#include <mpi.h>

#include <chrono>
#include <cstdio>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const long long us =
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  char host[MPI_MAX_PROCESSOR_NAME] = {};
  int len = 0;
  MPI_Get_processor_name(host, &len);
  std::printf("init %d %lld %s\n", rank, us, host);
  std::fflush(stdout);
  MPI_Finalize();
  return 0;
}
