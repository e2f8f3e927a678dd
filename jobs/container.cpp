#include "jobs/container.hpp"

#include <algorithm>
#include <map>

#include "jobs/parse_util.hpp"

namespace railyard::jobs {
namespace {

constexpr std::string_view kArchivePrefixes[] = {"docker-archive:", "oci-archive:"};
constexpr std::string_view kExampleImage = "nvcr.io/nvidia/pytorch:24.04-py3";

bool is_control(unsigned char c) { return c < 0x20 || c == 0x7f; }
bool is_space_or_control(unsigned char c) { return c == ' ' || is_control(c); }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_lower_alnum(char c) { return (c >= 'a' && c <= 'z') || is_digit(c); }
bool is_alnum(char c) { return is_lower_alnum(c) || (c >= 'A' && c <= 'Z'); }
bool is_hex(char c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

template <typename Pred>
bool all_of(std::string_view s, Pred p) {
  return std::all_of(s.begin(), s.end(), p);
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  for (;;) {
    const size_t end = s.find(sep, start);
    parts.push_back(s.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
    if (end == std::string_view::npos) return parts;
    start = end + 1;
  }
}

std::string path_problem(std::string_view p) {
  if (p.empty()) return "empty";
  if (p.front() != '/') return "not an absolute path";
  if (p.size() > kMaxContainerPathBytes)
    return std::to_string(p.size()) + " bytes; at most " + std::to_string(kMaxContainerPathBytes);
  if (std::any_of(p.begin(), p.end(), [](char c) { return is_control(static_cast<unsigned char>(c)); }))
    return "contains a control character";
  if (!is_valid_utf8(p)) return "not valid UTF-8";
  for (std::string_view part : split(p, '/'))
    if (part == "..") return "has a \"..\" component";
  return "";
}

// Repeated slashes collapsed, a trailing one dropped ("/" stays "/"); `p` is absolute.
std::string normalize_path(std::string_view p) {
  std::string out;
  for (char c : p)
    if (c != '/' || out.empty() || out.back() != '/') out += c;
  if (out.size() > 1 && out.back() == '/') out.pop_back();
  return out;
}

// A registry host: letters, digits, '.', '-', with an optional ":PORT".
bool is_host(std::string_view s) {
  const size_t colon = s.find(':');
  const std::string_view host = s.substr(0, colon);
  if (host.empty() || !all_of(host, [](char c) { return is_alnum(c) || c == '.' || c == '-'; })) return false;
  if (colon == std::string_view::npos) return true;
  const std::string_view port = s.substr(colon + 1);
  return !port.empty() && port.size() <= 5 && all_of(port, is_digit);
}

// A repository path component: lower-case letters and digits, '.', '_' or '-' inside.
bool is_path_component(std::string_view s) {
  return !s.empty() && is_lower_alnum(s.front()) && is_lower_alnum(s.back()) &&
         all_of(s, [](char c) { return is_lower_alnum(c) || c == '.' || c == '_' || c == '-'; });
}

// A registry reference as Docker's reference grammar has it: [HOST[:PORT]/]PATH[:TAG][@ALGORITHM:HEX].
std::string reference_problem(std::string_view ref) {
  std::string_view rest = ref;
  if (const size_t at = rest.find('@'); at != std::string_view::npos) {
    const std::string_view digest = rest.substr(at + 1);
    const size_t colon = digest.find(':');
    const bool ok = colon != std::string_view::npos && colon > 0 &&
                    all_of(digest.substr(0, colon), is_lower_alnum) && digest.size() - colon - 1 >= 32 &&
                    all_of(digest.substr(colon + 1), is_hex);
    if (!ok)
      return "digest " + in_quotes(digest) + ": expected ALGORITHM:HEX, e.g. sha256: and 64 hex digits";
    rest = rest.substr(0, at);
  }
  const size_t colon = rest.rfind(':'), slash = rest.rfind('/');
  if (colon != std::string_view::npos && (slash == std::string_view::npos || colon > slash)) {
    const std::string_view tag = rest.substr(colon + 1);
    const bool ok = !tag.empty() && tag.size() <= 128 && (is_alnum(tag.front()) || tag.front() == '_') &&
                    all_of(tag, [](char c) { return is_alnum(c) || c == '_' || c == '.' || c == '-'; });
    if (!ok) return "tag " + in_quotes(tag) + ": expected letters, digits, '_', '.' and '-' (at most 128)";
    rest = rest.substr(0, colon);
  }
  std::vector<std::string_view> parts = split(rest, '/');
  if (std::any_of(parts.begin(), parts.end(), [](std::string_view p) { return p.empty(); }))
    return "an empty part between slashes in " + in_quotes(rest);
  const std::string_view first = parts.front();
  const bool has_host =
      parts.size() > 1 && (first.find_first_of(".:") != std::string_view::npos || first == "localhost");
  if (has_host && !is_host(first)) return "registry " + in_quotes(first) + ": expected HOST or HOST:PORT";
  for (size_t i = has_host ? 1 : 0; i < parts.size(); ++i)
    if (!is_path_component(parts[i]))
      return "repository " + in_quotes(parts[i]) +
             ": expected lower-case letters and digits, with '.', '_' or '-' between them";
  return "";
}

// Enroot's "REGISTRY#PATH" read as "REGISTRY/PATH"; a "docker://" prefix dropped.
Result<std::string> normalize_reference(std::string_view text) {
  if (text.starts_with("docker://")) text.remove_prefix(9);
  std::string ref(text);
  const size_t hash = ref.find('#');
  if (hash == std::string::npos) return ref;
  if (ref.find('#', hash + 1) != std::string::npos) return invalid("more than one '#'");
  if (hash == 0 || hash + 1 == ref.size())
    return invalid("'#' separates a registry from the image's path (nvcr.io#nvidia/pytorch): one is missing");
  if (ref.find('@') < hash)
    return invalid("a user name before the registry (USER@REGISTRY#...) is not supported");
  ref[hash] = '/';
  return ref;
}

// Why a parsed mount's paths cannot be mounted; "" when they can.
std::string mount_problem(const Mount& m) {
  if (std::string why = path_problem(m.source); !why.empty())
    return "source " + in_quotes(m.source) + ": " + why;
  if (std::string why = path_problem(m.target); !why.empty())
    return "target " + in_quotes(m.target) + ": " + why;
  if (normalize_path(m.target) == "/") return "target \"/\": cannot mount over the container's root";
  return "";
}

}  // namespace

std::string container_path_problem(std::string_view path) { return path_problem(path); }

std::string container_name_problem(std::string_view name) {
  if (name.size() > kMaxContainerNameLength)
    return std::to_string(name.size()) + " characters; at most " + std::to_string(kMaxContainerNameLength);
  if (!all_of(name, [](char ch) { return is_alnum(ch) || ch == '_' || ch == '.' || ch == '-'; }))
    return "only letters, digits, '_', '.' and '-'";
  return "";
}

Result<std::string> parse_image(std::string_view text) {
  if (text.empty()) return invalid(std::string("empty: name an image, e.g. ") + std::string(kExampleImage));
  if (text.size() > kMaxImageLength)
    return invalid(std::to_string(text.size()) + " characters; at most " + std::to_string(kMaxImageLength));
  if (std::any_of(text.begin(), text.end(),
                  [](char c) { return is_space_or_control(static_cast<unsigned char>(c)); }))
    return invalid("contains a space or a control character");
  if (!is_valid_utf8(text)) return invalid("not valid UTF-8");
  for (std::string_view prefix : kArchivePrefixes) {
    if (!text.starts_with(prefix)) continue;
    const std::string_view path = text.substr(prefix.size());
    if (std::string why = path_problem(path); !why.empty())
      return invalid(std::string(prefix) + " needs the archive's absolute path on the node; " +
                     in_quotes(path) + ": " + why);
    return std::string(text);
  }
  if (text.front() == '/' || text.front() == '.')
    return invalid("a file, not an image: give a registry reference (" + std::string(kExampleImage) +
                   ") or an archive (docker-archive:/path/img.tar, oci-archive:/path/img.tar); enroot's "
                   "squashfs files are not supported");
  auto ref = normalize_reference(text);
  if (!ref) return ref.error();
  if (std::string why = reference_problem(*ref); !why.empty()) return invalid(why);
  return ref;
}

std::string archive_path(std::string_view image) {
  for (std::string_view prefix : kArchivePrefixes)
    if (image.starts_with(prefix)) {
      const std::string_view path = image.substr(prefix.size());
      return std::string(path.substr(0, path.find(':')));
    }
  return {};
}

Result<Mount> parse_mount(std::string_view text) {
  const std::vector<std::string_view> parts = split(text, ':');
  if (parts.size() < 2 || parts.size() > 3)
    return invalid("expected SRC:DST, SRC:DST:ro or SRC:DST:rw (a path cannot hold ':')");
  if (parts.size() == 3 && parts[2] != "ro" && parts[2] != "rw")
    return invalid("option " + in_quotes(parts[2]) + ": expected ro or rw");
  Mount m{std::string(parts[0]), std::string(parts[1]), parts.size() == 3 && parts[2] == "ro"};
  if (std::string why = mount_problem(m); !why.empty()) return invalid(why);
  m.source = normalize_path(m.source);
  m.target = normalize_path(m.target);
  return m;
}

Result<std::vector<Mount>> parse_mount_list(std::string_view text) {
  std::vector<Mount> out;
  for (std::string_view item : split(text, ',')) {
    if (item.empty()) return invalid("an empty mount between commas");
    const std::string one = item.find(':') == std::string_view::npos
                                ? std::string(item) + ":" + std::string(item)
                                : std::string(item);
    auto m = parse_mount(one);
    if (!m) return invalid("mount " + in_quotes(item) + ": " + m.error().message);
    out.push_back(std::move(*m));
  }
  return out;
}

std::vector<std::string> container_layout_problems(const ContainerSpec& c) {
  std::vector<std::string> p;
  if (c.mounts.size() > kMaxMounts)
    p.push_back("container.mounts: " + std::to_string(c.mounts.size()) + " mounts; at most " +
                std::to_string(kMaxMounts));
  std::map<std::string, const Mount*> by_target;
  for (const Mount& m : c.mounts) {
    auto [it, fresh] = by_target.emplace(normalize_path(m.target), &m);
    if (!fresh)
      p.push_back("container.mounts: two mounts at " + in_quotes(it->first) + " (" +
                  in_quotes(it->second->text()) + " and " + in_quotes(m.text()) + ")");
  }
  if (!c.workdir.empty())
    if (std::string why = path_problem(c.workdir); !why.empty())
      p.push_back("container.workdir " + in_quotes(c.workdir) + ": " + why);
  if (std::string why = container_name_problem(c.name); !why.empty())
    p.push_back(c.name.size() > kMaxContainerNameLength ? "container.name: " + why
                                                        : "container.name " + in_quotes(c.name) + ": " + why);
  return p;
}

std::vector<std::string> container_problems(const ContainerSpec& c) {
  std::vector<std::string> p;
  if (c.image.empty())
    p.push_back("container.image: missing (the image to run in, e.g. " + std::string(kExampleImage) + ")");
  else if (auto image = parse_image(c.image); !image)
    p.push_back("container.image " + in_quotes(c.image) + ": " + image.error().message);
  for (size_t i = 0; i < c.mounts.size() && i < kMaxMounts; ++i)
    if (std::string why = mount_problem(c.mounts[i]); !why.empty())
      p.push_back("container.mounts[" + std::to_string(i) + "] " + in_quotes(c.mounts[i].text()) + ": " +
                  why);
  std::vector<std::string> layout = container_layout_problems(c);
  p.insert(p.end(), layout.begin(), layout.end());
  return p;
}

}  // namespace railyard::jobs
