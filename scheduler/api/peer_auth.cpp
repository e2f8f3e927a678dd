#include "scheduler/api/peer_auth.hpp"

#include <grp.h>
#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <vector>

namespace railyard::api {
namespace {

// NSS buffers: start at the size the system suggests and grow on ERANGE.
size_t nss_buffer_size(int name) {
  const long n = ::sysconf(name);
  return n > 0 ? static_cast<size_t>(n) : 16384;
}

bool in_group(const passwd& pw, gid_t gid) {
  if (pw.pw_gid == gid) return true;
  std::vector<gid_t> groups(32);
  for (;;) {
    int n = static_cast<int>(groups.size());
    if (::getgrouplist(pw.pw_name, pw.pw_gid, groups.data(), &n) >= 0) {
      groups.resize(static_cast<size_t>(n));
      return std::find(groups.begin(), groups.end(), gid) != groups.end();
    }
    if (n <= static_cast<int>(groups.size()) || n > 65536) return false;
    groups.resize(static_cast<size_t>(n));
  }
}

}  // namespace

Result<uint32_t> admin_group_id(const std::string& name) {
  std::vector<char> buf(nss_buffer_size(_SC_GETGR_R_SIZE_MAX));
  group gr{};
  group* found = nullptr;
  int rc = 0;
  while ((rc = ::getgrnam_r(name.c_str(), &gr, buf.data(), buf.size(), &found)) == ERANGE &&
         buf.size() < (size_t{1} << 24))
    buf.resize(buf.size() * 2);
  if (rc != 0 || !found) return invalid("--admin-group " + name + ": no such group on this host");
  return static_cast<uint32_t>(gr.gr_gid);
}

Result<daemon::Caller> peer_caller(const PeerCredentials& peer, const PeerPolicy& policy) {
  std::vector<char> buf(nss_buffer_size(_SC_GETPW_R_SIZE_MAX));
  passwd pw{};
  passwd* found = nullptr;
  int rc = 0;
  while ((rc = ::getpwuid_r(static_cast<uid_t>(peer.uid), &pw, buf.data(), buf.size(), &found)) == ERANGE &&
         buf.size() < (size_t{1} << 24))
    buf.resize(buf.size() * 2);
  if (rc != 0 || !found)
    return Error{ErrorCode::kPermission, "unix uid " + std::to_string(peer.uid) +
                                             " has no user name on the scheduler's host; use a bearer token"};
  const bool admin = peer.uid == 0 || peer.uid == policy.scheduler_uid ||
                     (policy.admin_gid && in_group(pw, static_cast<gid_t>(*policy.admin_gid)));
  daemon::Caller who{pw.pw_name, admin ? store::Role::kAdmin : store::Role::kUser};
  who.uid = peer.uid;
  return who;
}

}  // namespace railyard::api
