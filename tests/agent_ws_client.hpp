// A fake agent for integration tests: a WebSocket client of the real railyard-scheduler speaking
// scheduler/PROTOCOL.md (Beast: include it from one test translation unit only). Shared by
// agent_protocol_test.cpp and node_keys_test.cpp.
#pragma once

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/protocol/mac.hpp"

namespace railyard::testing {

namespace beast = boost::beast;
namespace websocket = beast::websocket;
namespace net = boost::asio;
using nlohmann::json;
using tcp = net::ip::tcp;

inline constexpr const char* kAgentTestSecret = "integration-test-secret-0123456789";
// Two DGX H100 nodes n1, n2 under two leaves joined by a spine (a 16-GPU job needs both).
inline constexpr const char* kTwoNodeCluster =
    R"({"name": "two", "nodes": [{"names": "n[1-2]", "profile": "dgx-h100"}], "switches": [{"name": "leaf1",
  "level": "leaf", "nodes": "n1"}, {"name": "leaf2", "level": "leaf", "nodes": "n2"}, {"name": "spine",
  "level": "spine", "children": ["leaf1", "leaf2"]}]})";

// A WebSocket client with a deadline on every read (a timed-out read leaves the client unusable).
class WsClient {
 public:
  WsClient(int port, const std::string& target) : ws_(ioc_) {
    beast::get_lowest_layer(ws_).connect(
        tcp::endpoint(net::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)));
    ws_.handshake("127.0.0.1", target);
  }
  void send(const json& m) {
    beast::error_code ec;
    ws_.write(net::buffer(m.dump()), ec);
  }
  // The next frame, or a null json when the connection closed or nothing came in time.
  json read(std::chrono::seconds timeout = std::chrono::seconds(10)) {
    beast::get_lowest_layer(ws_).expires_after(timeout);
    json got;
    bool done = false;
    ws_.async_read(buf_, [&](beast::error_code ec, size_t) {
      done = true;
      if (!ec) got = json::parse(beast::buffers_to_string(buf_.data()), nullptr, false);
      buf_.consume(buf_.size());
    });
    ioc_.restart();
    while (!done) ioc_.run_one();
    return got;
  }
  // Reads until a frame of `type` (others are skipped); null when none came.
  json expect(const std::string& type) {
    for (int i = 0; i < 50; ++i) {
      json m = read();
      if (m.is_null() || m.value("type", "") == type) return m;
    }
    return nullptr;
  }

 private:
  net::io_context ioc_;
  websocket::stream<beast::tcp_stream> ws_;
  beast::flat_buffer buf_;
};

class FakeAgent : public WsClient {
 public:
  explicit FakeAgent(int port) : WsClient(port, "/api/v1/agent") {
    challenge = read().value("challenge", "");
  }
  // Registers `nodes`; `running` maps node -> list of {alloc, job}. Returns the answer.
  json register_nodes(const std::vector<std::string>& nodes, const json& running = json::object(),
                      const std::string& secret = kAgentTestSecret) {
    json ns = json::array();
    for (const auto& n : nodes)
      ns.push_back({{"name", n}, {"inventory", {{"gpus", 8}}}, {"running", running.value(n, json::array())}});
    send({{"type", "register"},
          {"v", 1},
          {"agent", "fake:1"},
          {"nodes", ns},
          {"mac", protocol::register_mac(secret, challenge, "fake:1", nodes)}});
    return read();
  }

  // Registers `nodes` with per-node keys: each entry's MAC made with keys.at(signer), the signer being the
  // node itself unless `signers` names another. Returns the answer.
  json register_with_keys(const std::vector<std::string>& nodes, const std::map<std::string, std::string>& keys,
                          const json& running = json::object(), std::vector<std::string> signers = {}) {
    if (signers.empty()) signers = nodes;
    json ns = json::array();
    for (size_t i = 0; i < nodes.size(); ++i)
      ns.push_back({{"name", nodes[i]},
                    {"inventory", {{"gpus", 8}}},
                    {"running", running.value(nodes[i], json::array())},
                    {"mac", protocol::node_mac(keys.at(signers[i]), challenge, "fake:1", nodes[i])}});
    send({{"type", "register"}, {"v", 1}, {"agent", "fake:1"}, {"nodes", ns}});
    return read();
  }
  std::string challenge;
};

}  // namespace railyard::testing
