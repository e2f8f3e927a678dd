// The CLI's time wording: a waiting job's reservation said as people read it (issue 47), never a raw epoch.
#include <gtest/gtest.h>

#include <ctime>
#include <regex>

#include "cli/output.hpp"

namespace railyard::cli {
namespace {

constexpr int64_t kAt = 1'796'606'064;

std::string clock_of(int64_t t) {
  const std::time_t secs = static_cast<std::time_t>(t);
  std::tm tm{};
  ::localtime_r(&secs, &tm);
  char buf[8];
  std::strftime(buf, sizeof buf, "%H:%M", &tm);
  return buf;
}

TEST(FormatStartsIn, SaysHowLongAndTheLocalClockTime) {
  EXPECT_EQ(format_starts_in(kAt - 5, kAt), "starts any moment");
  EXPECT_EQ(format_starts_in(kAt + 30, kAt), "starts in <1 min");
  EXPECT_EQ(format_starts_in(kAt + 240, kAt), "starts in ~4 min, " + clock_of(kAt + 240));
  EXPECT_EQ(format_starts_in(kAt + 89 * 60, kAt), "starts in ~89 min, " + clock_of(kAt + 89 * 60));
  EXPECT_EQ(format_starts_in(kAt + 3 * 3600, kAt), "starts in ~3 h, " + clock_of(kAt + 3 * 3600));
  // Past a day the weekday and date come with the time.
  EXPECT_TRUE(std::regex_match(format_starts_in(kAt + 5 * 86400, kAt),
                               std::regex("starts in ~5 days, [A-Z][a-z]{2} \\d\\d [A-Z][a-z]{2} \\d\\d:\\d\\d")))
      << format_starts_in(kAt + 5 * 86400, kAt);
}

TEST(ContainerRows, ShowTheImageMountsFolderAndRootFileSystem) {
  using Rows = std::vector<std::pair<std::string, std::string>>;
  const auto spec = nlohmann::json::parse(R"({"workdir": "/home/ada/run", "container": {
    "image": "nvcr.io/nvidia/pytorch:24.04-py3", "mounts": ["/lustre/imagenet:/data:ro", "/scratch:/scratch"],
    "workdir": "", "writable": false, "name": ""}})");
  EXPECT_EQ(container_rows(spec), (Rows{{"image", "nvcr.io/nvidia/pytorch:24.04-py3"},
                                        {"mounts", "/lustre/imagenet:/data:ro, /scratch:/scratch"},
                                        {"container dir", "/home/ada/run (the job's workdir)"},
                                        {"root fs", "read-only (/tmp, /run, /var/tmp writable)"}}));
  const auto named = nlohmann::json::parse(R"({"container": {"image": "ubuntu", "mounts": [],
    "workdir": "/workspace", "writable": true, "name": "pt"}})");
  EXPECT_EQ(container_rows(named), (Rows{{"image", "ubuntu"},
                                         {"mounts", "none"},
                                         {"container dir", "/workspace"},
                                         {"root fs", "writable"},
                                         {"container name", "pt"}}));
  EXPECT_TRUE(container_rows(nlohmann::json::parse(R"({"workdir": "/x"})")).empty());
  EXPECT_TRUE(container_rows(nlohmann::json()).empty());
}

}  // namespace
}  // namespace railyard::cli
