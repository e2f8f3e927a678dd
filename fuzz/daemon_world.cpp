#include "fuzz/daemon_world.hpp"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "scheduler/daemon/tokens.hpp"
#include "scheduler/store/sqlite_store.hpp"
#include "topology/io_json.hpp"

namespace railyard::fuzz {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kCluster = R"({"name": "fuzz", "nodes": [{"names": "n[1-4]", "profile": "dgx-h100"}],
  "switches": [{"name": "leaf1", "level": "leaf", "nodes": "n[1-2]"},
               {"name": "leaf2", "level": "leaf", "nodes": "n[3-4]"},
               {"name": "spine", "level": "spine", "children": ["leaf1", "leaf2"]}]})";

fs::path make_temp_dir() {
  std::error_code ec;
  const fs::path base = fs::is_directory("/dev/shm", ec) ? fs::path("/dev/shm") : fs::temp_directory_path();
  std::string t = (base / "railyard-fuzz-XXXXXX").string();
  if (!::mkdtemp(t.data())) throw std::runtime_error("mkdtemp failed");
  return t;
}

}  // namespace

DaemonWorld::DaemonWorld() : dir_(make_temp_dir()) {
  spdlog::set_level(spdlog::level::off);  // the hub logs every refusal: noise at millions of inputs
  auto c = topology::read_cluster_json(kCluster);
  if (!c) throw std::runtime_error(c.error().message);
  cluster_ = std::make_unique<topology::Cluster>(std::move(*c));
  auto st = store::SqliteStateStore::open((dir_ / "s.db").string());
  if (!st) throw std::runtime_error(st.error().message);
  for (auto [token, user, role] : {std::tuple{kUserToken, "ada", store::Role::kUser},
                                   std::tuple{kAdminToken, "root", store::Role::kAdmin}})
    if (!(*st)->add_token({daemon::sha256_hex(token), user, role})) throw std::runtime_error("add_token failed");
  daemon::Loop loop{
      [this](std::function<void()> fn) { work_.push_back(std::move(fn)); },
      [this](std::chrono::milliseconds, std::function<void()> fn) { work_.push_back(std::move(fn)); }};
  service =
      std::make_unique<daemon::Service>(*cluster_, std::move(*st), std::move(loop), [this] { return now; });
  service->track_usage(7 * 86400.0);  // as the daemon does: fair-share usage in every pass and in /fairshare
  if (!service->open()) throw std::runtime_error("open failed");
  daemon::AgentHubOptions o;
  o.secret = kSecret;
  hub = std::make_unique<daemon::AgentHub>(*service, o);
  hub->start();
  fs::create_directories(dir_ / "web" / "js");
  std::ofstream(dir_ / "web" / "index.html") << "<!doctype html><title>railyard</title>";
  std::ofstream(dir_ / "web" / "js" / "app.js") << "console.log(1);";
  api::RouterOptions ro;
  ro.topology_json = kCluster;
  ro.web_root = (dir_ / "web").string();
  router = std::make_unique<api::Router>(*service, ro);
  router->set_agent_hub(hub.get());
  run();
}

DaemonWorld::~DaemonWorld() {
  router.reset();
  hub.reset();
  work_.clear();
  service.reset();
  std::error_code ec;
  fs::remove_all(dir_, ec);
}

void DaemonWorld::run() {
  while (!work_.empty()) {
    auto fn = std::move(work_.front());
    work_.pop_front();
    fn();
  }
}

std::shared_ptr<FuzzPeer> DaemonWorld::connect(const std::vector<std::string>& nodes) {
  auto p = std::make_shared<FuzzPeer>();
  hub->on_open(p);
  const std::string challenge = json::parse(p->sent.at(0)).at("challenge");
  json ns = json::array();
  for (const auto& n : nodes)
    ns.push_back(
        {{"name", n}, {"inventory", {{"gpus", 8}, {"source", "emulated"}}}, {"running", json::array()}});
  const json reg = {{"type", "register"},
                    {"v", 1},
                    {"agent", kAgent},
                    {"nodes", ns},
                    {"mac", daemon::register_mac(kSecret, challenge, kAgent, nodes)},
                    {"finished", json::array()}};
  hub->on_message(p.get(), reg.dump());
  run();
  return p;
}

void DaemonWorld::submit(const std::vector<int>& gpus) {
  const daemon::Caller ada{"ada", store::Role::kUser};
  std::vector<jobs::JobSpec> specs;
  for (int n : gpus) {
    jobs::JobSpec spec;
    spec.gpus = n;
    spec.launcher = jobs::Launcher::kEnv;
    spec.command = {"/bin/true"};
    if (!service->prepare(spec, ada)) throw std::runtime_error("prepare failed");
    specs.push_back(std::move(spec));
  }
  service->submit(std::move(specs), ada, [](Result<std::vector<jobs::JobId>>) {});
  run();
}

void DaemonWorld::check_no_gpu_twice() const {
  const auto& table = service->table();
  const auto owners = table.gpu_owners();  // a held allocation's GPUs overwrite a live job's here
  std::vector<jobs::JobId> seen(owners.size(), 0);
  for (const auto& [id, r] : table.jobs()) {
    if (r.state != jobs::JobState::kStarting && r.state != jobs::JobState::kRunning) continue;
    for (auto g : r.gpus) {
      const auto i = static_cast<size_t>(g);
      if (i >= seen.size() || seen[i] != 0 || owners[i] != id) __builtin_trap();
      seen[i] = id;
    }
  }
}

}  // namespace railyard::fuzz
