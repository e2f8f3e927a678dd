// Node key files (per-node credentials, scheduler/PROTOCOL.md "Node keys"). One line per node the agent
// hosts: "NAME KEY", KEY being 64 lower-case hex characters (256 random bits). Blank lines and lines that
// start with '#' are skipped. A file whose only line is a bare KEY is the key of the agent's only node.
// `railyard node add NAME --key-file F` and `railyard up` write this format; railyard-agent --key-file reads
// it (the flag may repeat) on every connection, so a rotated key is picked up at the next reconnect.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "common/result.hpp"

namespace railyard::protocol {

// The contents of a credential file (a node key file, the cluster secret), refused as ssh refuses a private
// key that others can read: the file is opened once and checked on that descriptor (fstat), so a rename
// between check and read changes nothing. Refused: not a regular file; owned by someone other than the
// running user or root; any group/other permission bit set. Errors name the file and say `chmod 600`.
Result<std::string> read_private_file(const std::string& path);

// Whether `key` has the form of a node key (what random_hex(kNodeKeyBytes) makes).
bool valid_node_key(const std::string& key);

// A new random node key.
std::string new_node_key();

// The keys of `nodes` from `text` (a key file's contents); an error names the file's problem or the first
// node without a key.
Result<std::map<std::string, std::string>> parse_key_file(const std::string& text,
                                                          const std::vector<std::string>& nodes);
// Several files read as one (an agent of several nodes may get one file per node).
Result<std::map<std::string, std::string>> read_key_files(const std::vector<std::string>& paths,
                                                          const std::vector<std::string>& nodes);

// One line of a key file, with its newline.
std::string key_file_line(const std::string& node, const std::string& key);

}  // namespace railyard::protocol
