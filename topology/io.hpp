// Cluster files in either format, chosen by content when reading and by the caller when writing.
//
//   JSON         Railyard's own cluster file (io_json.hpp); detected when the first non-space byte is '{'
//   topology.conf Slurm's tree topology (io_slurm.hpp); everything else
//
// Errors carry the file name in front of the parser's message ("pod.json: line 3, column 7: ...").
#pragma once

#include <string>
#include <string_view>

#include "common/result.hpp"
#include "topology/cluster.hpp"

namespace railyard::topology {

enum class FileFormat { kJson, kSlurm };
std::string_view to_string(FileFormat f);                  // "json", "slurm"
Result<FileFormat> parse_file_format(std::string_view s);  // "json"; "slurm" or "conf"
FileFormat detect_format(std::string_view text);
// From the extension: ".json" -> JSON, ".conf" -> topology.conf; anything else is an error.
Result<FileFormat> format_for_path(std::string_view path);

// Text in either format. `source` names it in errors; topology.conf nodes get `default_profile`, and the
// cluster is named after the source's file stem unless the file says otherwise.
Result<Cluster> parse_cluster(std::string_view text, std::string_view source,
                              std::string_view default_profile);
// Reads a file ("-" reads standard input). A missing or unreadable file is kNotFound.
Result<Cluster> load_cluster_file(const std::string& path, std::string_view default_profile = "dgx-h100");

std::string format_cluster(const Cluster& cluster, FileFormat format);
// Writes the cluster ("-" writes standard output); kInternal when the file cannot be written.
Status save_cluster_file(const Cluster& cluster, const std::string& path, FileFormat format);

}  // namespace railyard::topology
