// The container a job runs in (ContainerSpec, jobs/spec.hpp) as users write its parts: the JSON spec's
// "container" object (spec_json.cpp), `railyard submit --image/--mount` and pyxis' #SBATCH --container-*
// options (sbatch_directives.cpp) all read them here, so the three accept and refuse the same texts.
//
// An image is a registry reference ("nvcr.io/nvidia/pytorch:24.04-py3", "ubuntu", "host:5000/a/b@sha256:...")
// or an archive on the node ("docker-archive:/abs/img.tar", "oci-archive:/abs/img.tar"). Normalized on
// read: pyxis' "nvcr.io#nvidia/pytorch" (enroot's '#' between registry and path) becomes
// "nvcr.io/nvidia/pytorch", and a "docker://" prefix is dropped. A mount is "SRC:DST", "SRC:DST:ro" or
// "SRC:DST:rw": both absolute, without a ".." component, DST not "/"; repeated and trailing slashes are
// dropped. Every error is a reason without the field; callers name the field and quote the text.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.hpp"
#include "jobs/spec.hpp"

namespace railyard::jobs {

inline constexpr size_t kMaxImageLength = 512;          // characters of an image reference
inline constexpr size_t kMaxMounts = 64;                // per container
inline constexpr size_t kMaxContainerPathBytes = 4096;  // PATH_MAX: a mount's paths, the workdir
inline constexpr size_t kMaxContainerNameLength = 128;

// The image, normalized as above; an error says why it cannot be one (empty, over kMaxImageLength, a space
// or control character, a relative archive path, a squashfs file, a malformed reference).
Result<std::string> parse_image(std::string_view text);

// The file of an archive image ("docker-archive:PATH[:REF]", "oci-archive:PATH[:REF]": PATH, without the
// engine's reference after it), else "" for a registry reference.
std::string archive_path(std::string_view image);

// One mount, "SRC:DST[:ro|:rw]", normalized as above.
Result<Mount> parse_mount(std::string_view text);

// pyxis' --container-mounts: comma-separated mounts, each as parse_mount or a bare SRC, which pyxis
// mounts at the same path (SRC:SRC). Empty items are errors.
Result<std::vector<Mount>> parse_mount_list(std::string_view text);

// Why `path` cannot be an absolute path on a node or in a container (empty, relative, over
// kMaxContainerPathBytes, a control character, not UTF-8, a ".." component); "" when it can.
std::string container_path_problem(std::string_view path);

// Why `name` cannot label a container (not [A-Za-z0-9_.-], over kMaxContainerNameLength); "" when it can.
std::string container_name_problem(std::string_view name);

// Problems of the parts taken together, and of the plain fields: more than kMaxMounts mounts, two mounts
// at one target, a workdir that is not absolute (or has ".."), a name that is not [A-Za-z0-9_.-]{1,128}.
// Each names its field first ("container.workdir \"w\": ..."). The image and the mounts themselves are
// parse_image's and parse_mount's to check.
std::vector<std::string> container_layout_problems(const ContainerSpec& c);

// All of them: the image (as parse_image reads it, normalized), each mount's paths, then
// container_layout_problems. For specs built in code; readers of user text check as they read.
std::vector<std::string> container_problems(const ContainerSpec& c);

}  // namespace railyard::jobs
