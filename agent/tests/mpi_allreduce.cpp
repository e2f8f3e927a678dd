// Test worker for the mpi launcher: every rank contributes its rank to an MPI_Allreduce and prints the
// sum with its rank and node, e.g. "rank 2 of 4 on node1 sum 6".
#include <mpi.h>

#include <cstdio>
#include <cstdlib>

// Open MPI 4.1 leaks at MPI_Finalize from components it already dlclose()d (see
// workloads/asan_options.cpp): leak checks off so a sanitized run exits 0.
extern "C" const char* __asan_default_options() { return "detect_leaks=0"; }

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0, sum = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  const char* node = std::getenv("RAILYARD_NODE");
  const char* vader = std::getenv("OMPI_MCA_btl_vader_backing_directory");
  std::printf("rank %d of %d on %s sum %d vader %s\n", rank, size, node ? node : "?", sum,
              vader ? vader : "-");
  std::fflush(stdout);
  MPI_Finalize();
  return 0;
}
