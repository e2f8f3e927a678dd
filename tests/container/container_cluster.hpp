// The container suite's cluster: the attack suite's (a scheduler with node keys, one root agent hosting the
// emulated nodes n1 and n2, jobs as nobody) with real podman, and the images deploy/images.sh makes.
#pragma once

#include <cstdio>
#include <string>

#include "tests/attack/attack_cluster.hpp"

namespace railyard::testing {

inline constexpr const char* kBusybox = "localhost/railyard-busybox:1";
inline constexpr const char* kRuntime = "localhost/railyard-runtime:bookworm";

// Standard output of `command` (run by /bin/sh), trailing newlines dropped.
inline std::string capture(const std::string& command) {
  std::string out;
  if (FILE* p = ::popen(command.c_str(), "r")) {
    char buf[4096];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
    ::pclose(p);
  }
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

// "" when image jobs can run here; else why not (for GTEST_SKIP).
inline std::string container_skip_reason() {
  if (auto why = AttackCluster::skip_reason(); !why.empty()) return why;
  if (shell("podman --version >/dev/null 2>&1") != 0) return "podman is not installed (deploy/bootstrap.sh installs it)";
  for (const char* image : {kBusybox, kRuntime})
    if (shell(std::string("podman image exists ") + image) != 0)
      return std::string("image ") + image + " is missing: run deploy/images.sh";
  return {};
}

// The job's reason, "" while it has none (null).
inline std::string reason_of(AttackCluster& cluster, int64_t id) {
  const auto j = cluster.job(id);
  return j.contains("reason") && j["reason"].is_string() ? j["reason"].get<std::string>() : std::string();
}

// Names of the containers (running or not) of allocation `alloc` on node `node` of this cluster's agent, one
// per line. (Other tests' clusters run allocations of the same ids on nodes of the same names.)
inline std::string containers_of(const AttackCluster& cluster, const std::string& alloc,
                                 const std::string& node = "n1") {
  return capture("podman ps --all --filter label=railyard.alloc=" + alloc + " --filter label=railyard.node-dir=" +
                 cluster.agent_state() + "/nodes/" + node + " --format '{{.Names}}'");
}

}  // namespace railyard::testing
