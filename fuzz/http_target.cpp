// Fuzz target http_request: bytes -> the daemon's request handling without sockets. The input is read as
// an HTTP/1.1 request (request line, headers up to an empty line, body), which is more lenient than the
// server's Beast parser, and handed to the real Router over one DaemonWorld kept across inputs (reset every
// kResetEvery inputs or when the table grows past kMaxJobs), with an agent connected for n1..n4 that
// answers launch, kill, logs and exec orders, so jobs run and logs routes get answers.
//
// Checked for every input: exactly one reply; its status is 100..599; a 4xx/5xx body is
// {"error": {"code": string, "message": string}} as application/json; any JSON body parses; no GPU is
// held by two live jobs. State carries over between inputs, so a crash may need the inputs before it (the
// regression replay runs the saved inputs one after another on one world).
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "fuzz/daemon_world.hpp"
#include "fuzz/targets.hpp"

namespace railyard::fuzz {

namespace {

using nlohmann::json;

constexpr int kResetEvery = 5000;
constexpr size_t kMaxJobs = 3000;

std::string_view next_line(std::string_view& in) {
  const size_t eol = in.find('\n');
  std::string_view line = in.substr(0, eol);
  in.remove_prefix(eol == std::string_view::npos ? in.size() : eol + 1);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  return line;
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  return true;
}

api::HttpRequest parse_request(std::string_view in) {
  api::HttpRequest r;
  std::string_view line = next_line(in);
  const size_t sp = line.find(' ');
  r.method = std::string(line.substr(0, sp));
  line.remove_prefix(sp == std::string_view::npos ? line.size() : sp + 1);
  r.target = std::string(line.substr(0, line.find(' ')));
  while (!in.empty()) {
    std::string_view h = next_line(in);
    if (h.empty()) break;
    const size_t colon = h.find(':');
    if (colon == std::string_view::npos || !iequals(h.substr(0, colon), "authorization")) continue;
    std::string_view v = h.substr(colon + 1);
    while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
    r.authorization = std::string(v);
  }
  r.body = std::string(in);
  return r;
}

// The agent's side of the orders the hub sent since the last call: launched, alloc_finished(cancelled),
// log_chunk, exec_failed. Answers may cause more orders (a kill frees GPUs, a pass launches the next job).
void answer_orders(DaemonWorld& w, FuzzPeer& agent, size_t& handled, int64_t& seq) {
  for (int round = 0; round < 8 && handled < agent.sent.size(); ++round) {
    const size_t end = agent.sent.size();
    std::vector<json> replies;
    for (; handled < end; ++handled) {
      const json m = json::parse(agent.sent[handled]);
      const std::string type = m.at("type");
      if (type == "launch") {
        replies.push_back({{"type", "launched"},
                           {"v", 1},
                           {"alloc", m["alloc"]},
                           {"job", m["job"]},
                           {"node", m["node"]},
                           {"ranks", json::array()}});
      } else if (type == "kill") {
        replies.push_back({{"type", "alloc_finished"},
                           {"v", 1},
                           {"alloc", m["alloc"]},
                           {"job", 0},
                           {"node", m["node"]},
                           {"state", "cancelled"},
                           {"exit_code", 143},
                           {"seq", ++seq}});
      } else if (type == "logs") {
        replies.push_back({{"type", "log_chunk"},
                           {"v", 1},
                           {"req", m["req"]},
                           {"rank", m["rank"]},
                           {"stream", m["stream"]},
                           {"offset", m["offset"]},
                           {"data", "step 1\n"},
                           {"size", 7}});
      } else if (type == "exec") {
        replies.push_back({{"type", "exec_failed"}, {"v", 1}, {"req", m["req"]}, {"message", "no orted"}});
      }
    }
    for (const auto& r : replies) w.hub->on_message(&agent, r.dump());
    w.run();
  }
}

bool is_error_body(const std::string& body) {
  const json j = json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object() || j.size() != 1 || !j.contains("error")) return false;
  const json& e = j["error"];
  return e.is_object() && e.contains("code") && e["code"].is_string() && e.contains("message") &&
         e["message"].is_string();
}

void check_response(const api::HttpResponse& r) {
  if (r.status < 100 || r.status > 599) __builtin_trap();
  const bool is_json = r.content_type == "application/json";
  if (r.status >= 400 && (!is_json || !is_error_body(r.body))) __builtin_trap();
  if (is_json && json::parse(r.body, nullptr, false).is_discarded()) __builtin_trap();
}

struct HttpWorld {
  DaemonWorld world;
  std::shared_ptr<FuzzPeer> agent = world.connect({"n1", "n2", "n3", "n4"});
  size_t handled = 0;
  int64_t seq = 0;
  int inputs = 0;
};

std::unique_ptr<HttpWorld>& http_world() {
  static std::unique_ptr<HttpWorld> w;
  return w;
}

}  // namespace

void http_request(std::string_view input) {
  auto& hw = http_world();
  if (!hw || hw->inputs >= kResetEvery || hw->world.service->table().jobs().size() > kMaxJobs)
    hw = std::make_unique<HttpWorld>();
  ++hw->inputs;
  DaemonWorld& w = hw->world;
  w.now += 1;
  w.hub->on_message(hw->agent.get(), R"({"type": "heartbeat", "v": 1})");

  api::HttpRequest req = parse_request(input);
  if (req.body.size() > api::Router::body_limit(req.target)) return;  // the server answers 413
  auto replies = std::make_shared<int>(0);
  static const bool verbose = std::getenv("RAILYARD_FUZZ_VERBOSE") != nullptr;  // to inspect the seeds
  if (verbose) std::fprintf(stderr, "%s %s -> ", req.method.c_str(), req.target.c_str());
  w.router->handle(std::move(req), [replies](api::HttpResponse r) {
    ++*replies;
    if (verbose) std::fprintf(stderr, "%d %.160s\n", r.status, r.body.c_str());
    check_response(r);
  });
  w.run();
  answer_orders(w, *hw->agent, hw->handled, hw->seq);
  if (*replies == 0) {  // a logs or exec request the agent did not answer: the hub times it out
    w.now += 11;
    w.hub->tick();
    w.run();
  }
  if (*replies != 1) __builtin_trap();
  w.check_no_gpu_twice();
}

}  // namespace railyard::fuzz
