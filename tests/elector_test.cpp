// The HA elector (scheduler/ha/elector.hpp) against a real etcd, reached through a proxy on 127.0.0.1 that
// refuses chosen requests: what the elector does when etcd answers a request with an error. Skipped where
// etcd is not installed (deploy/bootstrap.sh installs etcd-server).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "common/net/http_client.hpp"
#include "scheduler/api/server.hpp"
#include "scheduler/ha/elector.hpp"
#include "tests/etcd_fixture.hpp"

namespace railyard {
namespace {

using namespace std::chrono_literals;
using testing::Etcd;
using testing::find_etcd;

// Forwards every request to etcd, but answers the first `refuse` puts with 503 as a member without a leader
// would.
class RefusingProxy {
 public:
  RefusingProxy(const std::string& upstream, int refuse)
      : upstream_(upstream, *net::parse_http_url(upstream), 2s), refuse_(refuse) {
    server_.set_handler([this](api::HttpRequest&& req, api::Reply reply) {
      if (req.target == "/v3/kv/put" && refused_ < refuse_) {
        ++refused_;
        return reply({503, "application/json", R"({"error":"refused by the test"})", {}});
      }
      auto r = upstream_.request(req.method, req.target, req.body);
      if (!r) return reply({502, "application/json", "{}", {}});
      reply({r->status, "application/json", r->body, {}});
    });
  }
  bool start() {
    auto port = server_.listen("127.0.0.1", 0);
    if (!port) return false;
    url_ = "http://127.0.0.1:" + std::to_string(*port);
    thread_ = std::thread([this] { server_.run(); });
    return true;
  }
  ~RefusingProxy() {
    server_.stop();
    if (thread_.joinable()) thread_.join();
  }
  const std::string& url() const { return url_; }
  int refused() const { return refused_.load(); }

 private:
  net::HttpClient upstream_;  // used on the server's event loop only
  api::HttpServer server_;
  std::thread thread_;
  std::string url_;
  const int refuse_;
  std::atomic<int> refused_{0};
};

bool listed(const ha::Elector& e, const std::string& name) {
  for (const auto& m : e.members())
    if (m.name == name) return true;
  return false;
}

// The member put that etcd refused when the lease was granted is put again on a later round, so the leader
// lists itself (GET /api/v1/leader's members, the dashboard's badge) without a new lease.
TEST(Elector, AMemberPutEtcdRefusedIsPutAgain) {
  const std::string binary = find_etcd();
  if (binary.empty()) GTEST_SKIP() << "etcd is not installed (deploy/bootstrap.sh installs etcd-server)";
  Etcd etcd;
  ASSERT_TRUE(etcd.start(binary)) << etcd.log();
  RefusingProxy proxy(etcd.url(), 2);
  ASSERT_TRUE(proxy.start());

  ha::ElectorOptions o;
  o.endpoints = {proxy.url()};
  o.name = "s1";
  o.address = "http://127.0.0.1:1";
  o.ttl_s = 5;  // keepalive rounds every second
  std::atomic<bool> lost{false};
  ha::Elector elector(o, [&](const std::string&) { lost = true; });
  auto epoch = elector.campaign();
  ASSERT_TRUE(epoch) << epoch.error().message;
  EXPECT_GE(proxy.refused(), 1);  // the put after the grant was refused
  for (auto until = std::chrono::steady_clock::now() + 10s;
       !listed(elector, "s1") && std::chrono::steady_clock::now() < until;)
    std::this_thread::sleep_for(100ms);
  EXPECT_TRUE(listed(elector, "s1")) << "refused puts: " << proxy.refused();
  EXPECT_EQ(proxy.refused(), 2);
  EXPECT_FALSE(lost.load());
}

}  // namespace
}  // namespace railyard
