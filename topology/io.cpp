#include "topology/io.hpp"

#include <cctype>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "topology/io_json.hpp"
#include "topology/io_slurm.hpp"

namespace railyard::topology {

std::string_view to_string(FileFormat f) { return f == FileFormat::kJson ? "json" : "slurm"; }

Result<FileFormat> parse_file_format(std::string_view s) {
  if (s == "json") return FileFormat::kJson;
  if (s == "slurm" || s == "conf") return FileFormat::kSlurm;
  return invalid("unknown format \"" + std::string(s) + "\" (expected json or slurm)");
}

FileFormat detect_format(std::string_view text) {
  for (char c : text)
    if (!std::isspace(static_cast<unsigned char>(c)))
      return c == '{' ? FileFormat::kJson : FileFormat::kSlurm;
  return FileFormat::kSlurm;
}

Result<FileFormat> format_for_path(std::string_view path) {
  std::string ext = std::filesystem::path(path).extension().string();
  if (ext == ".json") return FileFormat::kJson;
  if (ext == ".conf") return FileFormat::kSlurm;
  return invalid("cannot tell the format of \"" + std::string(path) +
                 "\" from its extension (.json or .conf)");
}

Result<Cluster> parse_cluster(std::string_view text, std::string_view source, std::string_view default_profile) {
  std::string stem = std::filesystem::path(source).stem().string();
  if (stem.empty() || stem.front() == '<' || stem == "-") stem = "cluster";
  auto cluster = detect_format(text) == FileFormat::kJson
                     ? read_cluster_json(text, {std::string(default_profile)})
                     : read_topology_conf(text, {std::string(default_profile), stem});
  if (!cluster) return Error{cluster.error().code, std::string(source) + ": " + cluster.error().message};
  return cluster;
}

Result<Cluster> load_cluster_file(const std::string& path, std::string_view default_profile) {
  std::ostringstream text;
  if (path == "-") {
    text << std::cin.rdbuf();
  } else {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) return not_found(path + ": is a directory, not a cluster file");
    std::ifstream in(path, std::ios::binary);
    if (!in) return not_found(path + ": cannot open: " + std::strerror(errno));
    text << in.rdbuf();
    if (in.bad()) return not_found(path + ": cannot read: " + std::strerror(errno));
  }
  const std::string source = path == "-" ? "<stdin>" : path;
  auto cluster = parse_cluster(text.str(), source, default_profile);
  // As slurmctld logs them: the file is accepted, the operator told (on stderr, beside the program's output).
  if (cluster && detect_format(text.str()) == FileFormat::kSlurm)
    for (const auto& w : topology_conf_warnings(*cluster)) std::cerr << source << ": warning: " << w << "\n";
  return cluster;
}

std::string format_cluster(const Cluster& cluster, FileFormat format) {
  return format == FileFormat::kJson ? write_cluster_json(cluster) : write_topology_conf(cluster);
}

Status save_cluster_file(const Cluster& cluster, const std::string& path, FileFormat format) {
  std::string text = format_cluster(cluster, format);
  if (path == "-") {
    std::cout << text << std::flush;
    return std::cout ? ok() : internal_error("cannot write to standard output");
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return internal_error(path + ": cannot write: " + std::strerror(errno));
  out << text;
  out.close();
  if (!out) return internal_error(path + ": cannot write: " + std::strerror(errno));
  return ok();
}

}  // namespace railyard::topology
