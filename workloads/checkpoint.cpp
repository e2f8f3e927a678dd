#include "workloads/checkpoint.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "workloads/mlp.hpp"

namespace railyard::workloads {
namespace {

namespace fs = std::filesystem;

nlohmann::json to_json(const Checkpoint& c) {
  return {{"format", "railyard-train-checkpoint"},
          {"version", kCheckpointVersion},
          {"epoch", c.epoch},
          {"run_start_ms", c.run_start_ms},
          {"elapsed_s", c.elapsed_s},
          {"seed", c.seed},
          {"dataset", c.dataset},
          {"shape", {{"inputs", c.shape.inputs}, {"hidden", c.shape.hidden}, {"classes", c.shape.classes}}},
          {"params_checksum", checksum_hex(model_checksum(c.params))},
          {"params", c.params}};
}

// Called on start-up data only; nlohmann's type errors are turned into a Result here and go no further.
Result<Checkpoint> from_json(const nlohmann::json& doc) {
  try {
    if (doc.at("format") != "railyard-train-checkpoint") return invalid("not a railyard-train checkpoint");
    if (doc.at("version") != kCheckpointVersion) return invalid("unsupported checkpoint version");
    Checkpoint c;
    c.epoch = doc.at("epoch").get<int>();
    c.run_start_ms = doc.at("run_start_ms").get<std::int64_t>();
    c.elapsed_s = doc.at("elapsed_s").get<double>();
    c.seed = doc.at("seed").get<std::uint64_t>();
    c.dataset = doc.at("dataset").get<std::string>();
    const auto& shape = doc.at("shape");
    c.shape = MlpShape{shape.at("inputs").get<int>(), shape.at("hidden").get<int>(),
                       shape.at("classes").get<int>()};
    c.params = doc.at("params").get<std::vector<float>>();
    if (static_cast<int>(c.params.size()) != c.shape.parameter_count())
      return invalid("parameter count does not match shape");
    if (doc.at("params_checksum") != checksum_hex(model_checksum(c.params)))
      return invalid("parameter checksum mismatch");
    return c;
  } catch (const nlohmann::json::exception& e) {
    return invalid(std::string("malformed checkpoint: ") + e.what());
  }
}

Status write_all(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return internal_error(std::strerror(errno));
    done += static_cast<size_t>(n);
  }
  return ok();
}

}  // namespace

fs::path checkpoint_file(const fs::path& dir) { return dir / "checkpoint.json"; }

Status save_checkpoint(const fs::path& dir, const Checkpoint& checkpoint) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return internal_error("cannot create " + dir.string() + ": " + ec.message());
  const fs::path final_path = checkpoint_file(dir);
  const fs::path temp_path = dir / ("checkpoint.json.tmp." + std::to_string(::getpid()));
  const int fd = ::open(temp_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return internal_error("cannot write " + temp_path.string() + ": " + std::strerror(errno));
  auto written = write_all(fd, to_json(checkpoint).dump() + "\n");
  if (written && ::fsync(fd) != 0) written = internal_error(std::strerror(errno));
  ::close(fd);
  if (written) {
    fs::rename(temp_path, final_path, ec);
    if (!ec) return ok();
    written = internal_error(ec.message());
  }
  fs::remove(temp_path, ec);
  return internal_error("cannot save checkpoint " + final_path.string() + ": " + written.error().message);
}

Result<std::optional<Checkpoint>> load_checkpoint(const fs::path& dir) {
  const fs::path path = checkpoint_file(dir);
  std::error_code ec;
  if (!fs::exists(path, ec)) return std::optional<Checkpoint>{};
  std::ifstream in(path);
  if (!in) return internal_error("cannot read " + path.string());
  std::stringstream text;
  text << in.rdbuf();
  const auto doc = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return invalid(path.string() + ": not JSON (truncated?)");
  auto checkpoint = from_json(doc);
  if (!checkpoint) return invalid(path.string() + ": " + checkpoint.error().message);
  return std::optional<Checkpoint>(std::move(checkpoint).value());
}

// Wire layout: [state, epoch, run_start_ms, elapsed_s, params...]; state 0 none, 1 found, -1 error.
Result<std::optional<Checkpoint>> load_and_share_checkpoint(Collective& collective, const fs::path& dir,
                                                            const Checkpoint& expected) {
  const auto count = static_cast<size_t>(expected.shape.parameter_count());
  std::vector<double> wire(4 + count, 0.0);
  std::string problem;
  if (collective.rank() == 0) {
    auto loaded = load_checkpoint(dir);
    if (!loaded) {
      problem = loaded.error().message;
    } else if (loaded->has_value()) {
      const Checkpoint& c = **loaded;
      if (c.seed != expected.seed || c.dataset != expected.dataset ||
          c.shape.inputs != expected.shape.inputs || c.shape.hidden != expected.shape.hidden ||
          c.shape.classes != expected.shape.classes) {
        problem = checkpoint_file(dir).string() +
                  " was written by a run with another seed, data set or model shape";
      } else {
        wire[0] = 1;
        wire[1] = c.epoch;
        wire[2] = static_cast<double>(c.run_start_ms);  // exact: ms since 1970 < 2^53
        wire[3] = c.elapsed_s;
        std::copy(c.params.begin(), c.params.end(), wire.begin() + 4);
      }
    }
    if (!problem.empty()) wire[0] = -1;
  }
  if (auto shared = broadcast_from(collective, 0, wire); !shared) return shared.error();
  if (wire[0] < 0) return invalid(problem.empty() ? "rank 0 could not load the checkpoint" : problem);
  if (wire[0] == 0) return std::optional<Checkpoint>{};
  Checkpoint c = expected;
  c.epoch = static_cast<int>(wire[1]);
  c.run_start_ms = static_cast<std::int64_t>(wire[2]);
  c.elapsed_s = wire[3];
  c.params.assign(count, 0.0f);
  for (size_t i = 0; i < count; ++i) c.params[i] = static_cast<float>(wire[4 + i]);
  return std::optional<Checkpoint>(std::move(c));
}

}  // namespace railyard::workloads
