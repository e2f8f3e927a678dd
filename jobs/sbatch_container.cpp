// pyxis' #SBATCH options for the container a job runs in (--container-image, --container-mounts, ...), read
// as pyxis reads them and checked as the JSON spec's "container" is (jobs/container.hpp). Table of the
// mapping: jobs/README.md ("#SBATCH import").
#include <algorithm>

#include "jobs/container.hpp"
#include "jobs/parse_util.hpp"
#include "jobs/sbatch_internal.hpp"

namespace railyard::jobs::sbatch_detail {
namespace {

ContainerSpec& container_of(ImportState& st) {
  std::optional<ContainerSpec>& c = st.out.spec.container;
  if (!c) c.emplace();
  return *c;
}

}  // namespace

void on_container_image(const Option& o, ImportState& st) {
  auto image = parse_image(*o.value);
  if (!image) return st.error(o, image.error().message);
  container_of(st).image = std::move(*image);
}

// Each --container-mounts adds its mounts, as pyxis does; one given again is kept once.
void on_container_mounts(const Option& o, ImportState& st) {
  auto mounts = parse_mount_list(*o.value);
  if (!mounts) return st.error(o, mounts.error().message);
  std::vector<Mount>& have = container_of(st).mounts;
  for (Mount& m : *mounts)
    if (std::find(have.begin(), have.end(), m) == have.end()) have.push_back(std::move(m));
}

void on_container_workdir(const Option& o, ImportState& st) {
  if (std::string why = container_path_problem(*o.value); !why.empty())
    return st.error(o, "a folder inside the container: " + why);
  container_of(st).workdir = *o.value;
}

// pyxis' NAME[:FLAG]: the flag says whether to reuse a container the job's earlier steps left, which has no
// meaning here (each job starts from its image).
void on_container_name(const Option& o, ImportState& st) {
  std::string_view name = *o.value;
  if (const size_t colon = name.find(':'); colon != std::string_view::npos) {
    st.warn(o, "flag " + in_quotes(name.substr(colon + 1)) +
                   " ignored: every job starts a container of its own from the image");
    name = name.substr(0, colon);
  }
  if (std::string why = container_name_problem(name); !why.empty()) return st.error(o, why);
  container_of(st).name = std::string(name);
}

void on_container_writable(const Option&, ImportState& st) { container_of(st).writable = true; }

// Read-only is the default: without a container this creates none.
void on_container_readonly(const Option&, ImportState& st) {
  if (st.out.spec.container) st.out.spec.container->writable = false;
}

void finish_container(ImportState& st) {
  if (!st.out.spec.container) return;
  const ContainerSpec& c = *st.out.spec.container;
  if (c.image.empty()) {
    st.errors.push_back(
        "--container-mounts, --container-workdir, --container-name or --container-writable without "
        "--container-image: name the image to run in (a named container is not kept from one job to the "
        "next)");
    return;
  }
  for (std::string& p : container_layout_problems(c)) st.errors.push_back(std::move(p));
}

}  // namespace railyard::jobs::sbatch_detail
