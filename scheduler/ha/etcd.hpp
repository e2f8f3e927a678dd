// A small synchronous etcd v3 client over etcd's JSON gateway (/v3/..., etcd 3.4), for leader election
// (elector.hpp). No Beast here: requests go through net::HttpClient (common/net), whose every operation has
// a timeout. Keys and values are plain strings here; the gateway's base64 and its int64-as-string fields stay
// inside etcd.cpp.
//
// Endpoints: a list of member URLs; a request that cannot reach one tries the next (each once per call), so a
// cluster with a majority up answers. Thread safety: none; one client per thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/net/http_client.hpp"
#include "common/result.hpp"

namespace railyard::ha {

struct KeyValue {
  std::string key;
  std::string value;
  int64_t create_revision = 0;
  int64_t mod_revision = 0;
  int64_t lease = 0;
};

// The outcome of a create-if-absent transaction.
struct CreateResult {
  bool created = false;
  int64_t revision = 0;             // the store's revision after the transaction (the put's, when created)
  std::optional<KeyValue> holder;   // the key as found, when not created
};

// The outcome of a put guarded by another key's create revision (guarded_put).
struct GuardedPutResult {
  bool put = false;
  std::optional<KeyValue> guard;     // the guard key as found, when not put
  std::optional<KeyValue> existing;  // the key as found, when not put
};

// A page of a range read.
struct RangeResult {
  std::vector<KeyValue> kvs;
  bool more = false;      // keys past the limit remain
  int64_t revision = 0;   // the store's revision the read saw
};

// "http://a:1,http://b:2" -> {"http://a:1", "http://b:2"}; blanks dropped.
std::vector<std::string> split_endpoints(const std::string& list);

std::string base64_encode(const std::string& data);
// The range end that covers every key starting with `prefix`.
std::string prefix_end(std::string prefix);
std::string base64_decode(const std::string& text);

class EtcdClient {
 public:
  // `tls`: how https:// endpoints are verified, and the client certificate shown to a cluster that requires
  // one (etcd's --client-cert-auth).
  EtcdClient(std::vector<std::string> endpoints, std::chrono::milliseconds timeout, net::ClientTls tls = {});
  ~EtcdClient();
  EtcdClient(const EtcdClient&) = delete;
  EtcdClient& operator=(const EtcdClient&) = delete;

  // A lease of `ttl_s` seconds; its id.
  Result<int64_t> grant(int ttl_s);
  // Renews the lease; the TTL etcd granted, 0 when the lease is gone (expired or revoked).
  Result<int64_t> keepalive(int64_t lease);
  Status revoke(int64_t lease);
  // Puts `key` = `value` attached to `lease` only if the key does not exist.
  Result<CreateResult> create(const std::string& key, const std::string& value, int64_t lease);
  Status put(const std::string& key, const std::string& value, int64_t lease);
  Result<std::optional<KeyValue>> get(const std::string& key);
  // Every key that starts with `prefix`.
  Result<std::vector<KeyValue>> list(const std::string& prefix);
  // Keys in [key, range_end), in key order, at most `limit` (0: all), as of `revision` (0: the newest).
  Result<RangeResult> range(const std::string& key, const std::string& range_end, int64_t limit,
                            int64_t revision = 0);
  // One transaction: puts `key` = `value` if `guard` exists with create revision `guard_revision` (the
  // leader key of one term) and `key` does not exist yet; otherwise both as found.
  Result<GuardedPutResult> guarded_put(const std::string& guard, int64_t guard_revision, const std::string& key,
                                       const std::string& value);
  // One transaction: deletes [key, range_end) if `guard` exists with create revision `guard_revision`;
  // false when it does not.
  Result<bool> guarded_delete(const std::string& guard, int64_t guard_revision, const std::string& key,
                              const std::string& range_end);
  // Drops the history of revisions before `revision` (etcd's compaction; keys' current values stay).
  Status compact(int64_t revision);
  // One transaction guarded like guarded_put: puts `key` = `value` and deletes [from, to); false when the
  // guard does not hold.
  Result<bool> guarded_put_delete(const std::string& guard, int64_t guard_revision, const std::string& key,
                                  const std::string& value, const std::string& from, const std::string& to);
  // The first endpoint's member: the size of its database file and the part in use (etcd 3.4's status).
  struct MemberStatus {
    int64_t db_size = 0;
    int64_t db_size_in_use = 0;
  };
  Result<MemberStatus> status();
  // Defragments the first endpoint's member (it answers nothing else meanwhile).
  Status defragment();

 private:
  // POSTs `body` to `path` on the first endpoint that answers; the parsed JSON reply text.
  Result<std::string> call(const std::string& path, const std::string& body);

  std::vector<std::string> endpoints_;
  std::chrono::milliseconds timeout_;
  net::ClientTls tls_;
  size_t current_ = 0;
  std::vector<std::unique_ptr<net::HttpClient>> clients_;  // one per endpoint, made on first use
};

}  // namespace railyard::ha
