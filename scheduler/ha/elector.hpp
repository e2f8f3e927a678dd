// Leader election among railyard-scheduler instances through an etcd lease (issue 30).
//
//   grant lease (TTL) ──► put <prefix>/members/<name> with the lease ──► loop: txn "create <prefix>/leader if
//   absent, with the lease" ──won──► leader, epoch = the revision of that put
//                                 └─lost─► remember the holder (GET /api/v1/leader answers it), sleep `poll`
//
// The member key is put again with every new lease, and retried each round until etcd takes it. The lease is
// renewed every TTL/3 from the start, as etcd's own client does (a failed renewal is tried again after
// 250 ms). A standby's round reads the leader key and tries to create it only when it is absent. Once
// leading, a watchdog compares a monotonic clock with the send time of the last keepalive etcd confirmed: at
// TTL − margin without one, `on_lost` runs, so the leader stops acting before etcd could expire its lease and
// elect another (etcd counts the TTL from when it received that keepalive, which is later). `on_lost` also
// runs when the leader key is gone or held by another lease. The daemon's on_lost ends the process: a deposed
// leader neither writes nor orders agents (kube-controller-manager does the same); a supervisor restarts it
// as a standby.
//
// The epoch is etcd's revision at which the leader key was created: it grows with every election, so a
// younger leader always has a larger one (agents and the database refuse an older one).
//
// Thread safety: campaign() on one thread; stop(), leader(), members(), leading() from any.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/net/http_client.hpp"
#include "common/result.hpp"

namespace railyard::ha {

class EtcdClient;
struct KeyValue;

struct ElectorOptions {
  std::vector<std::string> endpoints;  // etcd client URLs
  net::ClientTls tls;                  // https:// endpoints: the CA ("" = the system's), a client certificate
  std::string name;                    // this instance (--ha-name), unique in the cluster
  std::string address;                 // the URL clients reach this instance at (http://host:port)
  std::string prefix = "/railyard";    // keys: <prefix>/leader, <prefix>/members/<name>
  int ttl_s = 5;
  std::chrono::milliseconds margin{1500};  // stop acting this long before the lease could expire
  std::chrono::milliseconds poll{50};      // how often a standby looks at the leader key
};

struct LeaderInfo {
  std::string name;
  std::string address;
  int64_t epoch = 0;
  int64_t since_ms = 0;  // wall clock, when it won
};

struct MemberInfo {
  std::string name;
  std::string address;
  int64_t since_ms = 0;  // when it started
};

// The members registered under <prefix>/members/ (their values: {"name", "address", "since_ms"}); values
// that are not such objects are left out.
std::vector<MemberInfo> read_members(const std::vector<KeyValue>& list);

class Elector {
 public:
  using Lost = std::function<void(const std::string& why)>;
  Elector(ElectorOptions options, Lost on_lost);
  // Stops the threads and revokes the lease, so a standby wins at once after a clean stop.
  ~Elector();
  Elector(const Elector&) = delete;
  Elector& operator=(const Elector&) = delete;

  // Blocks until this instance leads: its epoch. kUnavailable once stop() was called.
  Result<int64_t> campaign();
  void stop();

  bool leading() const { return leading_.load(); }
  std::optional<LeaderInfo> leader() const;
  std::vector<MemberInfo> members() const;
  const ElectorOptions& options() const { return options_; }

 private:
  void keepalive_loop();
  void watchdog_loop();
  void observe_loop();  // once leading: the leader key is still ours; the member list
  void register_member(EtcdClient& etcd);
  int64_t win(int64_t epoch, int64_t since_ms);  // leading from now: the watchdog and observer start
  void note_holder(const KeyValue& holder, bool& logged);  // a standby: who leads (logged when it changes)
  void refresh_members(EtcdClient& etcd);                  // the member list, at most once a second
  bool sleep_for(std::chrono::milliseconds d);  // false once stopping
  void lose(const std::string& why);
  std::string leader_key() const { return options_.prefix + "/leader"; }
  std::string member_key() const { return options_.prefix + "/members/" + options_.name; }

  ElectorOptions options_;
  Lost on_lost_;
  int64_t started_ms_ = 0;
  std::atomic<int64_t> lease_{0};
  std::atomic<int64_t> registered_{0};  // the lease the member key was last put with
  std::atomic<bool> leading_{false};
  std::atomic<bool> lost_{false};
  // steady_clock time (ns since its epoch) at which the last keepalive that etcd confirmed was sent.
  std::atomic<int64_t> renewed_at_ns_{0};
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::optional<LeaderInfo> leader_;
  std::vector<MemberInfo> members_;
  int64_t members_read_ns_ = 0;  // campaign()'s thread only
  std::thread keepalive_, watchdog_, observer_;
};

}  // namespace railyard::ha
