// `railyard submit`: a job file (JSON spec), a Slurm batch script (#SBATCH lines), or flags and a command.
// Files are told by content (script_import.hpp). Size and time flags given with a script override its
// directives as sbatch's command line does; the rest of the script still counts. --image and the container
// flags set the container (jobs/container.hpp) over a job file's or script's own, field by field.
#include <CLI/CLI.hpp>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>

#include "cli/cli_util.hpp"
#include "cli/job_util.hpp"
#include "cli/script_import.hpp"
#include "jobs/container.hpp"
#include "jobs/spec_json.hpp"
#include "jobs/time_limit.hpp"

namespace railyard::cli {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

struct SubmitOptions {
  ServerOptions server;
  std::vector<std::string> args;  // JOB.json | SCRIPT.sh, or the command after --
  int gpus = 0;
  int nodes = 0;
  int gpus_per_node = 0;
  std::string mem;  // Slurm's --mem: 512, 512M, 4G, 1T (MiB without a unit)
  std::string name, time, qos, launcher, gpu_type, target, project, workdir, array;
  std::vector<std::string> dependency;  // one per -d; all must hold
  std::string image, container_workdir, container_name;
  std::vector<std::string> mounts;  // one per --mount: SRC:DST[:ro]
  bool container_writable = false;
  bool requeue = false;
  bool wait = false;
  double poll_s = 1.0;
};

// Slurm's --mem text in MiB: a number with an optional K, M, G or T suffix (no suffix = M).
int parse_mem_mb(const std::string& text) {
  size_t used = 0;
  double v = -1;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
  }
  const std::string unit = text.substr(used);
  const double scale = unit.empty() || unit == "M" || unit == "m" ? 1
                       : unit == "G" || unit == "g"               ? 1024
                       : unit == "T" || unit == "t"               ? 1024.0 * 1024
                       : unit == "K" || unit == "k"               ? 1.0 / 1024
                                                                  : -1;
  const double mb = v * scale;
  if (v <= 0 || scale < 0 || mb < 1 || mb > 2147483647.0)
    fail_usage("--mem \"" + text + "\": give memory per node as 512, 512M, 4G or 1T");
  return static_cast<int>(mb);
}

// The file to submit as a whole, if the arguments are one existing file: JSON or a batch script by
// content. Fails with the reason when it is neither and no size says "run it as a command".
std::optional<FileKind> job_file(const SubmitOptions& o, bool sized) {
  std::error_code ec;
  if (o.args.size() != 1 || !fs::is_regular_file(o.args[0], ec)) return std::nullopt;
  const std::string text = read_file_or_fail(o.args[0]);
  FileKind kind = classify_job_file(text, o.args[0]);
  if (kind.kind == FileKind::Kind::kScript || (kind.kind == FileKind::Kind::kJson && !sized)) return kind;
  if (sized) return std::nullopt;  // a program to run with that size
  fail_usage(o.args[0] + ": not taken as a job file: " + kind.why_not +
             " (a job file is JSON, or a script with a #! line and #SBATCH directives); to run it as a "
             "command, give a size: railyard submit --gpus N -- " + o.args[0]);
}

Json spec_from_json_file(const std::string& path) {
  const std::string text = read_file_or_fail(path);
  auto spec = jobs::parse_job_spec_text(text);
  if (!spec) fail(invalid(path + ": " + spec.error().message));
  return Json::parse(text);  // the user's own fields, as written; the server applies the defaults
}

// Size and time flags as sbatch options, so that they override the script's own as sbatch's would, and a
// script without a GPU request sized from here is not also given whole nodes.
std::vector<std::string> script_overrides(const SubmitOptions& o) {
  std::vector<std::string> words;
  if (o.gpus > 0) words.push_back("--gpus=" + std::to_string(o.gpus));
  if (o.nodes > 0) words.push_back("--nodes=" + std::to_string(o.nodes));
  if (o.gpus_per_node > 0) words.push_back("--gpus-per-node=" + std::to_string(o.gpus_per_node));
  if (!o.time.empty()) {
    auto t = jobs::parse_time_limit(o.time);
    if (!t) fail_usage("--time " + o.time + ": " + t.error().message);
    words.push_back("--time=" + jobs::format_time_limit(*t));
  }
  return words;
}

// "accuracy=0.95", "eval_accuracy=0.72", "0.95" → {"metric": ..., "value": ...}.
Json parse_target(const std::string& text) {
  const size_t eq = text.find('=');
  std::string metric = eq == std::string::npos ? "eval_accuracy" : text.substr(0, eq);
  const std::string value = eq == std::string::npos ? text : text.substr(eq + 1);
  if (metric == "accuracy") metric = "eval_accuracy";
  try {
    size_t used = 0;
    const double v = std::stod(value, &used);
    if (used != value.size() || metric.empty()) throw std::invalid_argument("x");
    return {{"metric", metric}, {"value", v}};
  } catch (const std::exception&) {
    fail_usage("--target " + text + ": expected METRIC=VALUE, e.g. accuracy=0.95");
  }
}

// The container flags over `spec`'s own "container" (a job file's or a script's): --image sets the image,
// --mount the mounts (all of them: a file's are replaced), the others their field. Read here as the
// scheduler will, so a bad image or mount exits 2 naming the flag.
void apply_container_flags(const SubmitOptions& o, Json& spec) {
  const bool others =
      !o.mounts.empty() || !o.container_workdir.empty() || !o.container_name.empty() || o.container_writable;
  if (o.image.empty() && !others) return;
  if (!spec.contains("container") || !spec["container"].is_object()) {
    if (o.image.empty())
      fail_usage(
          "--mount, --container-workdir, --container-name and --container-writable need --image IMAGE "
          "(the image to run in)");
    spec["container"] = Json::object();
  }
  Json& c = spec["container"];
  if (!o.image.empty()) {
    auto image = jobs::parse_image(o.image);
    if (!image) fail_usage("--image \"" + o.image + "\": " + image.error().message);
    c["image"] = *image;
  }
  if (!o.mounts.empty()) {
    c["mounts"] = Json::array();
    for (const std::string& text : o.mounts) {
      auto mount = jobs::parse_mount(text);
      if (!mount) fail_usage("--mount \"" + text + "\": " + mount.error().message);
      c["mounts"].push_back(mount->text());
    }
  }
  if (!o.container_workdir.empty()) c["workdir"] = o.container_workdir;
  if (!o.container_name.empty()) c["name"] = o.container_name;
  if (o.container_writable) c["writable"] = true;
}

Json build_spec(const SubmitOptions& o, const CLI::App& cmd) {
  const bool sized = cmd.count("--gpus") + cmd.count("--nodes") + cmd.count("--gpus-per-node") > 0;
  Json spec = Json::object();
  std::vector<std::string> command = o.args;
  if (auto file = job_file(o, sized)) {
    const std::string& path = o.args[0];
    spec = file->kind == FileKind::Kind::kJson
               ? spec_from_json_file(path)
               : script_job(path, fs::path(path).filename().string(), read_file_or_fail(path),
                            script_overrides(o), {})
                     .spec;
    command.clear();
  } else if (!sized) {
    fail_usage("give a job file (JOB.json or a batch script) or a size (--gpus N, or --nodes N --gpus-per-node K)");
  }
  if (o.gpus > 0) spec["gpus"] = o.gpus;
  if (o.nodes > 0) spec["nodes"] = o.nodes;
  if (o.gpus_per_node > 0) spec["gpus_per_node"] = o.gpus_per_node;
  if (!command.empty()) spec["command"] = command;
  if (!o.name.empty()) spec["name"] = o.name;
  else if (!spec.contains("name") && !command.empty()) spec["name"] = fs::path(command[0]).filename().string();
  if (!o.time.empty()) spec["time_limit"] = o.time;
  if (!o.mem.empty()) spec["mem_mb"] = parse_mem_mb(o.mem);
  if (!o.qos.empty()) spec["qos"] = o.qos;
  if (!o.launcher.empty()) spec["launcher"] = o.launcher;
  if (!o.gpu_type.empty()) spec["gpu_type"] = o.gpu_type;
  if (!o.project.empty()) spec["project"] = o.project;
  if (!o.target.empty()) spec["target"] = parse_target(o.target);
  if (o.requeue) spec["requeue"] = true;
  if (!o.array.empty()) spec["array"] = o.array;
  if (!o.dependency.empty()) {  // joins a job file's own (all must hold)
    std::string deps = spec.contains("dependency") && spec["dependency"].is_string()
                           ? spec["dependency"].get<std::string>()
                           : "";
    for (const auto& d : o.dependency) deps += (deps.empty() ? "" : ",") + d;
    spec["dependency"] = deps;
  }
  apply_container_flags(o, spec);
  if (!o.workdir.empty()) spec["workdir"] = fs::absolute(o.workdir).string();
  else if (!spec.contains("workdir") && !command.empty()) spec["workdir"] = fs::current_path().string();
  if (sized && command.empty() && !spec.contains("command"))
    fail_usage("give the command after --, e.g. railyard submit --gpus 8 -- python train.py");
  // Check the spec here so typos are reported before anything is sent (the scheduler checks again).
  if (auto parsed = jobs::parse_job_spec(spec); !parsed) fail(invalid(parsed.error().message));
  return spec;
}

void run_submit(const SubmitOptions& o, const CLI::App& cmd) {
  const Json spec = build_spec(o, cmd);
  Api api(o.server);
  const Json answer = api.post("/jobs", spec);
  const long id = answer.value("id", 0L);
  std::cout << id << std::endl;
  if (!o.wait) return;
  for (;;) {
    const Json job = api.get("/jobs/" + std::to_string(id));
    if (job_is_final(job)) {
      const int code = job_exit_status(job);
      std::cerr << "railyard: job " << id << " " << job.value("state", "?");
      if (job.contains("reason") && job["reason"].is_string()) std::cerr << ": " << job["reason"].get<std::string>();
      std::cerr << " (exit " << code << ")" << std::endl;
      if (code != 0) throw CLI::RuntimeError(code);
      return;
    }
    sleep_for_seconds(o.poll_s);
  }
}

}  // namespace

void add_submit_command(CLI::App& app) {
  auto o = std::make_shared<SubmitOptions>();
  auto* cmd = app.add_subcommand("submit", "Submit a job: a JSON job file, a Slurm batch script, or a command");
  cmd->add_option("job", o->args,
                  "JOB.json or a batch script (any name: a #! line and #SBATCH directives), or (after --) the "
                  "command and its arguments");
  cmd->add_option("--gpus", o->gpus, "Total GPUs (the scheduler picks the node split)")->check(at_least(1));
  cmd->add_option("--nodes", o->nodes, "Exactly this many nodes (with --gpus-per-node)")->check(at_least(1));
  cmd->add_option("--gpus-per-node", o->gpus_per_node, "GPUs on every node")->check(at_least(1));
  cmd->add_option("--name", o->name, "Job name (default: the command's or file's name)");
  cmd->add_option("--mem", o->mem,
                  "Memory per node (512, 512M, 4G); past it the job is killed and ends OUT_OF_MEMORY. "
                  "Default: the node's memory times the job's share of its GPUs");
  cmd->add_option("--time", o->time, "Time limit: 2h, 90m, 1-00:00:00, HH:MM:SS (default 1h)");
  cmd->add_option("--qos", o->qos, "Quality of service")->check(CLI::IsMember({"high", "normal", "scavenger"}));
  cmd->add_option("--launcher", o->launcher, "env: torchrun-style ranks; mpi: mpirun; none: once per node")
      ->check(CLI::IsMember({"env", "mpi", "none"}));
  cmd->add_option("--gpu-type", o->gpu_type, "GPU type, e.g. H100 (default: any)");
  cmd->add_option("--project", o->project, "Project (account) charged (default: your user)");
  cmd->add_option("--target", o->target, "Quality target for time-to-train, METRIC=VALUE (accuracy=0.95)");
  cmd->add_option("--workdir", o->workdir, "Folder the job starts in (default: the current folder)");
  cmd->add_option(
      "--array", o->array,
      "An array of tasks, one job each, e.g. 0-99, 1,3,5-9, 0-98:2, 0-999%16 (at most 16 at once); "
      "each task finds its index in RAILYARD_ARRAY_TASK_ID");
  cmd->add_option(
         "--dependency,-d", o->dependency,
         "Start only after other jobs, Slurm's syntax: afterok:12 (completed), afterany:12 (ended), "
         "afternotok:12 (ended otherwise), afterok:12_3 (task 3 of array 12), aftercorr:12 (each task "
         "after the same task of array 12); comma-separated or repeated, all must hold")
      ->allow_extra_args(false);
  cmd->add_option("--image", o->image,
                  "Run every process of the job in this OCI image: nvcr.io/nvidia/pytorch:24.04-py3 (pyxis' "
                  "nvcr.io#nvidia/... too), or docker-archive:/path/img.tar, oci-archive:/path/img.tar");
  cmd->add_option(
         "--mount", o->mounts,
         "With --image: a node's directory in the container, SRC:DST or SRC:DST:ro (absolute paths); "
         "repeat for more (replaces a job file's mounts)")
      ->allow_extra_args(false);
  cmd->add_option("--container-workdir", o->container_workdir,
                  "With --image: the folder inside the container to start in (default: --workdir, mounted "
                  "at the same path)");
  cmd->add_flag("--container-writable", o->container_writable,
                "With --image: a writable root file system (default: read-only, with /tmp a tmpfs)");
  cmd->add_option("--container-name", o->container_name,
                  "With --image: a name for the job's containers (pyxis' --container-name)");
  cmd->add_flag("--requeue", o->requeue, "Requeue the job after a failure or a node failure");
  cmd->add_flag("--wait", o->wait, "Wait until the job ends and exit with its exit code");
  add_server_options(*cmd, o->server);
  cmd->footer(R"(Prints the job id alone on standard output.

Examples:
  railyard submit --gpus 16 --launcher env --target accuracy=0.95 -- railyard-train --epochs 20
  railyard submit --nodes 2 --gpus-per-node 8 --launcher mpi --time 2h -- ./allreduce -b 8 -e 1G
  railyard submit job.json              # a job spec (jobs/README.md)
  railyard submit train.sbatch          # a Slurm script: #SBATCH lines imported, warnings on stderr
  railyard submit --nodes 96 --gpus-per-node 8 run.sub   # sizes override the script's; its --time stays
  railyard submit --gpus 1 --wait -- python eval.py && echo passed
  railyard submit --gpus 1 --array 0-99%8 -- ./sweep.sh   # 100 tasks, 8 at a time; one id for all
  railyard submit --gpus 8 --array 0-99 -d aftercorr:41 -- ./train.sh   # task i after task i of 41
  railyard submit --gpus 1 -d afterany:41 -- ./cleanup.sh               # after 41 ended, however
  railyard submit --gpus 8 --launcher env --image nvcr.io/nvidia/pytorch:24.04-py3 \
      --mount /lustre/imagenet:/data:ro -- python train.py              # in a container

Exit codes: 0 submitted (with --wait: the job's exit code), 1 failure or scheduler unreachable,
2 bad arguments or job spec, 3 not allowed (token).)");
  cmd->callback([o, cmd] { run_submit(*o, *cmd); });
}

}  // namespace railyard::cli
