#include "scheduler/ha/etcd.hpp"

#include <nlohmann/json.hpp>

#include "common/net/http_client.hpp"

namespace railyard::ha {

using nlohmann::json;

namespace {

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

// The gateway writes int64 fields as strings (proto3 JSON) and leaves out zero values.
int64_t int_field(const json& j, const char* name) {
  if (!j.is_object() || !j.contains(name)) return 0;
  const json& v = j[name];
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_string()) {
    try {
      return std::stoll(v.get<std::string>());
    } catch (const std::exception&) {
      return 0;
    }
  }
  return 0;
}

KeyValue read_kv(const json& kv) {
  return {base64_decode(kv.value("key", "")), base64_decode(kv.value("value", "")),
          int_field(kv, "create_revision"), int_field(kv, "mod_revision"), int_field(kv, "lease")};
}

Result<json> parse(const Result<std::string>& text) {
  if (!text) return text.error();
  auto j = json::parse(*text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Error{ErrorCode::kUnavailable, "etcd: malformed answer"};
  return j;
}

}  // namespace

std::string prefix_end(std::string prefix) {
  while (!prefix.empty()) {
    auto& c = prefix.back();
    if (static_cast<unsigned char>(c) < 0xff) {
      ++c;
      return prefix;
    }
    prefix.pop_back();
  }
  return std::string(1, '\0');
}

std::vector<std::string> split_endpoints(const std::string& list) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    if (comma == std::string::npos) comma = list.size();
    std::string item = list.substr(start, comma - start);
    while (!item.empty() && item.front() == ' ') item.erase(item.begin());
    while (!item.empty() && item.back() == ' ') item.pop_back();
    if (!item.empty()) out.push_back(item);
    start = comma + 1;
  }
  return out;
}

std::string base64_encode(const std::string& data) {
  std::string out;
  out.reserve((data.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < data.size(); i += 3) {
    const uint32_t n = (uint32_t(uint8_t(data[i])) << 16) | (uint32_t(uint8_t(data[i + 1])) << 8) |
                       uint32_t(uint8_t(data[i + 2]));
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += kAlphabet[(n >> 6) & 63];
    out += kAlphabet[n & 63];
  }
  if (i + 1 == data.size()) {
    const uint32_t n = uint32_t(uint8_t(data[i])) << 16;
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += "==";
  } else if (i + 2 == data.size()) {
    const uint32_t n = (uint32_t(uint8_t(data[i])) << 16) | (uint32_t(uint8_t(data[i + 1])) << 8);
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += kAlphabet[(n >> 6) & 63];
    out += '=';
  }
  return out;
}

std::string base64_decode(const std::string& text) {
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : text) {
    int v;
    if (c >= 'A' && c <= 'Z') v = c - 'A';
    else if (c >= 'a' && c <= 'z') v = c - 'a' + 26;
    else if (c >= '0' && c <= '9') v = c - '0' + 52;
    else if (c == '+' || c == '-') v = 62;
    else if (c == '/' || c == '_') v = 63;
    else continue;  // '=' and whitespace
    acc = (acc << 6) | uint32_t(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xff);
    }
  }
  return out;
}

EtcdClient::EtcdClient(std::vector<std::string> endpoints, std::chrono::milliseconds timeout,
                       net::ClientTls tls)
    : endpoints_(std::move(endpoints)), timeout_(timeout), tls_(std::move(tls)) {
  clients_.resize(endpoints_.size());
}

EtcdClient::~EtcdClient() = default;

Result<std::string> EtcdClient::call(const std::string& path, const std::string& body) {
  if (endpoints_.empty()) return invalid("etcd: no endpoints");
  std::string last_error;
  for (size_t tries = 0; tries < endpoints_.size(); ++tries) {
    const size_t k = current_;
    auto& client = clients_[k];
    if (!client) {
      auto parsed = net::parse_http_url(endpoints_[k], "--ha-etcd");
      if (!parsed) return parsed.error();
      client = std::make_unique<net::HttpClient>(endpoints_[k], std::move(*parsed), timeout_, tls_);
    }
    auto reply = client->request("POST", path, body);
    if (reply && reply->status == 200) return std::move(reply->body);
    last_error = reply ? "HTTP " + std::to_string(reply->status) + ": " + reply->body.substr(0, 200)
                       : reply.error().message;
    // A member that answers with an error (no leader, a lost quorum) is skipped like one that is down.
    client.reset();
    current_ = (current_ + 1) % endpoints_.size();
  }
  return Error{ErrorCode::kUnavailable, "etcd " + path + ": " + last_error};
}

Result<int64_t> EtcdClient::grant(int ttl_s) {
  auto j = parse(call("/v3/lease/grant", json{{"TTL", ttl_s}}.dump()));
  if (!j) return j.error();
  const int64_t id = int_field(*j, "ID");
  if (id == 0) return Error{ErrorCode::kUnavailable, "etcd: lease grant without an ID: " + j->dump()};
  return id;
}

Result<int64_t> EtcdClient::keepalive(int64_t lease) {
  auto j = parse(call("/v3/lease/keepalive", json{{"ID", std::to_string(lease)}}.dump()));
  if (!j) return j.error();
  if (!j->contains("result")) return Error{ErrorCode::kUnavailable, "etcd: keepalive: " + j->dump()};
  return int_field((*j)["result"], "TTL");
}

Status EtcdClient::revoke(int64_t lease) {
  auto j = parse(call("/v3/lease/revoke", json{{"ID", std::to_string(lease)}}.dump()));
  if (!j) return j.error();
  return ok();
}

Result<CreateResult> EtcdClient::create(const std::string& key, const std::string& value, int64_t lease) {
  const std::string k = base64_encode(key);
  json body = {
      {"compare", json::array({{{"key", k}, {"target", "CREATE"}, {"create_revision", "0"}}})},
      {"success", json::array({{{"request_put",
                                 {{"key", k}, {"value", base64_encode(value)}, {"lease", std::to_string(lease)}}}}})},
      {"failure", json::array({{{"request_range", {{"key", k}}}}})}};
  auto j = parse(call("/v3/kv/txn", body.dump()));
  if (!j) return j.error();
  CreateResult r;
  r.created = j->value("succeeded", false);
  r.revision = int_field(j->value("header", json::object()), "revision");
  if (!r.created && j->contains("responses"))
    for (const auto& resp : (*j)["responses"])
      if (resp.contains("response_range"))
        for (const auto& kv : resp["response_range"].value("kvs", json::array())) r.holder = read_kv(kv);
  return r;
}

Status EtcdClient::put(const std::string& key, const std::string& value, int64_t lease) {
  json body = {{"key", base64_encode(key)}, {"value", base64_encode(value)}};
  if (lease != 0) body["lease"] = std::to_string(lease);
  auto j = parse(call("/v3/kv/put", body.dump()));
  if (!j) return j.error();
  return ok();
}

Result<std::optional<KeyValue>> EtcdClient::get(const std::string& key) {
  auto j = parse(call("/v3/kv/range", json{{"key", base64_encode(key)}}.dump()));
  if (!j) return j.error();
  for (const auto& kv : j->value("kvs", json::array())) return std::optional<KeyValue>(read_kv(kv));
  return std::optional<KeyValue>();
}

Result<std::vector<KeyValue>> EtcdClient::list(const std::string& prefix) {
  auto j = parse(call("/v3/kv/range",
                      json{{"key", base64_encode(prefix)}, {"range_end", base64_encode(prefix_end(prefix))}}.dump()));
  if (!j) return j.error();
  std::vector<KeyValue> out;
  for (const auto& kv : j->value("kvs", json::array())) out.push_back(read_kv(kv));
  return out;
}

Result<RangeResult> EtcdClient::range(const std::string& key, const std::string& range_end, int64_t limit,
                                      int64_t revision) {
  json body = {{"key", base64_encode(key)}, {"range_end", base64_encode(range_end)}};
  if (limit > 0) body["limit"] = std::to_string(limit);
  if (revision > 0) body["revision"] = std::to_string(revision);
  auto j = parse(call("/v3/kv/range", body.dump()));
  if (!j) return j.error();
  RangeResult r;
  for (const auto& kv : j->value("kvs", json::array())) r.kvs.push_back(read_kv(kv));
  r.more = j->value("more", false);
  r.revision = int_field(j->value("header", json::object()), "revision");
  return r;
}

namespace {

json create_revision_is(const std::string& key, int64_t revision) {
  return {{"key", base64_encode(key)}, {"target", "CREATE"}, {"create_revision", std::to_string(revision)}};
}

// The kvs of the failure branch's range reads, in order (an absent key: nullopt).
std::vector<std::optional<KeyValue>> failure_reads(const json& answer) {
  std::vector<std::optional<KeyValue>> out;
  for (const auto& resp : answer.value("responses", json::array())) {
    std::optional<KeyValue> kv;
    if (resp.contains("response_range"))
      for (const auto& k : resp["response_range"].value("kvs", json::array())) kv = read_kv(k);
    out.push_back(std::move(kv));
  }
  return out;
}

}  // namespace

Result<GuardedPutResult> EtcdClient::guarded_put(const std::string& guard, int64_t guard_revision,
                                                 const std::string& key, const std::string& value) {
  const std::string k = base64_encode(key);
  json body = {{"compare", json::array({create_revision_is(guard, guard_revision),
                                        {{"key", k}, {"target", "VERSION"}, {"version", "0"}}})},
               {"success", json::array({{{"request_put", {{"key", k}, {"value", base64_encode(value)}}}}})},
               {"failure", json::array({{{"request_range", {{"key", base64_encode(guard)}}}},
                                        {{"request_range", {{"key", k}}}}})}};
  auto j = parse(call("/v3/kv/txn", body.dump()));
  if (!j) return j.error();
  GuardedPutResult r;
  r.put = j->value("succeeded", false);
  if (!r.put) {
    auto reads = failure_reads(*j);
    if (reads.size() != 2) return Error{ErrorCode::kUnavailable, "etcd: malformed transaction answer"};
    r.guard = std::move(reads[0]);
    r.existing = std::move(reads[1]);
  }
  return r;
}

Result<bool> EtcdClient::guarded_delete(const std::string& guard, int64_t guard_revision, const std::string& key,
                                        const std::string& range_end) {
  json body = {
      {"compare", json::array({create_revision_is(guard, guard_revision)})},
      {"success", json::array({{{"request_delete_range",
                                 {{"key", base64_encode(key)}, {"range_end", base64_encode(range_end)}}}}})}};
  auto j = parse(call("/v3/kv/txn", body.dump()));
  if (!j) return j.error();
  return j->value("succeeded", false);
}

Status EtcdClient::compact(int64_t revision) {
  auto j = parse(call("/v3/kv/compaction", json{{"revision", std::to_string(revision)}}.dump()));
  if (!j) return j.error();
  return ok();
}

Result<bool> EtcdClient::guarded_put_delete(const std::string& guard, int64_t guard_revision, const std::string& key,
                                            const std::string& value, const std::string& from, const std::string& to) {
  json body = {{"compare", json::array({create_revision_is(guard, guard_revision)})},
               {"success", json::array({{{"request_put", {{"key", base64_encode(key)}, {"value", base64_encode(value)}}}},
                                        {{"request_delete_range",
                                          {{"key", base64_encode(from)}, {"range_end", base64_encode(to)}}}}})}};
  auto j = parse(call("/v3/kv/txn", body.dump()));
  if (!j) return j.error();
  return j->value("succeeded", false);
}

Result<EtcdClient::MemberStatus> EtcdClient::status() {
  auto j = parse(call("/v3/maintenance/status", "{}"));
  if (!j) return j.error();
  return MemberStatus{int_field(*j, "dbSize"), int_field(*j, "dbSizeInUse")};
}

Status EtcdClient::defragment() {
  auto j = parse(call("/v3/maintenance/defragment", "{}"));
  if (!j) return j.error();
  return ok();
}

}  // namespace railyard::ha
