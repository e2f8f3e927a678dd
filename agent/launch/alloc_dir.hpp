// AllocDir: the one owner of every touch the root agent makes inside a directory a job's user can write (the
// node trust boundary, issue 44). The allocation directory <node state>/jobs/<job>/<alloc> belongs to the
// job's user, so every name in it is hostile: a log may have become a symbolic link to /etc/passwd, a FIFO,
// or a hard link to a root-only file by the time the agent looks.
//
//   make_owned_dir(parent, name, owner) --mkdirat + openat(O_DIRECTORY|O_NOFOLLOW) + fstat + fchown--> AllocDir
//   AllocDir::create(name)    unlinkat whatever is there, openat(O_CREAT|O_EXCL|O_NOFOLLOW), fchown: logs, hostfile
//   AllocDir::open_read(name) openat2(RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS) (else O_NOFOLLOW), O_NONBLOCK,
//                             fstat: a regular file owned by the directory's owner, or refused
//   AllocDir::open_read_below("a/b/file")  the same through several components (files Open MPI makes in
//                             subdirectories: <mpi-output>/<alloc>/1/rank.N/stdout), no link anywhere
//
// Contract: the parent of an owned directory is the agent's (root-owned, not writable by jobs), so the path
// down to it can be walked by name; below it only these calls, relative to the directory descriptor, each
// name one path component (open_read_below: a relative path of such components). Nothing here follows a
// link, blocks on a FIFO or device, or changes a file it did not just create.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <optional>
#include <string>

#include "agent/launch/process.hpp"
#include "common/fd.hpp"
#include "common/result.hpp"

namespace railyard::agent {

class AllocDir {
 public:
  // <node_dir>/jobs/<job>/<alloc>, created when missing: 0700 and the owner's (the agent's own user when
  // `owner` is empty). An existing directory is used only when it is a real directory (no link) of that owner.
  static Result<AllocDir> make(const std::filesystem::path& node_dir, long long job, const std::string& alloc,
                               const std::optional<Credentials>& owner);
  // An existing allocation directory, for reading its logs (after the job ended, or after an agent restart).
  static Result<AllocDir> open(const std::filesystem::path& node_dir, long long job, const std::string& alloc);
  // An existing owned directory `name` (one component) of the agent's directory `parent`, opened without
  // following a link; refused when `parent` is not the agent's or others can write in it. For reading what a
  // job's processes wrote into a directory make_owned_dir made (the per-allocation mpi output directory).
  static Result<AllocDir> open_owned(const std::filesystem::path& parent, const std::string& name);

  const std::filesystem::path& path() const { return path_; }
  int fd() const { return fd_.get(); }
  uid_t owner() const { return owner_uid_; }

  // A new file the agent writes and the job's user owns (mode 0600): whatever had the name is unlinked first
  // (a link is removed, never followed), then it is created exclusively. Opened read-write, so the agent can
  // read back through it what the job writes (rank 0's MLLOG lines) without opening the name again.
  Result<Fd> create(const std::string& name) const;
  // create() and write all of `text` (the mpi hostfile).
  Status write(const std::string& name, const std::string& text) const;
  // A file of the directory opened for reading, refused unless it is a regular file of the directory's owner
  // reached without any link; never blocks (O_NONBLOCK).
  Result<Fd> open_read(const std::string& name) const;
  // open_read for a file below the directory: `relative` is components joined by '/' (no empty, "." or ".."
  // component, not absolute). A link at any component, a directory or FIFO at the end, or a file of another
  // user is refused; never blocks.
  Result<Fd> open_read_below(const std::string& relative) const;

 private:
  AllocDir(std::filesystem::path path, Fd fd, uid_t uid, gid_t gid)
      : path_(std::move(path)), fd_(std::move(fd)), owner_uid_(uid), owner_gid_(gid) {}
  std::filesystem::path path_;
  Fd fd_;
  uid_t owner_uid_ = 0;
  gid_t owner_gid_ = 0;
};

// A directory `name` in the agent's own directory `parent` (created with its parents when missing) that
// belongs to `owner` (the agent's user when empty), mode 0700: made with mkdirat, opened without following
// a link, checked and chowned through its descriptor. For allocation directories and the per-allocation
// Open MPI directories (vader backing store, orted session directory) of a job's user.
Result<Fd> make_owned_dir(const std::filesystem::path& parent, const std::string& name,
                          const std::optional<Credentials>& owner);

// The walk open_read_below uses, on a directory descriptor: openat2(RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS)
// of the whole path, or (`use_openat2` false, or a kernel or seccomp filter without it) openat of each
// component with O_NOFOLLOW, the directories with O_DIRECTORY. `flags` are the final open's. A descriptor,
// or -1 with errno (ELOOP or ENOTDIR for a link). Exposed so tests run both walks.
int open_beneath_walk(int dir, const std::string& relative, int flags, bool use_openat2);

// Whether `name` is one safe path component: not empty, no '/', no NUL, not "." or "..".
bool is_component(const std::string& name);

}  // namespace railyard::agent
