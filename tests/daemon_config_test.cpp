// Unit tests of the scheduler daemon's configuration: config file keys (JSON and TOML) read, validated and
// losing to the command line's flags; --priority-weights and --submit-durability parsed and checked.
#include <gtest/gtest.h>

#include <fstream>
#include <initializer_list>
#include <set>
#include <string>

#include "scheduler/daemon/config.hpp"
#include "scheduler/queue/priority.hpp"
#include "tests/daemon_client.hpp"

namespace railyard::daemon {
namespace {

// --- Config files ---

// Writes `text` to `name` in a temporary directory and merges it into `c` (`given`: flags on the command
// line).
class ConfigFile {
 public:
  explicit ConfigFile(std::string name) : name_(std::move(name)) {}
  Status operator()(const std::string& text, const std::set<std::string>& given, DaemonConfig& c) const {
    std::ofstream(dir_.file(name_)) << text;
    return merge_config_file(dir_.file(name_), given, c);
  }

 private:
  testing::TempDir dir_;
  std::string name_;
};

// A number key: `key: file_value` in the file is read into `field`; with the flag given, the flag's value
// (`flag_value`, already in the config) stays; each of `bad` (JSON values) is refused with `message` and the
// default kept.
template <typename T>
void expect_number_key(const std::string& key, T DaemonConfig::*field, const std::string& file_value, T expected,
                       T flag_value, std::initializer_list<const char*> bad, const std::string& message) {
  const ConfigFile merge("c.json");
  const std::string good = "{\"" + key + "\": " + file_value + "}";
  DaemonConfig c;
  ASSERT_TRUE(merge(good, {}, c)) << good;
  EXPECT_EQ(c.*field, expected) << key;
  DaemonConfig flagged;
  flagged.*field = flag_value;
  ASSERT_TRUE(merge(good, {key}, flagged)) << good;
  EXPECT_EQ(flagged.*field, flag_value) << key;
  for (const char* value : bad) {
    const std::string text = "{\"" + key + "\": " + value + "}";
    DaemonConfig d;
    auto s = merge(text, {}, d);
    ASSERT_FALSE(s) << text;
    EXPECT_NE(s.error().message.find(key + ": must be " + message), std::string::npos) << s.error().message;
    EXPECT_EQ(d.*field, DaemonConfig{}.*field) << text;
  }
}

TEST(DaemonConfig, LaunchTimeoutKeyIsReadValidatedAndLosesToTheFlag) {
  const ConfigFile merge("c.json");
  DaemonConfig c;
  EXPECT_EQ(c.launch_timeout_s, 120);
  expect_number_key("launch_timeout", &DaemonConfig::launch_timeout_s, "300", 300, 45,
                    {"0", "-5", R"("60")", "1.5", "86401"}, "an integer 1..86400 (seconds)");
  auto unknown = merge(R"({"launch_timout": 60})", {}, c);
  ASSERT_FALSE(unknown);
  EXPECT_NE(unknown.error().message.find("launch_timeout"), std::string::npos)
      << "listed among the known keys";
}

// compact_wait_max: the longest compact wait, 0..30 days; compact_wait_share: how many time limits a compact
// wait that buys no speed may last, 0..1000; pass_budget_ms: how long a pass may take, 0..60000 ms (0: no
// bound). The flags win.
TEST(DaemonConfig, CompactWaitAndPassBudgetKeysAreReadValidatedAndLoseToTheFlags) {
  EXPECT_EQ(DaemonConfig{}.compact_wait_max_s, sched::PolicyConfig{}.compact_wait_max_s) << "the core's default";
  EXPECT_EQ(DaemonConfig{}.compact_wait_share, sched::PolicyConfig{}.compact_wait_share) << "the core's default";
  expect_number_key("compact_wait_max", &DaemonConfig::compact_wait_max_s, "43200", 43200, 3600,
                    {"-1", R"("12h")", "2592001"}, "an integer 0..2592000 (seconds)");
  expect_number_key("compact_wait_share", &DaemonConfig::compact_wait_share, "2.5", 2.5, 4.0,
                    {"-0.5", R"("12x")", "1000.5"}, "a number 0..1000");
  expect_number_key("pass_budget_ms", &DaemonConfig::pass_budget_ms, "0", 0, 250, {"-1", "60001", "1.5"},
                    "an integer 0..60000");
}

// High availability from the config file (deploy/examples/ha/scheduler.json): every --ha-* flag a key.
TEST(DaemonConfig, HighAvailabilityKeysAreReadValidatedAndLoseToTheFlags) {
  const ConfigFile merge("c.json");
  DaemonConfig c;
  EXPECT_EQ(c.ha_state, "etcd") << "replicated state by default";
  ASSERT_TRUE(merge(R"({"ha_etcd": "https://e1:2379,https://e2:2379", "ha_name": "ctl1", "ha_advertise":
                       "https://ctl1:8700", "ha_etcd_ca": "/etc/ca.pem", "ha_state": "shared",
                       "ha_etcd_cert": "/etc/railyard/etcd-client.pem", "ha_etcd_key": "/etc/railyard/etcd-client.key"})",
                    {}, c));
  EXPECT_EQ(c.ha_etcd, "https://e1:2379,https://e2:2379");
  EXPECT_EQ(c.ha_name, "ctl1");
  EXPECT_EQ(c.ha_advertise, "https://ctl1:8700");
  EXPECT_EQ(c.ha_etcd_ca, "/etc/ca.pem");
  EXPECT_EQ(c.ha_etcd_cert, "/etc/railyard/etcd-client.pem");
  EXPECT_EQ(c.ha_etcd_key, "/etc/railyard/etcd-client.key");
  EXPECT_EQ(c.ha_state, "shared");
  DaemonConfig flagged;
  flagged.ha_name = "from-flag";
  ASSERT_TRUE(merge(R"({"ha_name": "ctl1"})", {"ha_name"}, flagged));
  EXPECT_EQ(flagged.ha_name, "from-flag");
  DaemonConfig d;
  auto bad = merge(R"({"ha_state": "nfs"})", {}, d);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find(R"(ha_state: must be "etcd" or "shared")"), std::string::npos)
      << bad.error().message;
  EXPECT_EQ(d.ha_state, "etcd");
  expect_number_key("ha_ttl", &DaemonConfig::ha_ttl_s, "3", 3, 7, {"1", "61", R"("5")"}, "an integer 2..60 (seconds)");
  expect_number_key("ha_log_keep", &DaemonConfig::ha_log_keep, "500", int64_t{500}, int64_t{9}, {"0", "1.5"},
                    "an integer 1..100000000 (entries)");
}

TEST(DaemonConfig, HighQosUsersKeyIsReadAndLosesToTheFlag) {
  const ConfigFile merge("c.json");
  DaemonConfig c;
  ASSERT_TRUE(merge(R"({"high_qos_users": "ada,bob"})", {}, c));
  EXPECT_EQ(c.high_qos_users, "ada,bob");
  DaemonConfig flagged;
  flagged.high_qos_users = "*";
  ASSERT_TRUE(merge(R"({"high_qos_users": "ada,bob"})", {"high_qos_users"}, flagged));
  EXPECT_EQ(flagged.high_qos_users, "*");
  DaemonConfig d;
  auto bad = merge(R"({"high_qos_users": ["ada"]})", {}, d);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("high_qos_users: must be a string"), std::string::npos) << bad.error().message;
  EXPECT_EQ(DaemonConfig{}.high_qos_users, "") << "admins only by default";
}

TEST(DaemonConfig, FairShareHalfLifeKeyIsReadValidatedAndLosesToTheFlag) {
  const ConfigFile merge("c.json");
  EXPECT_EQ(DaemonConfig{}.fairshare_half_life_s, 7 * 86400);
  DaemonConfig c;
  ASSERT_TRUE(merge(R"({"fairshare_half_life": 86400})", {}, c));
  EXPECT_EQ(c.fairshare_half_life_s, 86400);
  DaemonConfig flagged;
  flagged.fairshare_half_life_s = 7200;
  ASSERT_TRUE(merge(R"({"fairshare_half_life": 86400})", {"fairshare_half_life"}, flagged));
  EXPECT_EQ(flagged.fairshare_half_life_s, 7200);
  for (const char* bad : {R"({"fairshare_half_life": 60})", R"({"fairshare_half_life": 31536001})",
                          R"({"fairshare_half_life": "7d"})"}) {
    DaemonConfig d;
    auto s = merge(bad, {}, d);
    ASSERT_FALSE(s) << bad;
    EXPECT_NE(s.error().message.find("fairshare_half_life: must be an integer 3600..31536000"), std::string::npos)
        << s.error().message;
    EXPECT_EQ(d.fairshare_half_life_s, 7 * 86400);
  }
}

// What the daemon schedules with: the settings' compact wait, its cap and priority weights, in the policy.
TEST(DaemonConfig, PolicyCarriesTheCompactWaitsAndTheWeights) {
  DaemonConfig c;
  c.compact_wait_s = 120;
  c.compact_wait_max_s = 43200;
  c.compact_wait_share = 3;
  c.priority_weights = "size=7";
  auto p = policy_of(c);
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->compact_wait_s, 120);
  EXPECT_EQ(p->compact_wait_max_s, 43200);
  EXPECT_EQ(p->compact_wait_share, 3);
  EXPECT_EQ(p->weight_size, 7);
  EXPECT_EQ(p->weight_qos, sched::PolicyConfig{}.weight_qos) << "weights not named keep their default";
  c.priority_weights = "speed=2";
  auto bad = policy_of(c);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().message.rfind("--priority-weights ", 0), 0u) << bad.error().message;
}

TEST(DaemonConfig, ConnectionLimitKeysAreReadValidatedAndLoseToTheFlags) {
  const ConfigFile merge("c.json");
  DaemonConfig c;
  EXPECT_EQ(c.max_connections, 4096);
  EXPECT_EQ(c.header_timeout_s, 10);
  ASSERT_TRUE(merge(R"({"max_connections": 20000, "header_timeout": 30})", {"header_timeout"}, c));
  EXPECT_EQ(c.max_connections, 20000);
  EXPECT_EQ(c.header_timeout_s, 10) << "given as a flag: the flag wins";
  for (const auto& [bad, says] :
       {std::pair{R"({"max_connections": 0})", "max_connections: must be an integer 1..1048576"},
        {R"({"max_connections": "4096"})", "max_connections: must be an integer"},
        {R"({"header_timeout": 3601})", "header_timeout: must be an integer 1..3600"}}) {
    DaemonConfig d;
    auto s = merge(bad, {}, d);
    ASSERT_FALSE(s) << bad;
    EXPECT_NE(s.error().message.find(says), std::string::npos) << s.error().message;
  }
}

// --priority-weights / "priority_weights": the core's multifactor weights, any subset, checked before use.
TEST(DaemonConfig, PriorityWeightsAreParsedCheckedAndApplied) {
  using sched::apply_priority_weights;
  sched::PolicyConfig p;
  const sched::PolicyConfig defaults;
  ASSERT_TRUE(apply_priority_weights("size=500,age=2000.5", p));
  EXPECT_EQ(p.weight_size, 500);
  EXPECT_EQ(p.weight_age, 2000.5);
  EXPECT_EQ(p.weight_qos, defaults.weight_qos) << "not named: unchanged";
  EXPECT_EQ(p.weight_fairshare, defaults.weight_fairshare);
  ASSERT_TRUE(apply_priority_weights("", p)) << "nothing to change";
  for (const char* bad : {"size", "speed=1", "size=-1", "size=abc", "size=2e9", "size=", "size=1,", "=5"}) {
    sched::PolicyConfig q;
    auto s = apply_priority_weights(bad, q);
    ASSERT_FALSE(s) << bad;
    EXPECT_EQ(q.weight_qos, defaults.weight_qos);
  }
  EXPECT_EQ(apply_priority_weights("qos=1,speed=2", p).error().message,
            "'speed=2': expected qos=N, age=N, fairshare=N or size=N");
  EXPECT_EQ(p.weight_qos, defaults.weight_qos) << "nothing applied from a text with an error";
  EXPECT_EQ(sched::priority_weights_text(p), "qos=10000,age=2000.5,fairshare=5000,size=500");
  sched::PolicyConfig back;
  ASSERT_TRUE(apply_priority_weights(sched::priority_weights_text(p), back));
  EXPECT_EQ(back.weight_age, 2000.5);
  EXPECT_EQ(back.weight_size, 500);
  EXPECT_EQ(apply_priority_weights("size=-1", p).error().message, "'size=-1': the weight must be a number 0..1e9");

  const ConfigFile merge("c.json");
  DaemonConfig c;
  ASSERT_TRUE(merge(R"({"priority_weights": "size=0"})", {}, c));
  EXPECT_EQ(c.priority_weights, "size=0");
  DaemonConfig flagged;
  flagged.priority_weights = "age=5";  // --priority-weights age=5 on the command line
  ASSERT_TRUE(merge(R"({"priority_weights": "size=0"})", {"priority_weights"}, flagged));
  EXPECT_EQ(flagged.priority_weights, "age=5");
  DaemonConfig d;
  auto bad = merge(R"({"priority_weights": "size=big"})", {}, d);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("priority_weights: 'size=big': the weight must be a number"), std::string::npos)
      << bad.error().message;
  EXPECT_FALSE(merge(R"({"priority_weights": 3})", {}, d));
  EXPECT_TRUE(d.priority_weights.empty());
}

// "submit_durability" / --submit-durability: synced (the default) or written, nothing else.
TEST(DaemonConfig, SubmitDurabilityIsSyncedOrWritten) {
  const ConfigFile merge("c.json");
  DaemonConfig c;
  EXPECT_EQ(c.submit_durability, "synced");
  ASSERT_EQ(parse_submit_durability(c.submit_durability).value(), store::Durability::kSynced);
  ASSERT_TRUE(merge(R"({"submit_durability": "written"})", {}, c));
  EXPECT_EQ(c.submit_durability, "written");
  EXPECT_EQ(parse_submit_durability(c.submit_durability).value(), store::Durability::kWritten);
  DaemonConfig flagged;  // --submit-durability synced on the command line
  ASSERT_TRUE(merge(R"({"submit_durability": "written"})", {"submit_durability"}, flagged));
  EXPECT_EQ(flagged.submit_durability, "synced");
  for (const char* bad : {R"({"submit_durability": "deferred"})", R"({"submit_durability": "async"})",
                          R"({"submit_durability": true})", R"({"submit_durability": ""})"}) {
    DaemonConfig d;
    auto s = merge(bad, {}, d);
    ASSERT_FALSE(s) << bad;
    EXPECT_NE(s.error().message.find("submit_durability: must be \"synced\" or \"written\""),
              std::string::npos)
        << s.error().message;
    EXPECT_EQ(d.submit_durability, "synced");
  }
  auto text = parse_submit_durability("fsync");
  ASSERT_FALSE(text);
  EXPECT_NE(text.error().message.find("expected synced"), std::string::npos) << text.error().message;
}

// The same keys from a TOML file (named *.toml), with the same checks and flags still winning.
TEST(DaemonConfig, TomlFileGivesTheSameKeys) {
  const ConfigFile merge("c.toml");
  DaemonConfig c;
  ASSERT_TRUE(merge("# comment\nlisten = \"127.0.0.1:9000\"\nsus = 3\nprivate = true\nlaunch_timeout = 90\n"
                    "db = '/var/lib/railyard/state.db'\n",
                    {"sus"}, c));
  EXPECT_EQ(c.listen, "127.0.0.1:9000");
  EXPECT_EQ(c.db, "/var/lib/railyard/state.db");
  EXPECT_TRUE(c.private_reads);
  EXPECT_EQ(c.launch_timeout_s, 90);
  EXPECT_EQ(c.sus, DaemonConfig{}.sus) << "--sus given on the command line wins";
  DaemonConfig d;
  auto syntax = merge("listen = \"127.0.0.1:9000\"\nsus = = 3\n", {}, d);
  ASSERT_FALSE(syntax);
  EXPECT_NE(syntax.error().message.find("c.toml:2: not valid TOML"), std::string::npos) << syntax.error().message;
  auto table = merge("[listen]\nhost = \"x\"\n", {}, d);
  ASSERT_FALSE(table);
  EXPECT_NE(table.error().message.find("listen: must be a string"), std::string::npos) << table.error().message;
  auto typed = merge("launch_timeout = \"60\"\n", {}, d);
  ASSERT_FALSE(typed);
  EXPECT_NE(typed.error().message.find("launch_timeout: must be an integer"), std::string::npos);
  auto unknown = merge("lisen = \"x\"\n", {}, d);
  ASSERT_FALSE(unknown);
  EXPECT_NE(unknown.error().message.find("lisen: unknown key"), std::string::npos);
}

}  // namespace
}  // namespace railyard::daemon
