// Railyard's JSON cluster file (schema in topology/README.md, "Cluster file").
//
// Reading validates everything and never throws: a syntax error names its line and column, a schema error
// names the field's path ("switches[3].nodez: unknown field"), a structural error (duplicate node, unknown
// profile, undefined switch, loop) names the entry it was found in. Writing emits compressed host lists and
// only fields that differ from their defaults; reading what was written gives back the same model.
#pragma once

#include <string>
#include <string_view>

#include "common/result.hpp"
#include "topology/cluster.hpp"

namespace railyard::topology {

struct JsonReadOptions {
  std::string default_profile = "dgx-h100";  // for node entries without "profile"
};

Result<Cluster> read_cluster_json(std::string_view text, const JsonReadOptions& options = {});
std::string write_cluster_json(const Cluster& cluster);

// One profile as a one-line JSON object with every field, and back (the topology.conf writer keeps custom
// profiles this way in "#railyard" comments).
std::string profile_to_json(const NodeProfile& profile);
Result<NodeProfile> profile_from_json(std::string_view text);

}  // namespace railyard::topology
