#include "scheduler/daemon/config.hpp"

#include <charconv>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <toml++/toml.h>

#include "scheduler/queue/priority.hpp"
#include "topology/generator.hpp"
#include "topology/io.hpp"

namespace railyard::daemon {

using nlohmann::json;

namespace {

// A TOML file's top-level keys as a JSON object, so both forms go through the same checks below. Values that
// are not a string, integer, float or boolean (tables, arrays, dates) become null: their key then fails its
// type check with the usual message.
Result<json> toml_to_json(const std::string& file_path, const std::string& text) {
  toml::table table;
  try {
    table = toml::parse(text, file_path);
  } catch (const toml::parse_error& e) {
    return invalid(file_path + ":" + std::to_string(e.source().begin.line) + ": not valid TOML: " +
                   std::string(e.description()));
  }
  json j = json::object();
  for (const auto& [key, node] : table) {
    json& v = j[std::string(key.str())];
    if (auto s = node.value_exact<std::string>()) v = *s;
    else if (auto i = node.value_exact<int64_t>()) v = *i;
    else if (auto f = node.value_exact<double>()) v = *f;
    else if (auto b = node.value_exact<bool>()) v = *b;
  }
  return j;
}

}  // namespace

namespace {

// The config file as a JSON object (a *.toml file read as TOML).
Result<json> read_config_json(const std::string& file_path) {
  std::ifstream in(file_path);
  if (!in) return not_found(file_path + ": cannot open config file");
  std::stringstream ss;
  ss << in.rdbuf();
  json j;
  if (file_path.ends_with(".toml")) {
    auto t = toml_to_json(file_path, ss.str());
    if (!t) return t.error();
    j = std::move(*t);
  } else {
    j = json::parse(ss.str(), nullptr, false, true);
    if (j.is_discarded() || !j.is_object())
      return invalid(file_path + ": not a JSON object (a file named *.toml is read as TOML)");
  }
  return j;
}

// One key of the config file into `c`, unless its flag was given (`is_given`); the value is checked either way.
Status merge_key(const std::string& file_path, const std::string& key, const json& v, bool is_given, DaemonConfig& c) {
  auto want = [&](bool ok, const char* type) -> Status {
    if (!ok) return invalid(file_path + ": " + key + ": must be " + type);
    return railyard::ok();
  };
  Status s = railyard::ok();
  if (key == "listen" || key == "db" || key == "cluster" || key == "preset" || key == "web_root" ||
      key == "agent_secret_file" || key == "tls_cert" || key == "tls_key" || key == "unix_socket" ||
      key == "admin_group" || key == "high_qos_users" || key == "unix_socket_mode" || key == "ha_etcd" ||
      key == "ha_name" || key == "ha_advertise" || key == "ha_etcd_ca" || key == "ha_etcd_cert" ||
      key == "ha_etcd_key" || key == "ha_state") {
    const bool state_ok = key != "ha_state" || (v.is_string() && (v == "etcd" || v == "shared"));
    s = want(v.is_string() && (key != "unix_socket_mode" || parse_socket_mode(v.get<std::string>())) && state_ok,
             key == "unix_socket_mode" ? "an octal mode string from \"0600\" to \"0777\", like \"0600\""
             : key == "ha_state"       ? "\"etcd\" or \"shared\""
                                       : "a string");
    if (s && !is_given) {
      std::string& field = key == "listen"              ? c.listen
                           : key == "db"                ? c.db
                           : key == "cluster"           ? c.cluster
                           : key == "web_root"          ? c.web_root
                           : key == "agent_secret_file" ? c.agent_secret_file
                           : key == "tls_cert"          ? c.tls_cert
                           : key == "tls_key"           ? c.tls_key
                           : key == "unix_socket"       ? c.unix_socket
                           : key == "admin_group"       ? c.admin_group
                           : key == "high_qos_users"    ? c.high_qos_users
                           : key == "unix_socket_mode"  ? c.unix_socket_mode
                           : key == "ha_etcd"           ? c.ha_etcd
                           : key == "ha_name"           ? c.ha_name
                           : key == "ha_advertise"      ? c.ha_advertise
                           : key == "ha_etcd_ca"        ? c.ha_etcd_ca
                           : key == "ha_etcd_cert"      ? c.ha_etcd_cert
                           : key == "ha_etcd_key"       ? c.ha_etcd_key
                           : key == "ha_state"          ? c.ha_state
                                                        : c.preset;
      field = v.get<std::string>();
    }
  } else if (key == "ha_ttl") {
    s = want(v.is_number_integer() && v.get<int64_t>() >= 2 && v.get<int64_t>() <= 60, "an integer 2..60 (seconds)");
    if (s && !is_given) c.ha_ttl_s = v.get<int>();
  } else if (key == "ha_log_keep") {
    s = want(v.is_number_integer() && v.get<int64_t>() >= 1 && v.get<int64_t>() <= 100'000'000,
             "an integer 1..100000000 (entries)");
    if (s && !is_given) c.ha_log_keep = v.get<int64_t>();
  } else if (key == "sus") {
    s = want(v.is_number_integer() && v.get<int64_t>() >= 1 && v.get<int64_t>() <= 10000,
             "an integer 1..10000");
    if (s && !is_given) c.sus = v.get<int>();
  } else if (key == "heartbeat_timeout" || key == "reconcile_grace") {
    s = want(v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() <= 86400,
             "an integer 0..86400 (seconds)");
    if (s && !is_given)
      (key == "heartbeat_timeout" ? c.heartbeat_timeout_s : c.reconcile_grace_s) = v.get<int>();
  } else if (key == "launch_timeout") {
    s = want(v.is_number_integer() && v.get<int64_t>() >= 1 && v.get<int64_t>() <= 86400,
             "an integer 1..86400 (seconds)");
    if (s && !is_given) c.launch_timeout_s = v.get<int>();
  } else if (key == "max_connections_per_address") {
    s = want(v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() <= 1'048'576,
             "an integer 0..1048576 (0 = no bound)");
    if (s && !is_given) c.max_connections_per_address = v.get<int>();
  } else if (key == "max_connections" || key == "header_timeout") {
    const int64_t most = key == "max_connections" ? 1'048'576 : 3600;
    s = want(v.is_number_integer() && v.get<int64_t>() >= 1 && v.get<int64_t>() <= most,
             key == "max_connections" ? "an integer 1..1048576" : "an integer 1..3600 (seconds)");
    if (s && !is_given) (key == "max_connections" ? c.max_connections : c.header_timeout_s) = v.get<int>();
  } else if (key == "compact_wait") {
    s = want(v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() <= 86400,
             "an integer 0..86400 (seconds; 0 = off)");
    if (s && !is_given) c.compact_wait_s = v.get<int>();
  } else if (key == "compact_wait_max") {
    s = want(v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() <= kMaxCompactWaitMaxS,
             "an integer 0..2592000 (seconds)");
    if (s && !is_given) c.compact_wait_max_s = v.get<int>();
  } else if (key == "fairshare_half_life") {
    s = want(v.is_number_integer() && v.get<int64_t>() >= kMinFairShareHalfLifeS &&
                 v.get<int64_t>() <= kMaxFairShareHalfLifeS,
             "an integer 3600..31536000 (seconds)");
    if (s && !is_given) c.fairshare_half_life_s = v.get<int>();
  } else if (key == "pass_budget_ms") {
    s = want(v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() <= 60000,
             "an integer 0..60000 (milliseconds; 0 = no bound)");
    if (s && !is_given) c.pass_budget_ms = v.get<int>();
  } else if (key == "compact_wait_share") {
    s = want(v.is_number() && v.get<double>() >= 0 && v.get<double>() <= kMaxCompactWaitShare,
             "a number 0..1000 (times the job's time limit)");
    if (s && !is_given) c.compact_wait_share = v.get<double>();
  } else if (key == "priority_weights") {
    s = want(v.is_string(), "a string like \"size=0,age=2000\"");
    if (s) {
      sched::PolicyConfig check;
      if (auto bad = sched::apply_priority_weights(v.get<std::string>(), check); !bad)
        s = invalid(file_path + ": priority_weights: " + bad.error().message);
    }
    if (s && !is_given) c.priority_weights = v.get<std::string>();
  } else if (key == "submit_durability") {
    s = want(v.is_string() && parse_submit_durability(v.get<std::string>()), "\"synced\" or \"written\"");
    if (s && !is_given) c.submit_durability = v.get<std::string>();
  } else if (key == "private" || key == "node_keys") {
    s = want(v.is_boolean(), "true or false");
    if (s && !is_given) (key == "private" ? c.private_reads : c.node_keys) = v.get<bool>();
  } else {
    s = invalid(
        file_path + ": " + key +
        ": unknown key (known: listen, db, cluster, preset, sus, private, web_root, "
        "agent_secret_file, node_keys, heartbeat_timeout, reconcile_grace, launch_timeout, compact_wait, "
        "compact_wait_max, compact_wait_share, pass_budget_ms, priority_weights, fairshare_half_life, "
        "tls_cert, tls_key, submit_durability, max_connections, "
        "header_timeout, max_connections_per_address, unix_socket, unix_socket_mode, admin_group, "
        "high_qos_users, ha_etcd, ha_name, ha_advertise, ha_ttl, ha_state, ha_log_keep, ha_etcd_ca, "
        "ha_etcd_cert, ha_etcd_key)");
  }
  return s;
}

}  // namespace

Status merge_config_file(const std::string& file_path, const std::set<std::string>& given, DaemonConfig& c) {
  auto j = read_config_json(file_path);
  if (!j) return j.error();
  for (const auto& item : j->items())
    if (auto s = merge_key(file_path, item.key(), item.value(), given.count(item.key()) > 0, c); !s) return s;
  return ok();
}

Result<unsigned> parse_socket_mode(const std::string& text) {
  unsigned mode = 0;
  bool digits = !text.empty() && text.size() <= 4;
  for (char ch : text) {
    digits = digits && ch >= '0' && ch <= '7';
    mode = mode * 8 + static_cast<unsigned>(ch - '0');
  }
  if (!digits || mode > 0777 || (mode & 0600) != 0600)
    return invalid("--unix-socket-mode " + text +
                   ": must be an octal mode 0600..0777 with read and write for the owner (0600: only the "
                   "scheduler's user may connect; 0666: every local user, each as who the kernel says)");
  return mode;
}

Result<store::Durability> parse_submit_durability(const std::string& text) {
  if (text == "synced") return store::Durability::kSynced;
  if (text == "written") return store::Durability::kWritten;
  return invalid("submit durability " + text +
                 ": expected synced (on disk when acknowledged) or written (in the "
                 "log: survives a killed scheduler, not a machine crash)");
}

Result<sched::PolicyConfig> policy_of(const DaemonConfig& config) {
  sched::PolicyConfig policy;
  policy.compact_wait_s = config.compact_wait_s;
  policy.compact_wait_max_s = config.compact_wait_max_s;
  policy.compact_wait_share = config.compact_wait_share;
  if (auto s = sched::apply_priority_weights(config.priority_weights, policy); !s)
    return invalid("--priority-weights " + s.error().message);
  return policy;
}

Result<ListenAddress> parse_listen(const std::string& text) {
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0) return invalid("--listen " + text + ": expected HOST:PORT");
  ListenAddress a{text.substr(0, colon), 0};
  if (a.host.size() > 2 && a.host.front() == '[' && a.host.back() == ']')
    a.host = a.host.substr(1, a.host.size() - 2);
  const char* b = text.data() + colon + 1;
  const char* e = text.data() + text.size();
  auto [p, ec] = std::from_chars(b, e, a.port);
  if (ec != std::errc() || p != e || b == e || a.port < 0 || a.port > 65535)
    return invalid("--listen " + text + ": port must be 0..65535");
  return a;
}

Result<topology::Cluster> load_cluster(const DaemonConfig& c) {
  if (!c.cluster.empty()) return topology::load_cluster_file(c.cluster);
  return topology::generate_superpod(c.preset, c.sus);
}

}  // namespace railyard::daemon
