#include "jobs/container.hpp"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace railyard::jobs {
namespace {

using Cases = std::vector<std::pair<std::string, std::string>>;

TEST(ContainerImage, ReadsReferencesAndArchivesNormalized) {
  const Cases cases = {
      {"nvcr.io/nvidia/pytorch:24.04-py3", "nvcr.io/nvidia/pytorch:24.04-py3"},
      {"nvcr.io#nvidia/pytorch:24.04-py3", "nvcr.io/nvidia/pytorch:24.04-py3"},  // pyxis/enroot
      {"docker://nvcr.io#nvidia/pytorch:24.04-py3", "nvcr.io/nvidia/pytorch:24.04-py3"},
      {"docker://ubuntu:22.04", "ubuntu:22.04"},
      {"ubuntu", "ubuntu"},
      {"library/ubuntu", "library/ubuntu"},
      {"localhost:5000/team/img_2.x-dev:v1.0_rc", "localhost:5000/team/img_2.x-dev:v1.0_rc"},
      {"ghcr.io/a/b@sha256:" + std::string(64, 'a'), "ghcr.io/a/b@sha256:" + std::string(64, 'a')},
      {"docker-archive:/lustre/images/pt.tar", "docker-archive:/lustre/images/pt.tar"},
      {"oci-archive:/scratch/img.tar", "oci-archive:/scratch/img.tar"},
  };
  for (const auto& [text, want] : cases) {
    auto r = parse_image(text);
    ASSERT_TRUE(r) << text << ": " << r.error().message;
    EXPECT_EQ(*r, want) << text;
  }
}

TEST(ContainerImage, EachRefusalSaysWhy) {
  const Cases cases = {
      {"", "empty: name an image, e.g. nvcr.io/nvidia/pytorch:24.04-py3"},
      {std::string(513, 'a'), "513 characters; at most 512"},
      {"nvcr.io/nvidia/pytorch 24.04", "contains a space or a control character"},
      {"ubuntu\t", "contains a space or a control character"},
      {"ubuntu\n", "contains a space or a control character"},
      {"docker-archive:img.tar",
       "docker-archive: needs the archive's absolute path on the node; \"img.tar\": not an absolute path"},
      {"oci-archive:", "oci-archive: needs the archive's absolute path on the node; \"\": empty"},
      {"docker-archive:/a/../b.tar", "has a \"..\" component"},
      {"/lustre/images/pt.sqsh", "a file, not an image"},
      {"./pt.sqsh", "enroot's squashfs files are not supported"},
      {"nvcr.io#nvidia#pytorch", "more than one '#'"},
      {"#nvidia/pytorch", "'#' separates a registry from the image's path"},
      {"nvcr.io#", "one is missing"},
      {"ada@nvcr.io#nvidia/pytorch", "a user name before the registry (USER@REGISTRY#...) is not supported"},
      {"nvcr.io/nvidia/PyTorch:24.04", "repository \"PyTorch\": expected lower-case letters and digits"},
      {"nvcr.io//pytorch", "an empty part between slashes"},
      {"ubuntu:", "tag \"\": expected letters, digits"},
      {"ubuntu:-x", "tag \"-x\""},
      {"ubuntu@sha256:abc", "digest \"sha256:abc\": expected ALGORITHM:HEX"},
      {"bad_host:x/img", "registry \"bad_host:x\": expected HOST or HOST:PORT"},
      {"img!", "repository \"img!\""},
  };
  for (const auto& [text, want] : cases) {
    auto r = parse_image(text);
    ASSERT_FALSE(r) << text << " read as " << *r;
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(r.error().message.find(want), std::string::npos)
        << "image: " << text.substr(0, 80) << "\nerror: " << r.error().message << "\nwanted: " << want;
  }
}

TEST(ContainerMount, ReadsSourceTargetAndMode) {
  const std::vector<std::pair<std::string, Mount>> cases = {
      {"/lustre:/data:ro", {"/lustre", "/data", true}},
      {"/lustre:/data:rw", {"/lustre", "/data", false}},
      {"/lustre:/data", {"/lustre", "/data", false}},
      {"/home/ada//ckpt/:/ckpt/", {"/home/ada/ckpt", "/ckpt", false}},  // slashes normalized
      {"/path with space:/in", {"/path with space", "/in", false}},
      {"/:/host:ro", {"/", "/host", true}},
  };
  for (const auto& [text, want] : cases) {
    auto r = parse_mount(text);
    ASSERT_TRUE(r) << text << ": " << r.error().message;
    EXPECT_EQ(*r, want) << text;
  }
  EXPECT_EQ((Mount{"/a", "/b", true}).text(), "/a:/b:ro");
  EXPECT_EQ((Mount{"/a", "/b", false}).text(), "/a:/b");
}

TEST(ContainerMount, EachRefusalSaysWhy) {
  const Cases cases = {
      {"/lustre", "expected SRC:DST, SRC:DST:ro or SRC:DST:rw"},
      {"/a:/b:ro:x", "expected SRC:DST, SRC:DST:ro or SRC:DST:rw"},
      {"/a:/b:rbind", "option \"rbind\": expected ro or rw"},
      {"/a:/b:", "option \"\": expected ro or rw"},
      {":/data", "source \"\": empty"},
      {"/lustre:", "target \"\": empty"},
      {"lustre:/data", "source \"lustre\": not an absolute path"},
      {"/lustre:data", "target \"data\": not an absolute path"},
      {"/lustre/../etc:/data", "source \"/lustre/../etc\": has a \"..\" component"},
      {"/lustre:/data/..", "target \"/data/..\": has a \"..\" component"},
      {"/lustre:/", "target \"/\": cannot mount over the container's root"},
      {"/lustre://", "cannot mount over the container's root"},
      {"/a\x01:/b", "contains a control character"},
      {"/a:/\xff", "not valid UTF-8"},
      {"/a:/" + std::string(4096, 'x'), "4097 bytes; at most 4096"},
  };
  for (const auto& [text, want] : cases) {
    auto r = parse_mount(text);
    ASSERT_FALSE(r) << text;
    EXPECT_NE(r.error().message.find(want), std::string::npos)
        << "mount: " << text.substr(0, 80) << "\nerror: " << r.error().message << "\nwanted: " << want;
  }
}

TEST(ContainerMount, PyxisListsTakeCommasAndBareSources) {
  auto r = parse_mount_list("/lustre:/data:ro,/home/ada,/scratch:/scratch:rw");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(*r, (std::vector<Mount>{{"/lustre", "/data", true},
                                    {"/home/ada", "/home/ada", false},
                                    {"/scratch", "/scratch", false}}));
  const Cases bad = {
      {"/a:/b,,/c", "an empty mount between commas"},
      {"/a:/b,", "an empty mount between commas"},
      {"/a:/b,rel", "mount \"rel\": source \"rel\": not an absolute path"},
      {"/a:/b:x", "mount \"/a:/b:x\": option \"x\": expected ro or rw"},
  };
  for (const auto& [text, want] : bad) {
    auto m = parse_mount_list(text);
    ASSERT_FALSE(m) << text;
    EXPECT_NE(m.error().message.find(want), std::string::npos) << text << "\n" << m.error().message;
  }
}

TEST(ContainerSpecProblems, NameEveryFieldAndPassAGoodOne) {
  ContainerSpec good{
      "nvcr.io/nvidia/pytorch:24.04-py3", {{"/lustre", "/data", true}}, "/workspace", false, "pt-24"};
  EXPECT_TRUE(container_problems(good).empty());

  ContainerSpec bad;
  bad.mounts = {{"/a", "/data", false}, {"/b", "/data/", true}, {"rel", "/c", false}};
  bad.workdir = "workspace";
  bad.name = "my name";
  EXPECT_EQ(container_problems(bad),
            (std::vector<std::string>{
                "container.image: missing (the image to run in, e.g. nvcr.io/nvidia/pytorch:24.04-py3)",
                "container.mounts[2] \"rel:/c\": source \"rel\": not an absolute path",
                "container.mounts: two mounts at \"/data\" (\"/a:/data\" and \"/b:/data/:ro\")",
                "container.workdir \"workspace\": not an absolute path",
                "container.name \"my name\": only letters, digits, '_', '.' and '-'",
            }));

  ContainerSpec many = good;
  many.mounts.clear();
  for (size_t i = 0; i <= kMaxMounts; ++i) many.mounts.push_back({"/src", "/m" + std::to_string(i), true});
  ASSERT_EQ(container_problems(many).size(), 1u);
  EXPECT_EQ(container_problems(many)[0], "container.mounts: 65 mounts; at most 64");
  many.mounts.pop_back();
  EXPECT_TRUE(container_problems(many).empty());  // 64 is allowed

  ContainerSpec odd = good;
  odd.image = "nvcr.io#nvidia#x";
  odd.workdir = "/w/../x";
  odd.name = std::string(129, 'n');
  EXPECT_EQ(container_problems(odd),
            (std::vector<std::string>{"container.image \"nvcr.io#nvidia#x\": more than one '#'",
                                      "container.workdir \"/w/../x\": has a \"..\" component",
                                      "container.name: 129 characters; at most 128"}));
}

}  // namespace
}  // namespace railyard::jobs
