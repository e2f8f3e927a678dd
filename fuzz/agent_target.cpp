// Fuzz target agent_message: bytes -> both ends of the agent protocol.
//
// Scheduler side: every input gets a fresh DaemonWorld (so a crash replays from its one input) with an
// agent A registered for n1..n3, job 1 (16 GPUs) and job 2 (8 GPUs) placed and sent to A, and a second
// connection B that has only been greeted. The input is split into lines; each line is one frame:
//   "B <frame>"  to B, unregistered until it sends a valid register; a register whose "mac" is "auto"
//                gets the right MAC for its agent and node names, so the fuzzer reaches past the handshake
//   "!tick"      the clock moves 31 s and the hub ticks (heartbeat timeouts, request timeouts)
//   "!close"     A's connection closes
//   <frame>      to A
// A connection the hub closed is closed by the "glue" (on_close), as the WebSocket server does. Checked
// after every frame: no GPU is held by two live jobs.
//
// Agent side: every line, parsed as JSON, goes through the agent's reading of scheduler orders
// (parse_launch, job_of_alloc on its "alloc").
#include <nlohmann/json.hpp>
#include <string>

#include "agent/session/protocol.hpp"
#include "common/json_text.hpp"
#include "fuzz/daemon_world.hpp"
#include "fuzz/targets.hpp"

namespace railyard::fuzz {

namespace {

using nlohmann::json;

constexpr size_t kMaxLines = 64;

// A register with "mac": "auto" signed for `challenge`; anything else (too deep to dump safely included)
// unchanged.
std::string sign_register(std::string_view frame, const std::string& challenge) {
  auto parsed = parse_json_bounded(frame);
  if (!parsed) return std::string(frame);
  json m = std::move(*parsed);
  if (!m.is_object() || m.value("type", json()) != "register" || m.value("mac", json()) != "auto" ||
      !m.contains("agent") || !m["agent"].is_string() || !m.contains("nodes") || !m["nodes"].is_array())
    return std::string(frame);
  std::vector<std::string> names;
  for (const auto& n : m["nodes"]) {
    if (!n.is_object() || !n.contains("name") || !n["name"].is_string()) return std::string(frame);
    names.push_back(n["name"]);
  }
  m["mac"] = daemon::register_mac(DaemonWorld::kSecret, challenge, m["agent"].get<std::string>(), names);
  return m.dump(-1, ' ', false, json::error_handler_t::replace);
}

// As the agent reads a frame (agent/session/session.cpp: depth-bounded, then by type).
void agent_side(std::string_view line) {
  auto parsed = parse_json_bounded(line);
  if (!parsed || !parsed->is_object()) return;
  const json& m = *parsed;
  auto launch = agent::parse_launch(m);
  if (launch && (launch->node_rank < 0 || launch->node_rank >= static_cast<int>(launch->nodes.size())))
    __builtin_trap();
  if (m.contains("alloc") && m["alloc"].is_string()) (void)agent::job_of_alloc(m["alloc"].get<std::string>());
}

}  // namespace

void agent_message(std::string_view input) {
  DaemonWorld w;
  auto a = w.connect({"n1", "n2", "n3"});
  w.submit({16, 8});
  auto b = std::make_shared<FuzzPeer>();
  w.hub->on_open(b);
  const std::string challenge = json::parse(b->sent.at(0)).at("challenge");
  bool a_open = true, b_open = true;
  for (size_t n = 0; n < kMaxLines && !input.empty(); ++n) {
    const size_t eol = input.find('\n');
    const std::string_view line = input.substr(0, eol);
    input.remove_prefix(eol == std::string_view::npos ? input.size() : eol + 1);
    if (line == "!tick") {
      w.now += 31;
      w.hub->tick();
    } else if (line == "!close") {
      if (a_open) w.hub->on_close(a.get());
      a_open = false;
    } else if (line.substr(0, 2) == "B ") {
      if (b_open) w.hub->on_message(b.get(), sign_register(line.substr(2), challenge));
      agent_side(line.substr(2));
    } else {
      if (a_open) w.hub->on_message(a.get(), line);
      agent_side(line);
    }
    w.run();
    for (auto [peer, open] : {std::pair{a.get(), &a_open}, std::pair{b.get(), &b_open}}) {
      if (*open && peer->closed) {  // the WebSocket glue reports the close it was asked for
        w.hub->on_close(peer);
        *open = false;
      }
    }
    w.check_no_gpu_twice();
  }
  if (a_open) w.hub->on_close(a.get());
  if (b_open) w.hub->on_close(b.get());
  w.run();
}

}  // namespace railyard::fuzz
