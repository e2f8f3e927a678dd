#include "workloads/mpi_collective.hpp"

#include <mpi.h>

#include <climits>
#include <string>
#include <vector>

namespace railyard::workloads {
namespace {

Status checked(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return ok();
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(rc, text, &length);
  return internal_error(std::string(what) + ": " + std::string(text, static_cast<size_t>(length)));
}

Status sum_in_place(void* data, size_t count, MPI_Datatype type) {
  if (count > static_cast<size_t>(INT_MAX)) return invalid("allreduce of more than INT_MAX elements");
  return checked(MPI_Allreduce(MPI_IN_PLACE, data, static_cast<int>(count), type, MPI_SUM, MPI_COMM_WORLD),
                 "MPI_Allreduce");
}

}  // namespace

Result<std::unique_ptr<MpiCollective>> MpiCollective::init(int* argc, char*** argv) {
  int already = 0;
  MPI_Initialized(&already);
  if (!already) {
    if (auto started = checked(MPI_Init(argc, argv), "MPI_Init"); !started) return started.error();
  }
  // Errors come back as codes (and become Results) instead of aborting the job inside MPI.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return std::unique_ptr<MpiCollective>(new MpiCollective(rank, size));
}

MpiCollective::~MpiCollective() { MPI_Finalize(); }

Status MpiCollective::allreduce_sum(std::span<float> data) {
  return sum_in_place(data.data(), data.size(), MPI_FLOAT);
}

Status MpiCollective::allreduce_sum(std::span<double> data) {
  return sum_in_place(data.data(), data.size(), MPI_DOUBLE);
}

Status MpiCollective::broadcast(std::span<unsigned char> data, int root) {
  return checked(MPI_Bcast(data.data(), static_cast<int>(data.size()), MPI_BYTE, root, MPI_COMM_WORLD),
                 "MPI_Bcast");
}

Result<AllreduceTiming> MpiCollective::time_allreduce(size_t bytes, int iters, int warmup) {
  const size_t count = std::max<size_t>(bytes / sizeof(float), 1);
  if (count > static_cast<size_t>(INT_MAX)) return invalid("size too large for one MPI_Allreduce");
  std::vector<float> send(count, static_cast<float>(rank_ + 1));
  std::vector<float> recv(count, 0.0f);
  const auto run = [&] {
    return checked(
        MPI_Allreduce(send.data(), recv.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD),
        "MPI_Allreduce");
  };
  for (int i = 0; i < warmup; ++i) {
    if (auto done = run(); !done) return done.error();
  }
  MPI_Barrier(MPI_COMM_WORLD);
  const double start = MPI_Wtime();
  for (int i = 0; i < iters; ++i) {
    if (auto done = run(); !done) return done.error();
  }
  const double seconds = iters > 0 ? (MPI_Wtime() - start) / iters : 0.0;
  const float expected = static_cast<float>(size_) * static_cast<float>(size_ + 1) / 2.0f;
  double tally[2] = {seconds, 0.0};
  for (float v : recv) tally[1] += v != expected ? 1.0 : 0.0;
  if (auto reduced = sum_in_place(tally, 2, MPI_DOUBLE); !reduced) return reduced.error();
  return AllreduceTiming{tally[0] / size_, static_cast<long long>(tally[1])};
}

}  // namespace railyard::workloads
