// `railyard node images NODES` and `railyard image prefetch IMAGE --nodes LIST`: the container engine's
// image cache on nodes, through the scheduler (GET/POST /api/v1/nodes/{name}/images; agent/README.md,
// "Image jobs").
#include <CLI/CLI.hpp>
#include <chrono>
#include <ctime>
#include <iostream>
#include <memory>
#include <thread>

#include "cli/cli_util.hpp"
#include "cli/commands.hpp"
#include "cli/job_util.hpp"
#include "cli/output.hpp"
#include "common/hostlist.hpp"

namespace railyard::cli {
namespace {

using Json = nlohmann::json;

std::string created(long long unix) {
  if (unix <= 0) return "-";
  const std::time_t t = unix;
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M", std::localtime(&t));
  return buf;
}

struct ImagesOptions {
  ServerOptions server;
  std::vector<std::string> nodes;
  bool json = false;
};

void run_node_images(const ImagesOptions& o) {
  Api api(o.server);
  Json all = Json::array();
  int worst = kExitOk;
  for (const auto& name : expand_nodes_or_fail(o.nodes)) {
    auto r = api.call("GET", "/nodes/" + url_encode(name) + "/images");
    if (!r) {
      if (r.error().code == ErrorCode::kUnavailable && r.error().message.find("not connected") == std::string::npos)
        fail(r.error());
      std::cerr << "railyard: " << name << ": " << r.error().message << std::endl;
      worst = std::max(worst, exit_code(r.error().code));
      continue;
    }
    all.push_back(*r);
  }
  if (o.json) {
    std::cout << all.dump(2) << "\n";
  } else {
    Table t({"NODE", "IMAGE", "ID", "SIZE", "CREATED"});
    for (const auto& n : all) {
      const std::string node = n.value("node", "");
      for (const auto& i : n.value("images", Json::array())) {
        const auto names = i.value("names", Json::array());
        const std::string id = i.value("id", std::string()).substr(0, 12);
        const std::string size = format_bytes(static_cast<double>(i.value("size_bytes", 0LL)));
        if (names.empty()) t.add({node, "<none>", id, size, created(i.value("created", 0LL))});
        for (const auto& name : names) t.add({node, name.get<std::string>(), id, size, created(i.value("created", 0LL))});
      }
      for (const auto& p : n.value("pulling", Json::array())) t.add({node, p.get<std::string>(), "-", "-", "pulling"});
    }
    t.print();
  }
  if (worst != kExitOk) throw CLI::RuntimeError(worst);
}

struct PrefetchOptions {
  ServerOptions server;
  std::string image;
  std::vector<std::string> nodes;
  bool wait = false;
  int timeout_s = 3600;
};

bool has_image(const Json& answer, const std::string& image) {
  for (const auto& i : answer.value("images", Json::array()))
    for (const auto& n : i.value("names", Json::array()))
      if (n == image || n == "localhost/" + image || n == "docker.io/" + image || n == "docker.io/library/" + image)
        return true;
  return false;
}

void run_prefetch(const PrefetchOptions& o) {
  Api api(o.server);
  api.require_token();
  const auto names = expand_nodes_or_fail(o.nodes);
  std::vector<std::string> started;
  int worst = kExitOk;
  for (const auto& name : names) {
    auto r = api.call("POST", "/nodes/" + url_encode(name) + "/images", Json{{"image", o.image}});
    if (!r) {
      std::cerr << "railyard: " << name << ": " << r.error().message << std::endl;
      worst = std::max(worst, exit_code(r.error().code));
      continue;
    }
    std::cout << name << " " << (has_image(*r, o.image) ? "cached" : "pulling") << "\n";
    started.push_back(name);
  }
  if (o.wait) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(o.timeout_s);
    for (const auto& name : started) {
      for (;;) {
        auto r = api.call("GET", "/nodes/" + url_encode(name) + "/images");
        if (r && has_image(*r, o.image)) {
          std::cout << name << " cached\n";
          break;
        }
        if (r && r->value("pulling", Json::array()).empty()) {
          std::cerr << "railyard: " << name << ": the pull of " << o.image
                    << " ended without the image (the node's agent log says why)" << std::endl;
          worst = std::max(worst, kExitNotFound);
          break;
        }
        if (std::chrono::steady_clock::now() > until) fail({ErrorCode::kUnavailable, "timed out waiting for " + name});
        std::this_thread::sleep_for(std::chrono::seconds(1));
      }
    }
  }
  if (worst != kExitOk) throw CLI::RuntimeError(worst);
}

}  // namespace

void add_node_images_command(CLI::App& node) {
  auto o = std::make_shared<ImagesOptions>();
  auto* cmd = node.add_subcommand("images", "The container images cached on nodes (their agents' engine)");
  cmd->add_option("nodes", o->nodes, "Node names or host lists (dgx[001-016])")->required();
  cmd->add_flag("--json", o->json, "The agents' answers: [{\"node\", \"images\": [...], \"pulling\": [...]}]");
  add_server_options(*cmd, o->server);
  cmd->footer("Examples:\n  railyard node images dgx001\n  railyard node images 'dgx[001-004]' --json\n\n"
              "Exit codes: 0 ok, 1 scheduler unreachable or a node without an engine, 2 bad node list, 3 unknown node.");
  cmd->callback([o] { run_node_images(*o); });
}

void add_image_commands(CLI::App& app) {
  auto o = std::make_shared<PrefetchOptions>();
  auto* image = app.add_subcommand("image", "Container images on the nodes");
  image->require_subcommand(1);
  auto* cmd = image->add_subcommand("prefetch", "Pull an image into nodes' caches before jobs need it");
  cmd->add_option("image", o->image, "Registry image (nvcr.io/nvidia/pytorch:24.04-py3)")->required();
  cmd->add_option("--nodes", o->nodes, "Node names or host lists")->required();
  cmd->add_flag("--wait", o->wait, "Wait until every node has it");
  cmd->add_option("--max-wait", o->timeout_s, "Seconds --wait waits at most")->capture_default_str();
  add_server_options(*cmd, o->server);
  cmd->footer("Admin only. Each node pulls once, however many jobs or prefetches ask for the image meanwhile.\n\n"
              "Examples:\n  railyard image prefetch nvcr.io/nvidia/pytorch:24.04-py3 --nodes 'dgx[001-128]' --wait");
  cmd->callback([o] { run_prefetch(*o); });
}

}  // namespace railyard::cli
