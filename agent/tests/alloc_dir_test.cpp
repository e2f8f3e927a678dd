// AllocDir (agent/launch/alloc_dir.hpp): what a job can leave in its allocation directory never steers the
// agent. Each case plants what a hostile job would (a link to a file it cannot read, a FIFO, another user's
// file, a link in place of a directory) and checks the agent's call neither follows, blocks nor changes it.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/launch/alloc_dir.hpp"
#include "agent/tests/test_util.hpp"

namespace railyard::agent {
namespace {

namespace fs = std::filesystem;
using testing::read_file;
using testing::TempDir;
using testing::write_file;

std::string read_all(int fd) {
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = pread(fd, buf, sizeof buf, static_cast<off_t>(out.size()))) > 0;)
    out.append(buf, static_cast<size_t>(n));
  return out;
}

class AllocDirTest : public ::testing::Test {
 protected:
  AllocDir make() {
    auto d = AllocDir::make(tmp_.path(), 7, "7.1", std::nullopt);
    EXPECT_TRUE(d) << d.error().message;
    return std::move(*d);
  }
  fs::path dir() const { return tmp_.path() / "jobs" / "7" / "7.1"; }
  fs::path outside(const std::string& name) const { return tmp_.path() / name; }

  TempDir tmp_;
};

TEST_F(AllocDirTest, CreateReplacesALinkInsteadOfWritingThroughIt) {
  AllocDir d = make();
  write_file(outside("target"), "precious\n");
  fs::create_symlink(outside("target"), dir() / "exec-n1-0.out");
  auto f = d.create("exec-n1-0.out");
  ASSERT_TRUE(f) << f.error().message;
  ASSERT_EQ(::write(f->get(), "log\n", 4), 4);
  EXPECT_EQ(read_file(outside("target")), "precious\n") << "the link was followed";
  EXPECT_FALSE(fs::is_symlink(dir() / "exec-n1-0.out"));
  EXPECT_EQ(read_file(dir() / "exec-n1-0.out"), "log\n");
  EXPECT_EQ(fs::status(dir() / "exec-n1-0.out").permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write);
}

TEST_F(AllocDirTest, CreateRefusesADirectoryInTheWay) {
  AllocDir d = make();
  fs::create_directory(dir() / "hostfile");
  auto f = d.create("hostfile");
  ASSERT_FALSE(f);
  EXPECT_NE(f.error().message.find("hostfile"), std::string::npos) << f.error().message;
}

TEST_F(AllocDirTest, OpenReadRefusesALinkAFifoAndBadNames) {
  AllocDir d = make();
  write_file(outside("secret"), "node key\n");
  fs::create_symlink(outside("secret"), dir() / "rank-0.out");
  auto link = d.open_read("rank-0.out");
  ASSERT_FALSE(link);
  EXPECT_NE(link.error().message.find("symbolic link"), std::string::npos) << link.error().message;

  ASSERT_EQ(::mkfifo((dir() / "rank-1.out").c_str(), 0600), 0);
  auto fifo = d.open_read("rank-1.out");  // returns at once: O_NONBLOCK, then refused by type
  ASSERT_FALSE(fifo);
  EXPECT_NE(fifo.error().message.find("not a regular file"), std::string::npos) << fifo.error().message;

  for (const char* bad : {"../secret", "..", "", "a/b"}) EXPECT_FALSE(d.open_read(bad)) << bad;
  auto missing = d.open_read("rank-9.out");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);

  write_file(dir() / "rank-2.out", "hello\n");
  auto plain = d.open_read("rank-2.out");
  ASSERT_TRUE(plain) << plain.error().message;
  EXPECT_EQ(read_all(plain->get()), "hello\n");
}

TEST_F(AllocDirTest, OpenReadRefusesAFileOfAnotherOwner) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give a file to another user";
  const struct passwd* nobody = ::getpwnam("nobody");
  ASSERT_NE(nobody, nullptr);
  AllocDir d = make();  // the agent's own directory: its files must be the agent's
  write_file(dir() / "rank-0.out", "someone else's\n");
  ASSERT_EQ(::chown((dir() / "rank-0.out").c_str(), nobody->pw_uid, nobody->pw_gid), 0);
  auto f = d.open_read("rank-0.out");
  ASSERT_FALSE(f);
  EXPECT_NE(f.error().message.find("owned by uid"), std::string::npos) << f.error().message;
}

TEST_F(AllocDirTest, MakeRefusesALinkInPlaceOfTheDirectory) {
  fs::create_directories(tmp_.path() / "jobs" / "7");
  fs::create_directory(outside("elsewhere"));
  fs::create_directory_symlink(outside("elsewhere"), dir());
  auto d = AllocDir::make(tmp_.path(), 7, "7.1", std::nullopt);
  ASSERT_FALSE(d);
  EXPECT_NE(d.error().message.find("not a directory"), std::string::npos) << d.error().message;
}

TEST_F(AllocDirTest, MakeRefusesAParentOthersCanWrite) {
  fs::create_directories(tmp_.path() / "jobs" / "7");
  fs::permissions(tmp_.path() / "jobs" / "7", fs::perms::all);  // 0777: a job could swap the directory
  auto d = AllocDir::make(tmp_.path(), 7, "7.1", std::nullopt);
  ASSERT_FALSE(d);
  EXPECT_NE(d.error().message.find("not writable by others"), std::string::npos) << d.error().message;
}

TEST_F(AllocDirTest, MadeForAUserTheDirectoryAndItsFilesAreTheirs) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to hand a directory to another user";
  const struct passwd* pw = ::getpwnam("nobody");
  ASSERT_NE(pw, nullptr);
  Credentials nobody{"nobody", pw->pw_uid, pw->pw_gid, {}, pw->pw_dir};
  auto d = AllocDir::make(tmp_.path(), 7, "7.1", nobody);
  ASSERT_TRUE(d) << d.error().message;
  struct stat st {};
  ASSERT_EQ(::stat(dir().c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, pw->pw_uid);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  ASSERT_TRUE(d->write("hostfile", "n1 slots=2\n"));
  ASSERT_EQ(::stat((dir() / "hostfile").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, pw->pw_uid);
  auto back = d->open_read("hostfile");
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(read_all(back->get()), "n1 slots=2\n");
  // Made again (an exec order for the same allocation): the same directory, still theirs.
  EXPECT_TRUE(AllocDir::make(tmp_.path(), 7, "7.1", nobody));
  // Another user's directory is never taken over for this one.
  Credentials other = nobody;
  other.uid += 1;
  EXPECT_FALSE(AllocDir::make(tmp_.path(), 7, "7.1", other));
}

// The per-allocation mpi output directory: Open MPI writes 1/rank.N/stdout below it, so the agent reads
// through several components the job's user could replace.
class OwnedBelowTest : public AllocDirTest {
 protected:
  AllocDir owned() {
    auto made = make_owned_dir(tmp_.path() / "mpi-output", "7.1", std::nullopt);
    EXPECT_TRUE(made) << made.error().message;
    auto d = AllocDir::open_owned(tmp_.path() / "mpi-output", "7.1");
    EXPECT_TRUE(d) << d.error().message;
    return std::move(*d);
  }
  fs::path below(const std::string& rel) const { return tmp_.path() / "mpi-output" / "7.1" / rel; }
};

TEST_F(OwnedBelowTest, ReadsAFileSeveralComponentsDown) {
  AllocDir d = owned();
  fs::create_directories(below("1/rank.3"));
  write_file(below("1/rank.3/stdout"), "rank 3\n");
  auto f = d.open_read_below("1/rank.3/stdout");
  ASSERT_TRUE(f) << f.error().message;
  EXPECT_EQ(read_all(f->get()), "rank 3\n");
  auto missing = d.open_read_below("1/rank.9/stdout");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
}

TEST_F(OwnedBelowTest, RefusesALinkInAMiddleComponentWithEitherWalk) {
  AllocDir d = owned();
  fs::create_directories(below("1"));
  fs::create_directory(outside("elsewhere"));
  write_file(outside("elsewhere") / "stdout", "node key\n");
  fs::create_directory_symlink(outside("elsewhere"), below("1/rank.4"));
  auto f = d.open_read_below("1/rank.4/stdout");
  ASSERT_FALSE(f);
  EXPECT_NE(f.error().message.find("symbolic link"), std::string::npos) << f.error().message;
  for (const bool openat2 : {true, false}) {
    errno = 0;
    const int fd = open_beneath_walk(d.fd(), "1/rank.4/stdout", O_RDONLY | O_NONBLOCK | O_CLOEXEC, openat2);
    if (fd >= 0) ::close(fd);
    EXPECT_EQ(fd, -1) << "openat2 " << openat2;
    EXPECT_TRUE(errno == ELOOP || errno == ENOTDIR) << "openat2 " << openat2 << ": " << errno;
  }
  // A link as the first component, and a link to the file itself.
  fs::create_directory_symlink(outside("elsewhere"), below("2"));
  EXPECT_FALSE(d.open_read_below("2/stdout"));
  fs::create_directories(below("1/rank.5"));
  fs::create_symlink(outside("elsewhere") / "stdout", below("1/rank.5/stdout"));
  EXPECT_FALSE(d.open_read_below("1/rank.5/stdout"));
}

TEST_F(OwnedBelowTest, RefusesAFifoWithoutBlockingAndBadPaths) {
  AllocDir d = owned();
  fs::create_directories(below("1/rank.1"));
  ASSERT_EQ(::mkfifo(below("1/rank.1/stdout").c_str(), 0600), 0);
  auto fifo = d.open_read_below("1/rank.1/stdout");  // returns at once: O_NONBLOCK, then refused by type
  ASSERT_FALSE(fifo);
  EXPECT_NE(fifo.error().message.find("not a regular file"), std::string::npos) << fifo.error().message;
  for (const bool openat2 : {true, false}) {  // neither walk blocks on it
    const int fd = open_beneath_walk(d.fd(), "1/rank.1/stdout", O_RDONLY | O_NONBLOCK | O_CLOEXEC, openat2);
    EXPECT_GE(fd, 0) << "openat2 " << openat2;
    if (fd >= 0) ::close(fd);
  }
  EXPECT_FALSE(d.open_read_below("1/rank.1")) << "a directory is not a log";
  for (const char* bad : {"", "/etc/passwd", "1/../../secret", "1//stdout", "./1", "1/rank.1/"}) {
    auto r = d.open_read_below(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument) << bad;
  }
}

TEST_F(OwnedBelowTest, OpenOwnedRefusesAParentOthersCanWriteAndALink) {
  owned();
  fs::permissions(tmp_.path() / "mpi-output", fs::perms::all);
  auto open = AllocDir::open_owned(tmp_.path() / "mpi-output", "7.1");
  ASSERT_FALSE(open);
  EXPECT_NE(open.error().message.find("not writable by others"), std::string::npos) << open.error().message;
  fs::permissions(tmp_.path() / "mpi-output", fs::perms::owner_all);
  fs::create_directory(outside("elsewhere"));
  fs::create_directory_symlink(outside("elsewhere"), tmp_.path() / "mpi-output" / "7.2");
  EXPECT_FALSE(AllocDir::open_owned(tmp_.path() / "mpi-output", "7.2"));
  EXPECT_EQ(AllocDir::open_owned(tmp_.path() / "mpi-output", "7.3").error().code, ErrorCode::kNotFound);
}

}  // namespace
}  // namespace railyard::agent
