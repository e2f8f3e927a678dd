// The daemon's settings: command-line flags, optionally a config file with the same keys, JSON or (a file
// named *.toml) TOML
// ({"listen": "127.0.0.1:8600", "db": "...", "cluster": "...", "preset": "...", "sus": 1, "private": false,
//   "web_root": "...", "agent_secret_file": "...", "heartbeat_timeout": 30, "reconcile_grace": 30,
//   "launch_timeout": 120, "compact_wait": 300, "compact_wait_max": 604800, "compact_wait_share": 12,
//   "pass_budget_ms": 1000, "priority_weights": "size=0", "fairshare_half_life": 604800,
//   "tls_cert": "...", "tls_key": "...", "submit_durability": "synced", "max_connections": 4096,
//   "header_timeout": 10, "max_connections_per_address": 512, "unix_socket": "/run/railyard.sock",
//   "unix_socket_mode": "0666", "admin_group": "railyard-admins",
//   "high_qos_users": "alice,bob"});
// a flag given on the command line wins over the file.
#pragma once

#include <set>
#include <string>

#include "common/result.hpp"
#include "scheduler/model/snapshot.hpp"
#include "scheduler/store/state_store.hpp"
#include "topology/cluster.hpp"

namespace railyard::daemon {

// The longest compact wait an operator may set (--compact-wait-max): 30 days.
inline constexpr int kMaxCompactWaitMaxS = 30 * 86400;
// --fairshare-half-life's range: an hour to a year.
inline constexpr int kMinFairShareHalfLifeS = 3600;
inline constexpr int kMaxFairShareHalfLifeS = 365 * 86400;
// The largest --compact-wait-share: a wait of 1,000 time limits is already past any cap.
inline constexpr double kMaxCompactWaitShare = 1000;

struct DaemonConfig {
  std::string listen = "127.0.0.1:8600";
  std::string db = "railyard.db";
  std::string cluster;                       // cluster file (JSON or topology.conf)
  std::string preset = "dgx-h100-superpod";  // used when no cluster file is given
  int sus = 1;
  bool private_reads = false;
  std::string web_root;            // "" = the default (see api::default_web_root); "none" = no static files
  std::string agent_secret_file;   // the cluster secret (opt-in); "" = none
  bool node_keys = false;          // accept agents by their per-node keys (table node_keys); see PROTOCOL.md
  int heartbeat_timeout_s = 30;
  int reconcile_grace_s = -1;      // -1 = the heartbeat timeout
  int launch_timeout_s = 120;      // a connected node that answers no launch order fails the job (1..86400)
  int compact_wait_s = 300;        // sched::PolicyConfig::compact_wait_s (0..86400; 0 = off)
  int compact_wait_max_s = 7 * 86400;  // sched::PolicyConfig::compact_wait_max_s (0..kMaxCompactWaitMaxS)
  double compact_wait_share = sched::PolicyConfig{}.compact_wait_share;  // (0..kMaxCompactWaitShare)
  std::string priority_weights;    // "qos=N,age=N,fairshare=N,size=N", any subset; "" = the defaults
  // Seconds in which past GPU use loses half its weight in the fair-share factor (JobTable::track_usage;
  // kMinFairShareHalfLifeS..kMaxFairShareHalfLifeS).
  int fairshare_half_life_s = 7 * 86400;
  int pass_budget_ms = 1000;       // PassRunner::set_pass_budget (0..60000; 0 = none)
  std::string tls_cert;            // PEM certificate chain; with tls_key: HTTPS/WSS only
  std::string tls_key;             // PEM private key
  // When a submit is acknowledged: "synced" (on disk) or "written" (in the log:
  // Service::set_submit_durability).
  std::string submit_durability = "synced";
  int max_connections = 4096;  // api::ServerLimits (1..1048576)
  // api::ServerLimits::max_connections_per_address (0..1048576; 0 = no bound).
  int max_connections_per_address = 512;
  int header_timeout_s = 10;   // api::ServerLimits (1..3600)
  // A Unix socket to accept on as well ("" = none), whose callers the kernel names (api/peer_auth.hpp), and
  // the group whose members are admins there ("" = only root and the scheduler's own user).
  std::string unix_socket;
  std::string admin_group;
  // The Unix socket's mode, octal ("0666": any local user connects and is who the kernel says; "0600": the
  // scheduler's own user only, what `railyard up` as a non-root user asks for). parse_socket_mode checks it.
  std::string unix_socket_mode = "0666";
  // Who may submit QoS high besides admins: "alice,bob", "*" = everyone, "" = admins only
  // (SubmitIntake::set_high_qos_users).
  std::string high_qos_users;
  // High availability (issue 30): etcd client URLs, comma-separated ("" = no HA: today's single
  // scheduler); this instance's name; the URL clients reach it at ("" = http(s)://<listen>); the lease TTL.
  std::string ha_etcd;
  std::string ha_name;
  std::string ha_advertise;
  int ha_ttl_s = 5;
  // Where the leader's state lives with HA (issue 46): "etcd" (each scheduler its own --db, the leader's
  // every write replicated through etcd; ha/replication.hpp) or "shared" (one --db all schedulers mount).
  std::string ha_state = "etcd";
  // Replicated entries etcd keeps behind the leader once every live scheduler has applied them (a scheduler
  // that restarts within them catches up without a snapshot); one live scheduler lagging more than 4 times
  // this loses its entries and rebuilds from a snapshot (ha/replication.hpp, TrimOptions).
  int64_t ha_log_keep = 20000;
  // A PEM CA bundle to verify https:// etcd endpoints by ("" = the system's trust store).
  std::string ha_etcd_ca;
  // The client certificate (PEM chain) and its key shown to etcd members run with --client-cert-auth.
  std::string ha_etcd_cert;
  std::string ha_etcd_key;
};

// "0600", "660", ... -> the mode: octal, at most 0777, read and write for the owner (the scheduler's user
// reaches its own socket); anything else is an error naming --unix-socket-mode.
Result<unsigned> parse_socket_mode(const std::string& text);

// "synced" -> kSynced, "written" -> kWritten; anything else is an error naming both.
Result<store::Durability> parse_submit_durability(const std::string& text);

// The scheduling policy the settings ask for: the compact wait and its cap, the priority weights (an error
// names --priority-weights); the rest stays sched::PolicyConfig's default.
Result<sched::PolicyConfig> policy_of(const DaemonConfig& config);

// Fills every key of `file_path` not in `given` (the flags set on the command line).
Status merge_config_file(const std::string& file_path, const std::set<std::string>& given,
                         DaemonConfig& config);

struct ListenAddress {
  std::string host;
  int port = 0;
};
Result<ListenAddress> parse_listen(const std::string& text);

Result<topology::Cluster> load_cluster(const DaemonConfig& config);

}  // namespace railyard::daemon
