// launch_app: the MPI program bench_launch starts: each rank prints the wall
// clock (microseconds since the epoch) at which its MPI_Init returned, then
// ends at once.
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
  std::printf("init %d %lld\n", rank, us);
  std::fflush(stdout);
  MPI_Finalize();
  return 0;
}
