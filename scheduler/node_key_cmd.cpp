#include "scheduler/node_key_cmd.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iostream>

#include "common/hostlist.hpp"
#include "common/protocol/key_file.hpp"
#include "scheduler/store/sqlite_store.hpp"

namespace railyard {
namespace {

int fail(const std::string& message, int code) {
  std::cerr << "railyard-scheduler node-key: " << message << "\n";
  return code;
}

int64_t now_s() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Written to a temporary file of mode 0600 and renamed over `path`, so an agent that reads the file at a
// reconnect sees the old keys or the new ones, never half a file.
Status write_private_atomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return internal_error("cannot write " + tmp);
  const bool written = ::fchmod(fd, 0600) == 0 && ::write(fd, text.data(), text.size()) == ssize_t(text.size()) &&
                       ::fsync(fd) == 0;
  ::close(fd);
  if (!written || std::rename(tmp.c_str(), path.c_str()) != 0) return internal_error("cannot write " + path);
  return ok();
}

}  // namespace

int NodeKeyCommand::run() const {
  const bool rotate = rotate_->parsed();
  auto st = store::SqliteStateStore::open(o_->db);
  if (!st) return fail(st.error().message, 1);
  const int64_t now = now_s();
  std::string lines;
  std::vector<std::pair<std::string, std::string>> keys;
  std::vector<std::string> nodes;
  for (const auto& list : o_->nodes) {
    auto names = expand_hostlist(list, 1'000'000);
    if (!names) return fail("--node " + list + ": " + names.error().message, 2);
    nodes.insert(nodes.end(), names->begin(), names->end());
  }
  for (const auto& node : nodes) {
    auto found = (*st)->find_node_key(node);
    if (!found) return fail(found.error().message, 1);
    store::NodeKeyRecord k{node, protocol::new_node_key(), now, std::nullopt, "", std::nullopt};
    if (rotate) {
      if (!*found) return fail("node " + node + " has no key: issue one with `railyard node add " + node + "`", 2);
      k.created = (*found)->created;
      k.rotated_at = now;
      if (o_->grace_s > 0) {  // the old key keeps working until then, or until the agent uses the new one
        k.previous_key = (*found)->key;
        k.previous_until = now + o_->grace_s;
      }
    } else if (*found && !o_->force) {
      return fail("node " + node + " already has a key: `railyard node rotate-key " + node + "` (or --force)", 2);
    }
    if (auto s = (*st)->put_node_key(k); !s) return fail(s.error().message, 1);
    lines += protocol::key_file_line(node, k.key);
    keys.emplace_back(node, k.key);
  }
  const char* verb = rotate ? "rotated" : "issued";
  if (!o_->key_dir.empty()) {
    for (const auto& [node, key] : keys)
      if (auto s = write_private_atomically(o_->key_dir + "/" + node + ".key", protocol::key_file_line(node, key)); !s)
        return fail(s.error().message, 1);
    std::cerr << verb << " the key of " << keys.size() << " node(s) into " << o_->key_dir << "/NAME.key (mode 0600)\n";
  } else if (!o_->key_file.empty()) {
    if (auto s = write_private_atomically(o_->key_file, lines); !s) return fail(s.error().message, 1);
    std::cerr << verb << " the key of " << keys.size() << " node(s) into " << o_->key_file << " (mode 0600)\n";
  } else {
    std::cerr << verb << " the key of " << keys.size()
              << " node(s) (shown once; give each agent its line with --key-file)\n";
    std::cout << lines << std::flush;
  }
  return 0;
}

NodeKeyCommand add_node_key_command(CLI::App& app) {
  auto o = std::make_shared<NodeKeyOptions>();
  auto* cmd = app.add_subcommand("node-key", "per-node agent keys (scheduler/PROTOCOL.md, \"Node keys\")");
  cmd->require_subcommand(1);
  auto common = [&](CLI::App* sub) {
    sub->add_option("--db", o->db, "SQLite database file")->required();
    sub->add_option("--node", o->nodes, "node name or host list, dgx[001-032] (repeatable)")->required();
    sub->add_option("--key-file", o->key_file, "write the \"NAME KEY\" lines to this file (mode 0600), not stdout");
    sub->add_option("--key-dir", o->key_dir, "write one file per node, DIR/NAME.key (mode 0600)")
        ->excludes("--key-file");
  };
  auto* issue = cmd->add_subcommand("issue", "issue a node's first key");
  common(issue);
  issue->add_flag("--force", o->force, "replace an existing key at once (no grace)");
  auto* rotate = cmd->add_subcommand("rotate", "issue a new key; the old one works until --grace ends");
  common(rotate);
  rotate->add_option("--grace", o->grace_s, "seconds the old key keeps working (0: none)")
      ->check(CLI::Range(0LL, 30LL * 86400))
      ->capture_default_str();
  return NodeKeyCommand(issue, rotate, o);
}

}  // namespace railyard
