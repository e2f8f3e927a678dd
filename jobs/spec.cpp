#include "jobs/spec.hpp"

#include <array>
#include <utility>

namespace railyard::jobs {
namespace {

template <typename E, size_t N>
std::optional<E> lookup(const std::array<std::pair<E, std::string_view>, N>& table, std::string_view s) {
  for (const auto& [e, name] : table)
    if (name == s) return e;
  return std::nullopt;
}
template <typename E, size_t N>
std::string_view name_of(const std::array<std::pair<E, std::string_view>, N>& table, E e) {
  for (const auto& [v, name] : table)
    if (v == e) return name;
  return "unknown";
}

constexpr std::array<std::pair<JobKind, std::string_view>, 2> kKinds = {{{JobKind::kBatch, "batch"}, {JobKind::kService, "service"}}};
constexpr std::array<std::pair<Qos, std::string_view>, 3> kQos = {
    {{Qos::kHigh, "high"}, {Qos::kNormal, "normal"}, {Qos::kScavenger, "scavenger"}}};
constexpr std::array<std::pair<Launcher, std::string_view>, 3> kLaunchers = {
    {{Launcher::kNone, "none"}, {Launcher::kEnv, "env"}, {Launcher::kMpi, "mpi"}}};
constexpr std::array<std::pair<Layout, std::string_view>, 3> kLayouts = {
    {{Layout::kAuto, "auto"}, {Layout::kPack, "pack"}, {Layout::kSpread, "spread"}}};
constexpr std::array<std::pair<JobState, std::string_view>, 11> kStates = {{
    {JobState::kPending, "PENDING"},
    {JobState::kHeld, "HELD"},
    {JobState::kStarting, "STARTING"},
    {JobState::kRunning, "RUNNING"},
    {JobState::kCompleted, "COMPLETED"},
    {JobState::kFailed, "FAILED"},
    {JobState::kCancelled, "CANCELLED"},
    {JobState::kTimeout, "TIMEOUT"},
    {JobState::kNodeFail, "NODE_FAIL"},
    {JobState::kPreempted, "PREEMPTED"},
    {JobState::kOutOfMemory, "OUT_OF_MEMORY"},
}};

constexpr std::array<std::pair<Dependency::Type, std::string_view>, 4> kDependencyTypes = {
    {{Dependency::Type::kAfterOk, "afterok"},
     {Dependency::Type::kAfterAny, "afterany"},
     {Dependency::Type::kAfterNotOk, "afternotok"},
     {Dependency::Type::kAfterCorr, "aftercorr"}}};

}  // namespace

std::string_view to_string(Dependency::Type t) { return name_of(kDependencyTypes, t); }
std::optional<Dependency::Type> parse_dependency_type(std::string_view s) {
  return lookup(kDependencyTypes, s);
}

std::string Mount::text() const { return source + ":" + target + (read_only ? ":ro" : ""); }

std::string Dependency::text() const {
  std::string out = std::string(to_string(type)) + ":" + std::to_string(job);
  if (task >= 0) out += "_" + std::to_string(task);
  return out;
}

std::string Dependency::target() const {
  if (task < 0) return "job " + std::to_string(job);
  return "task " + std::to_string(task) + " of array " + std::to_string(job);
}

std::string_view to_string(JobKind k) { return name_of(kKinds, k); }
std::string_view to_string(Qos q) { return name_of(kQos, q); }
std::string_view to_string(Launcher l) { return name_of(kLaunchers, l); }
std::string_view to_string(Layout l) { return name_of(kLayouts, l); }
std::string_view to_string(JobState s) { return name_of(kStates, s); }
std::optional<JobKind> parse_kind(std::string_view s) { return lookup(kKinds, s); }
std::optional<Qos> parse_qos(std::string_view s) { return lookup(kQos, s); }
std::optional<Launcher> parse_launcher(std::string_view s) { return lookup(kLaunchers, s); }
std::optional<Layout> parse_layout(std::string_view s) { return lookup(kLayouts, s); }
std::optional<JobState> parse_state(std::string_view s) { return lookup(kStates, s); }

bool is_terminal(JobState s) {
  switch (s) {
    case JobState::kCompleted:
    case JobState::kFailed:
    case JobState::kCancelled:
    case JobState::kTimeout:
    case JobState::kNodeFail:
    case JobState::kPreempted:
    case JobState::kOutOfMemory: return true;
    default: return false;
  }
}

int JobSpec::total_gpus() const {
  if (nodes > 0 && gpus_per_node > 0) return nodes * gpus_per_node;
  return gpus;
}

}  // namespace railyard::jobs
