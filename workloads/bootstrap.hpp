// How a worker learns its place in the job, and how rank 0's NCCL unique id reaches the other ranks.
//
//   launched by          rank/world from                              NCCL id travels by
//   mpirun (launcher mpi) OMPI_COMM_WORLD_RANK / _SIZE                 MPI_Bcast
//   env (torchrun-style)  RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT TCP: rank 0 serves it on MASTER_PORT
//   nothing               a world of one                               (not needed)
//
// The TCP exchange is deliberately tiny: rank 0 listens, accepts world - 1 connections and writes
// [4-byte big-endian length][bytes] to each; the others retry connecting until a deadline.
#pragma once

#include <chrono>
#include <span>
#include <string>
#include <vector>

#include "common/result.hpp"

namespace railyard::workloads {

struct LaunchInfo {
  enum class Kind { kMpirun, kEnv, kSingleton };
  Kind kind = Kind::kSingleton;
  int rank = 0;
  int world = 1;
  std::string master_addr;  // kEnv only
  int master_port = 0;      // kEnv only
};

// Reads the environment. Malformed values (RANK >= WORLD_SIZE, missing MASTER_ADDR with WORLD_SIZE > 1)
// are errors.
Result<LaunchInfo> detect_launch();

// Rank 0's side. Binds 0.0.0.0:port (0 picks a free port, for tests).
class BlobServer {
 public:
  static Result<BlobServer> listen(int port);
  BlobServer(BlobServer&& other) noexcept;
  BlobServer& operator=(BlobServer&&) = delete;
  BlobServer(const BlobServer&) = delete;
  ~BlobServer();

  int port() const { return port_; }
  // Hands `blob` to `clients` connections, or fails when they have not all come by the deadline.
  Status serve(std::span<const unsigned char> blob, int clients, std::chrono::milliseconds timeout);

 private:
  BlobServer(int fd, int port) : fd_(fd), port_(port) {}
  int fd_;
  int port_;
};

// Another rank's side: connects (retrying while rank 0 starts) and reads the blob.
Result<std::vector<unsigned char>> fetch_blob(const std::string& host, int port,
                                              std::chrono::milliseconds timeout);

}  // namespace railyard::workloads
