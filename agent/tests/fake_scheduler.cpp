#include "agent/tests/fake_scheduler.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "agent/session/protocol.hpp"

namespace railyard::agent::testing {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
using tcp = asio::ip::tcp;
using asio::awaitable;
using asio::use_awaitable;
using nlohmann::json;

// Not in an anonymous namespace: FakeScheduler::Impl holds these, and in a unity build GCC warns of a class
// with a member of an internal type (-Wsubobject-linkage).
struct AgentConn : std::enable_shared_from_this<AgentConn> {
  explicit AgentConn(beast::tcp_stream s) : ws(std::move(s)) {}
  websocket::stream<beast::tcp_stream> ws;
  std::deque<std::string> out;
  bool writing = false;
  bool closed = false;
  std::optional<protocol::OrderSealer> sealer;  // from the registration on, as AgentHub::send seals

  void send(std::string text) {
    if (closed) return;
    if (sealer) text = sealer->seal(std::move(text));
    out.push_back(std::move(text));
    write_next();
  }
  void write_next() {
    if (writing || out.empty() || closed) return;
    writing = true;
    ws.async_write(asio::buffer(out.front()), [self = shared_from_this()](beast::error_code ec, size_t) {
      self->writing = false;
      if (ec) return;
      self->out.pop_front();
      self->write_next();
    });
  }
};

struct FakeScheduler::Impl {
  std::string secret;
  asio::io_context io;
  tcp::acceptor acceptor{io};
  std::thread thread;
  mutable std::mutex mu;
  std::condition_variable cv;
  std::vector<json> frames;  // guarded by mu
  int execs = 0;             // guarded by mu
  // io thread only:
  std::vector<std::shared_ptr<AgentConn>> agents;
  std::map<std::string, std::pair<std::shared_ptr<asio::steady_timer>, std::shared_ptr<json>>> pending;
  int next_req = 1;

  void record(const json& m) {
    std::lock_guard lock(mu);
    frames.push_back(m);
    cv.notify_all();
  }

  void send_latest(const json& m) {
    if (!agents.empty()) agents.back()->send(m.dump());
  }

  void handle(AgentConn& c, const json& m, const std::string& challenge) {
    const std::string type = m.value("type", "");
    if (type == "register") {
      std::vector<std::string> names;
      for (const auto& n : m["nodes"]) names.push_back(n["name"]);
      if (m.value("mac", "") != register_mac(secret, challenge, m.value("agent", ""), names)) {
        c.send(json{{"type", "error"}, {"v", 1}, {"code", "unauthorized"}, {"message", "bad mac"}}.dump());
        return;
      }
      c.sealer.emplace(protocol::session_key(secret, challenge, m.value("agent_challenge", ""), m.value("agent", "")));
      c.send(json{{"type", "registered"}, {"v", 1}, {"heartbeat_s", 1}, {"nodes", names}}.dump());
      for (const auto& f : m["finished"]) c.send(json{{"type", "ack"}, {"v", 1}, {"seq", f["seq"]}}.dump());
    } else if (type == "alloc_finished") {
      c.send(json{{"type", "ack"}, {"v", 1}, {"seq", m["seq"]}}.dump());
    } else if (type == "exec_started" || type == "exec_failed") {
      auto it = pending.find(m.value("req", ""));
      if (it == pending.end()) return;
      *it->second.second = m;
      it->second.first->cancel();
    }
  }

  awaitable<void> agent_session(beast::tcp_stream stream, http::request<http::string_body> req) {
    auto c = std::make_shared<AgentConn>(std::move(stream));
    c->ws.set_option(websocket::stream_base::timeout::suggested(beast::role_type::server));
    co_await c->ws.async_accept(req, use_awaitable);
    c->ws.text(true);
    agents.push_back(c);
    const std::string challenge = hmac_sha256_hex("challenge", std::to_string(agents.size()));
    c->send(json{{"type", "hello"}, {"v", 1}, {"challenge", challenge}, {"server", "fake"}}.dump());
    beast::flat_buffer buf;
    for (;;) {
      auto [ec, n] = co_await c->ws.async_read(buf, asio::as_tuple(use_awaitable));
      if (ec) break;
      json m = json::parse(beast::buffers_to_string(buf.data()), nullptr, false);
      buf.consume(buf.size());
      record(m);
      handle(*c, m, challenge);
    }
    c->closed = true;
    std::erase(agents, c);
  }

  awaitable<void> exec_request(beast::tcp_stream& stream, const http::request<http::string_body>& req) {
    http::response<http::string_body> res{http::status::ok, req.version()};
    {
      std::lock_guard lock(mu);
      ++execs;
    }
    const std::string target(req.target());
    const std::string prefix = "/api/v1/allocs/";
    const std::string alloc = target.substr(prefix.size(), target.rfind("/exec") - prefix.size());
    const std::string auth(req[http::field::authorization]);
    json body = json::parse(req.body(), nullptr, false);
    if (auth != "Bearer " + exec_token(secret, alloc)) {
      res.result(http::status::forbidden);
      res.body() = R"({"error":"bad token"})";
    } else if (body.is_discarded() || agents.empty()) {
      res.result(http::status::bad_request);
    } else {
      const std::string id = "x" + std::to_string(next_req++);
      auto timer = std::make_shared<asio::steady_timer>(io, std::chrono::seconds(30));
      auto answer = std::make_shared<json>();
      pending[id] = {timer, answer};
      send_latest({{"type", "exec"},
                   {"v", 1},
                   {"req", id},
                   {"alloc", alloc},
                   {"node", body["node"]},
                   {"argv", body["argv"]}});
      co_await timer->async_wait(asio::as_tuple(use_awaitable));
      pending.erase(id);
      if (answer->value("type", "") == "exec_started") {
        res.body() = json{{"pid", (*answer)["pid"]}}.dump();
      } else {
        res.result(http::status::bad_gateway);
        res.body() = answer->value("message", "no answer");
      }
    }
    res.prepare_payload();
    co_await http::async_write(stream, res, asio::as_tuple(use_awaitable));
  }

  awaitable<void> connection(tcp::socket socket) {
    beast::tcp_stream stream(std::move(socket));
    beast::flat_buffer buf;
    http::request<http::string_body> req;
    auto [ec, n] = co_await http::async_read(stream, buf, req, asio::as_tuple(use_awaitable));
    if (ec) co_return;
    if (websocket::is_upgrade(req) && req.target() == "/api/v1/agent") {
      co_await agent_session(std::move(stream), std::move(req));
    } else if (req.method() == http::verb::post && req.target().ends_with("/exec")) {
      co_await exec_request(stream, req);
    }
  }

  awaitable<void> accept_loop() {
    for (;;) {
      auto [ec, socket] = co_await acceptor.async_accept(asio::as_tuple(use_awaitable));
      if (ec) co_return;
      asio::co_spawn(io, connection(std::move(socket)), asio::detached);
    }
  }
};

FakeScheduler::FakeScheduler(std::string secret) : impl_(std::make_unique<Impl>()) {
  impl_->secret = std::move(secret);
  tcp::endpoint ep(asio::ip::make_address("127.0.0.1"), 0);
  impl_->acceptor.open(ep.protocol());
  impl_->acceptor.set_option(tcp::acceptor::reuse_address(true));
  impl_->acceptor.bind(ep);
  impl_->acceptor.listen();
  asio::co_spawn(impl_->io, impl_->accept_loop(), asio::detached);
  impl_->thread = std::thread([this] { impl_->io.run(); });
}

FakeScheduler::~FakeScheduler() {
  impl_->io.stop();
  impl_->thread.join();
}

int FakeScheduler::port() const { return impl_->acceptor.local_endpoint().port(); }

void FakeScheduler::send(const json& msg) {
  asio::post(impl_->io, [this, msg] { impl_->send_latest(msg); });
}

void FakeScheduler::drop_agents() {
  asio::post(impl_->io, [this] {
    for (auto& a : impl_->agents) {
      beast::error_code ignored;
      beast::get_lowest_layer(a->ws).socket().close(ignored);
    }
  });
}

json FakeScheduler::wait_for(const std::function<bool(const json&)>& match, size_t& from,
                             std::chrono::milliseconds timeout) {
  std::unique_lock lock(impl_->mu);
  const auto until = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    for (; from < impl_->frames.size(); ++from)
      if (match(impl_->frames[from])) return impl_->frames[from++];
    if (impl_->cv.wait_until(lock, until) == std::cv_status::timeout) return nullptr;
  }
}

std::vector<json> FakeScheduler::frames() const {
  std::lock_guard lock(impl_->mu);
  return impl_->frames;
}

int FakeScheduler::exec_requests() const {
  std::lock_guard lock(impl_->mu);
  return impl_->execs;
}

}  // namespace railyard::agent::testing
