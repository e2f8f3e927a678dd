#include "agent/launch/alloc_dir.hpp"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

namespace railyard::agent {

namespace fs = std::filesystem;

namespace {

std::string why(int err) { return std::strerror(err); }

Error refused(const fs::path& file, const std::string& reason) {
  return Error{ErrorCode::kPermission, "refusing " + file.string() + ": " + reason};
}

// One walk for every caller: openat2 with no link anywhere and nothing outside `dir`, else (no openat2 in the
// kernel, or a seccomp filter refusing it) openat component by component with O_NOFOLLOW.
int open_beneath(int dir, const std::string& name, int flags) {
  return open_beneath_walk(dir, name, flags, true);
}

std::vector<std::string> split_components(const std::string& relative) {
  std::vector<std::string> parts;
  for (size_t at = 0;;) {
    const size_t slash = relative.find('/', at);
    parts.push_back(relative.substr(at, slash == std::string::npos ? std::string::npos : slash - at));
    if (slash == std::string::npos) return parts;
    at = slash + 1;
  }
}

bool is_relative_path(const std::string& relative) {
  const auto parts = split_components(relative);
  return std::all_of(parts.begin(), parts.end(), [](const std::string& p) { return is_component(p); });
}

// The agent's own directory `parent` (made when missing), refused when someone else could write in it: the
// names below it are walked by path, which is safe only while no job can swap them.
Result<Fd> open_agent_dir(const fs::path& parent) {
  std::error_code ec;
  fs::create_directories(parent, ec);
  if (ec) return internal_error("cannot create " + parent.string() + ": " + ec.message());
  Fd p(open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  struct stat st {};
  if (!p || fstat(p.get(), &st) != 0) return internal_error("cannot open " + parent.string() + ": " + why(errno));
  if (st.st_uid != geteuid() || (st.st_mode & (S_IWGRP | S_IWOTH)) != 0)
    return refused(parent, "it must be the agent's and not writable by others (mode " +
                               std::to_string(st.st_mode & 07777) + ", uid " + std::to_string(st.st_uid) + ")");
  return p;
}

// `name` in `parent` as a directory, never through a link.
Result<Fd> open_subdir(int parent, const fs::path& path, const std::string& name) {
  Fd d(open_beneath(parent, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (d) return d;
  if (errno == ENOENT) return not_found("no directory " + path.string());
  if (errno == ELOOP || errno == ENOTDIR) return refused(path, "not a directory (a link, or a file in its place)");
  return internal_error("cannot open " + path.string() + ": " + why(errno));
}

}  // namespace

int open_beneath_walk(int dir, const std::string& relative, int flags, bool use_openat2) {
#ifdef SYS_openat2
  if (use_openat2) {
    open_how how{};
    how.flags = static_cast<unsigned long long>(flags | O_NOFOLLOW);
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
    const long fd = syscall(SYS_openat2, dir, relative.c_str(), &how, sizeof how);
    if (fd >= 0 || (errno != ENOSYS && errno != EPERM)) return static_cast<int>(fd);
  }
#endif
  // Callers pass components checked by is_component, so no ".." climbs out and no '/' starts at the root.
  const auto parts = split_components(relative);
  Fd here;  // the directory walked into so far; `dir` itself is the caller's
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    Fd next(
        openat(here ? here.get() : dir, parts[i].c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!next) return -1;
    here = std::move(next);
  }
  return openat(here ? here.get() : dir, parts.back().c_str(), flags | O_NOFOLLOW);
}

bool is_component(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
         name.find('\0') == std::string::npos;
}

Result<Fd> make_owned_dir(const fs::path& parent, const std::string& name, const std::optional<Credentials>& owner) {
  const fs::path path = parent / name;
  if (!is_component(name)) return invalid("bad directory name '" + name + "'");
  auto p = open_agent_dir(parent);
  if (!p) return p.error();
  if (mkdirat(p->get(), name.c_str(), 0700) != 0 && errno != EEXIST)
    return internal_error("cannot create " + path.string() + ": " + why(errno));
  auto d = open_subdir(p->get(), path, name);
  if (!d) return d.error();
  struct stat st {};
  if (fstat(d->get(), &st) != 0) return internal_error("cannot stat " + path.string() + ": " + why(errno));
  const uid_t uid = owner ? owner->uid : geteuid();
  const gid_t gid = owner ? owner->gid : getegid();
  // The agent's own directory (just made, or made before the job started) is handed over; a directory some
  // other user made is never adopted.
  if (st.st_uid != uid && st.st_uid != geteuid())
    return refused(path, "owned by uid " + std::to_string(st.st_uid) + ", not " + std::to_string(uid));
  if ((st.st_uid != uid || st.st_gid != gid) && fchown(d->get(), uid, gid) != 0)
    return internal_error("cannot chown " + path.string() + ": " + why(errno));
  if ((st.st_mode & 07777) != 0700 && fchmod(d->get(), 0700) != 0)
    return internal_error("cannot chmod " + path.string() + ": " + why(errno));
  return d;
}

Result<AllocDir> AllocDir::make(const fs::path& node_dir, long long job, const std::string& alloc,
                                const std::optional<Credentials>& owner) {
  const fs::path parent = node_dir / "jobs" / std::to_string(job);
  auto d = make_owned_dir(parent, alloc, owner);
  if (!d) return d.error();
  return AllocDir(parent / alloc, std::move(*d), owner ? owner->uid : geteuid(),
                  owner ? owner->gid : getegid());
}

Result<AllocDir> AllocDir::open(const fs::path& node_dir, long long job, const std::string& alloc) {
  return open_owned(node_dir / "jobs" / std::to_string(job), alloc);
}

Result<AllocDir> AllocDir::open_owned(const fs::path& parent, const std::string& name) {
  if (!is_component(name)) return invalid("bad directory name '" + name + "'");
  Fd p(::open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!p) return not_found("no directory " + parent.string());
  struct stat st {};
  if (fstat(p.get(), &st) != 0) return internal_error("cannot stat " + parent.string() + ": " + why(errno));
  if (st.st_uid != geteuid() || (st.st_mode & (S_IWGRP | S_IWOTH)) != 0)
    return refused(parent, "it must be the agent's and not writable by others");
  auto d = open_subdir(p.get(), parent / name, name);
  if (!d) return d.error();
  if (fstat(d->get(), &st) != 0) return internal_error("cannot stat " + (parent / name).string());
  return AllocDir(parent / name, std::move(*d), st.st_uid, st.st_gid);
}

Result<Fd> AllocDir::create(const std::string& name) const {
  const fs::path file = path_ / name;
  if (!is_component(name)) return invalid("bad file name '" + name + "'");
  if (unlinkat(fd(), name.c_str(), 0) != 0 && errno != ENOENT)
    return refused(file, "cannot remove what has its name: " + why(errno));
  Fd f(openat(fd(), name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, 0600));
  // EEXIST: the job made the name again between the unlink and the create; its own launch fails, nothing else.
  if (!f) return refused(file, "cannot create it: " + why(errno));
  if (owner_uid_ != geteuid() && fchown(f.get(), owner_uid_, owner_gid_) != 0)
    return internal_error("cannot chown " + file.string() + ": " + why(errno));
  return f;
}

Status AllocDir::write(const std::string& name, const std::string& text) const {
  auto f = create(name);
  if (!f) return f.error();
  for (size_t done = 0; done < text.size();) {
    const ssize_t n = ::write(f->get(), text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return internal_error("cannot write " + (path_ / name).string() + ": " + why(errno));
    done += static_cast<size_t>(n);
  }
  return ok();
}

Result<Fd> AllocDir::open_read(const std::string& name) const {
  if (!is_component(name)) return invalid("bad file name '" + name + "'");
  return open_read_below(name);
}

Result<Fd> AllocDir::open_read_below(const std::string& relative) const {
  const fs::path file = path_ / relative;
  if (!is_relative_path(relative)) return invalid("bad file name '" + relative + "'");
  Fd f(open_beneath(fd(), relative, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY));
  if (!f && errno == ENOENT) return not_found("no " + relative);
  if (!f && (errno == ELOOP || errno == ENOTDIR || errno == EXDEV))
    return refused(file, "a symbolic link (or a file where a directory should be) on the way");
  if (!f) return refused(file, why(errno));
  struct stat st {};
  if (fstat(f.get(), &st) != 0) return internal_error("cannot stat " + file.string() + ": " + why(errno));
  if (!S_ISREG(st.st_mode)) return refused(file, "not a regular file");
  // A hard link to another user's file (where the kernel's protected_hardlinks is off) is not the job's.
  if (st.st_uid != owner_uid_)
    return refused(file, "owned by uid " + std::to_string(st.st_uid) + ", not the allocation's owner");
  return f;
}

}  // namespace railyard::agent
