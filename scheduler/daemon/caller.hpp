// Who asks the daemon for something: the user and role a bearer token (or the kernel) names.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "scheduler/store/state_store.hpp"

namespace railyard::daemon {

struct Caller {
  std::string user;
  store::Role role = store::Role::kUser;
  // Set when the kernel named the caller (SO_PEERCRED on the Unix socket, api/peer_auth.hpp): their jobs
  // are this user's whatever a spec says, admin or not (SubmitIntake::prepare()).
  std::optional<uint32_t> uid{};
  bool admin() const { return role == store::Role::kAdmin; }
};

// Refuses a caller without the admin role: "<what> needs the admin role (<user> is a user)".
inline Status need_admin(const Caller& who, const std::string& what) {
  if (who.admin()) return ok();
  return Error{ErrorCode::kPermission, what + " needs the admin role (" + who.user + " is a user)"};
}

}  // namespace railyard::daemon
