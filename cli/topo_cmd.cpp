// `railyard topo`: registration of the group, and the generate and convert commands.
#include "cli/topo_cmd.hpp"

#include <CLI/CLI.hpp>
#include <memory>

#include "cli/cli_util.hpp"
#include "cli/commands.hpp"
#include "topology/generator.hpp"
#include "topology/io.hpp"

namespace railyard::cli {

using topology::Cluster;
using topology::FileFormat;

Cluster load_or_fail(const std::string& path, const std::string& default_profile) {
  auto cluster = topology::load_cluster_file(path, default_profile);
  if (!cluster) fail(cluster.error());
  return std::move(cluster).value();
}

Cluster superpod_or_fail(const std::string& preset, int sus) {
  auto cluster = topology::generate_superpod(preset, sus);
  if (!cluster) fail(cluster.error());
  return std::move(cluster).value();
}

namespace {

const std::vector<std::string> kFormats = {"json", "slurm"};

FileFormat format_or_fail(const std::string& name) {
  auto f = topology::parse_file_format(name);
  if (!f) fail(f.error());
  return *f;
}

// --format/--to when given, else the output file's extension, else JSON for standard output.
FileFormat output_format(const std::string& explicit_format, const std::string& path) {
  if (!explicit_format.empty()) return format_or_fail(explicit_format);
  if (path == "-") return FileFormat::kJson;
  auto f = topology::format_for_path(path);
  if (!f) fail_usage(f.error().message + "; pass --to json|slurm");
  return *f;
}

struct GenerateOptions {
  std::string preset;
  int sus = 1;
  int nodes = 0;
  int leaf_size = 32;
  int spine_size = 16;
  double oversubscription = 1.0;
  std::string profile = "dgx-h100";
  std::string output = "-";
  std::string format;
};

void run_generate(const GenerateOptions& o) {
  if (o.preset.empty() == (o.nodes == 0))
    fail_usage("give either --preset (with --sus) or --nodes (with --leaf-size)");
  Result<Cluster> cluster = o.nodes > 0
                                ? topology::generate_fat_tree({.nodes = o.nodes,
                                                               .leaf_size = o.leaf_size,
                                                               .spine_size = o.spine_size,
                                                               .profile = o.profile,
                                                               .leaf_oversubscription = o.oversubscription})
                                : topology::generate_superpod(o.preset, o.sus);
  if (!cluster) fail(cluster.error());
  if (auto s = topology::save_cluster_file(*cluster, o.output, output_format(o.format, o.output)); !s)
    fail(s.error());
}

void add_generate_command(CLI::App& topo) {
  auto o = std::make_shared<GenerateOptions>();
  std::string presets;
  for (const auto& p : topology::superpod_presets()) presets += "\n  " + p.name + ": " + p.description;
  auto* cmd =
      topo.add_subcommand("generate", "Write a reference cluster: a DGX SuperPOD preset or a plain fat tree");
  cmd->footer("Presets:" + presets);
  auto* preset = cmd->add_option("--preset", o->preset, "SuperPOD preset (see below)");
  cmd->add_option("--sus", o->sus, "Scalable units of the preset")->capture_default_str()->needs(preset);
  auto* nodes = cmd->add_option("--nodes", o->nodes, "Nodes of a plain fat tree")->excludes(preset);
  cmd->add_option("--leaf-size", o->leaf_size, "Fat tree: nodes per leaf switch")
      ->capture_default_str()
      ->needs(nodes);
  cmd->add_option("--spine-size", o->spine_size, "Fat tree: leaves per spine group")
      ->capture_default_str()
      ->needs(nodes);
  cmd->add_option("--profile", o->profile, "Fat tree: node profile")->capture_default_str()->needs(nodes);
  cmd->add_option("--oversubscription", o->oversubscription,
                  "Fat tree: leaf uplink oversubscription (2 = 2:1)")
      ->capture_default_str()
      ->needs(nodes);
  cmd->add_option("-o,--output", o->output, "Output file ('-' for standard output)")->capture_default_str();
  cmd->add_option("--format", o->format, "json or slurm (default: from the output's extension, else json)")
      ->check(CLI::IsMember(kFormats));
  cmd->callback([o] { run_generate(*o); });
}

struct ConvertOptions {
  std::string input;
  std::string output;
  std::string to;
  std::string profile = "dgx-h100";
};

void add_convert_command(CLI::App& topo) {
  auto o = std::make_shared<ConvertOptions>();
  auto* cmd = topo.add_subcommand("convert", "Convert a cluster file between JSON and Slurm topology.conf");
  cmd->add_option("input", o->input, "Cluster file, JSON or topology.conf (detected; '-' for standard input)")
      ->required();
  cmd->add_option("output", o->output, "Output file ('-' for standard output)")->required();
  cmd->add_option("--to", o->to, "json or slurm (default: from the output's extension: .json, .conf)")
      ->check(CLI::IsMember(kFormats));
  cmd->add_option("--profile", o->profile, "Profile of topology.conf nodes without one")
      ->capture_default_str();
  cmd->callback([o] {
    FileFormat format = output_format(o->to, o->output);
    Cluster cluster = load_or_fail(o->input, o->profile);
    if (auto s = topology::save_cluster_file(cluster, o->output, format); !s) fail(s.error());
  });
}

}  // namespace

void add_topo_commands(CLI::App& app) {
  auto* topo = app.add_subcommand("topo", "Cluster topology: generate, show, cost, convert, table");
  topo->require_subcommand(1);
  add_generate_command(*topo);
  add_show_command(*topo);
  add_cost_command(*topo);
  add_convert_command(*topo);
  add_table_command(*topo);
}

}  // namespace railyard::cli
