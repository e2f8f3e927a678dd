// `railyard-scheduler node-key issue|rotate`: per-node agent keys in the scheduler's database (table
// node_keys), run on the scheduler's host like `token create`. The running daemon reads the table at each
// registration, so a key works as soon as this command returns. `railyard node add` and
// `railyard node rotate-key` run it.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <vector>

namespace railyard {

struct NodeKeyOptions {
  std::string db;
  std::vector<std::string> nodes;
  std::string key_file;  // every node's line in this file
  std::string key_dir;   // or one file per node, DIR/NAME.key; neither: "NAME KEY" lines on stdout
  long long grace_s = 600;
  bool force = false;
};

class NodeKeyCommand {
 public:
  NodeKeyCommand(CLI::App* issue, CLI::App* rotate, std::shared_ptr<NodeKeyOptions> o)
      : issue_(issue), rotate_(rotate), o_(std::move(o)) {}
  bool selected() const { return issue_->parsed() || rotate_->parsed(); }
  // Exit status: 0 done, 1 store failure, 2 bad arguments (a node with or without a key as the verb needs).
  int run() const;

 private:
  CLI::App* issue_;
  CLI::App* rotate_;
  std::shared_ptr<NodeKeyOptions> o_;
};

NodeKeyCommand add_node_key_command(CLI::App& app);

}  // namespace railyard
