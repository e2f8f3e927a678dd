// Callers named by the kernel (issue 32): a request on the Unix socket without an Authorization header is
// made by the Unix user whose uid SO_PEERCRED reports, so nobody on the scheduler's host needs a token, and
// nobody can speak as someone else. The user's name comes from the passwd database (NSS); the role is admin
// for uid 0, for the scheduler's own user, and for members of the --admin-group, else user.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "common/result.hpp"
#include "scheduler/api/http.hpp"
#include "scheduler/daemon/service.hpp"

namespace railyard::api {

struct PeerPolicy {
  uint32_t scheduler_uid = 0;         // the scheduler's effective uid
  std::optional<uint32_t> admin_gid;  // --admin-group, resolved (admin_group_id)
};

// The gid of group `name`; kInvalidArgument when the host has no such group.
Result<uint32_t> admin_group_id(const std::string& name);

// The caller `peer` is (Caller::uid set); kPermission when its uid has no passwd entry. Reads the passwd
// and group databases on every call, so a user added to the admin group counts at their next request.
Result<daemon::Caller> peer_caller(const PeerCredentials& peer, const PeerPolicy& policy);

}  // namespace railyard::api
