#include "fuzz/targets.hpp"

#include "agent/streams/metrics.hpp"
#include "common/hostlist.hpp"
#include "jobs/mllog.hpp"
#include "jobs/sbatch.hpp"
#include "jobs/spec_json.hpp"
#include "jobs/validate.hpp"
#include "topology/io_json.hpp"
#include "topology/io_nvsmi.hpp"
#include "topology/io_slurm.hpp"

namespace railyard::fuzz {

void job_spec(std::string_view input) {
  auto spec = jobs::parse_job_spec_text(input);
  if (!spec) return;
  (void)jobs::validate_spec(*spec);
  // What was accepted must survive a round trip through the writer.
  auto again = jobs::parse_job_spec_text(jobs::to_json(*spec).dump());
  if (!again) __builtin_trap();
}

void sbatch(std::string_view input) {
  auto imported = jobs::parse_sbatch_script(input);
  if (imported) (void)jobs::validate_spec(imported->spec);
}

void mllog(std::string_view input) {
  agent::MllogTracker tracker(agent::MetricTarget{"eval_accuracy", 0.9});
  size_t start = 0;
  while (start <= input.size()) {
    size_t end = input.find('\n', start);
    if (end == std::string_view::npos) end = input.size();
    std::string_view line = input.substr(start, end - start);
    (void)jobs::parse_mllog(line);
    (void)tracker.feed(line);
    start = end + 1;
  }
}

void topology_json(std::string_view input) {
  auto c = topology::read_cluster_json(input);
  if (c) (void)topology::write_cluster_json(*c);
}

void topology_conf(std::string_view input) {
  auto c = topology::read_topology_conf(input);
  if (c) (void)topology::write_topology_conf(*c);
}

void nvsmi(std::string_view input) { (void)topology::parse_nvsmi_topo(input); }

void hostlist(std::string_view input) {
  auto names = expand_hostlist(input);
  if (names && names->size() < 100000) (void)compress_hostlist(*names);
}

}  // namespace railyard::fuzz
