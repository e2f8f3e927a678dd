#include "workloads/dataset.hpp"

#include <zlib.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <numeric>
#include <string_view>
#include <system_error>

#ifndef RAILYARD_SOURCE_DATA_DIR
#define RAILYARD_SOURCE_DATA_DIR ""
#endif

namespace railyard::workloads {
namespace {

struct GzCloser {
  void operator()(gzFile_s* f) const { gzclose(f); }
};

Result<std::string> read_maybe_gzipped(const std::filesystem::path& path) {
  std::unique_ptr<gzFile_s, GzCloser> file(gzopen(path.c_str(), "rb"));
  if (!file) return not_found("cannot open " + path.string());
  std::string text;
  char buffer[1 << 16];
  for (;;) {
    const int got = gzread(file.get(), buffer, sizeof buffer);
    if (got < 0) return internal_error("cannot read " + path.string() + " (corrupt gzip?)");
    if (got == 0) break;
    text.append(buffer, static_cast<size_t>(got));
  }
  return text;
}

// Splits "1,2.5,3" into numbers; false on anything that is not a number.
bool parse_numbers(std::string_view line, std::vector<double>& out) {
  out.clear();
  while (!line.empty()) {
    const auto comma = line.find(',');
    std::string_view cell = line.substr(0, comma);
    while (!cell.empty() && (cell.front() == ' ' || cell.front() == '\t')) cell.remove_prefix(1);
    while (!cell.empty() && (cell.back() == ' ' || cell.back() == '\r')) cell.remove_suffix(1);
    double value = 0;
    const auto [end, ec] = std::from_chars(cell.data(), cell.data() + cell.size(), value);
    if (ec != std::errc() || end != cell.data() + cell.size() || cell.empty()) return false;
    out.push_back(value);
    if (comma == std::string_view::npos) break;
    line.remove_prefix(comma + 1);
  }
  return true;
}

Status add_row(Dataset& data, const std::vector<double>& cells, int line_no) {
  const auto where = " at line " + std::to_string(line_no);
  if (cells.size() < 2) return invalid("need features and a label" + where);
  const int features = static_cast<int>(cells.size()) - 1;
  if (data.features == 0) data.features = features;
  if (features != data.features) return invalid("row width changes" + where);
  const double label = cells.back();
  if (label != static_cast<int>(label) || label < 0 || label >= kMaxClasses) {
    return invalid("label is not an integer in [0, " + std::to_string(kMaxClasses) + ")" + where);
  }
  for (int i = 0; i < features; ++i) data.x.push_back(static_cast<float>(cells[static_cast<size_t>(i)]));
  data.y.push_back(static_cast<int>(label));
  return ok();
}

void scale_to_unit(Dataset& data) {
  float largest = 0;
  for (float v : data.x) largest = std::max(largest, std::abs(v));
  if (largest > 0) {
    for (float& v : data.x) v /= largest;
  }
}

}  // namespace

std::uint64_t SplitMix64::next() {
  std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

std::uint64_t SplitMix64::below(std::uint64_t bound) {
  return next() % bound;  // the modulo bias (bound / 2^64) is far below anything a shuffle can show
}

std::vector<int> permutation(int n, std::uint64_t seed, std::uint64_t stream) {
  std::vector<int> order(static_cast<size_t>(std::max(n, 0)));
  std::iota(order.begin(), order.end(), 0);
  SplitMix64 rng(seed * 0x2545f4914f6cdd1dULL + stream);
  for (int i = n - 1; i > 0; --i) {
    const auto j = static_cast<size_t>(rng.below(static_cast<std::uint64_t>(i) + 1));
    std::swap(order[static_cast<size_t>(i)], order[j]);
  }
  return order;
}

Result<Dataset> load_csv_dataset(const std::filesystem::path& path) {
  auto text = read_maybe_gzipped(path);
  if (!text) return text.error();
  Dataset data;
  data.source = path.string();
  data.name = path.filename().string().starts_with("digits.csv") ? "sklearn-digits" : "csv";
  std::string_view rest = *text;
  std::vector<double> cells;
  for (int line_no = 1; !rest.empty(); ++line_no) {
    const auto eol = rest.find('\n');
    const auto line = rest.substr(0, eol);
    rest.remove_prefix(eol == std::string_view::npos ? rest.size() : eol + 1);
    if (line.find_first_not_of(" \r\t") == std::string_view::npos) continue;
    if (!parse_numbers(line, cells))
      return invalid(path.string() + ": not a numeric CSV row at line " + std::to_string(line_no));
    if (auto added = add_row(data, cells, line_no); !added)
      return invalid(path.string() + ": " + added.error().message);
  }
  if (data.rows() < 10) return invalid(path.string() + ": fewer than 10 rows");
  data.classes = *std::max_element(data.y.begin(), data.y.end()) + 1;
  if (data.classes < 2) return invalid(path.string() + ": need at least two classes");
  scale_to_unit(data);
  return data;
}

Dataset synthetic_digits(std::uint64_t seed) {
  constexpr int kRows = 1797, kFeatures = 64, kClasses = 10;
  SplitMix64 rng(seed);
  std::vector<float> prototypes(kClasses * kFeatures);
  for (float& p : prototypes)
    p = rng.uniform01() < 0.35 ? static_cast<float>(0.5 + 0.5 * rng.uniform01()) : 0.0f;
  Dataset data{"synthetic-digits",
               "synthetic: noisy copies of 10 random 8x8 prototypes, seed " + std::to_string(seed),
               kFeatures,
               kClasses,
               {},
               {}};
  data.x.reserve(static_cast<size_t>(kRows) * kFeatures);
  for (int r = 0; r < kRows; ++r) {
    const int label = r % kClasses;
    for (int f = 0; f < kFeatures; ++f) {
      const double noisy =
          prototypes[static_cast<size_t>(label * kFeatures + f)] + 0.45 * (rng.uniform01() - 0.5);
      data.x.push_back(static_cast<float>(std::clamp(noisy, 0.0, 1.0)));
    }
    data.y.push_back(label);
  }
  return data;
}

std::vector<std::filesystem::path> default_data_candidates() {
  namespace fs = std::filesystem;
  std::vector<fs::path> out;
  if (const char* env = std::getenv("RAILYARD_DATA"); env != nullptr && *env != '\0') out.emplace_back(env);
  std::error_code ec;
  const auto exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    out.push_back(exe.parent_path() / "data" / "digits.csv.gz");
    out.push_back(exe.parent_path().parent_path() / "share" / "railyard" / "digits.csv.gz");
  }
  if (std::string_view(RAILYARD_SOURCE_DATA_DIR) != "")
    out.push_back(fs::path(RAILYARD_SOURCE_DATA_DIR) / "digits.csv.gz");
  out.emplace_back("/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz");
  return out;
}

Dataset load_default_dataset() {
  for (const auto& candidate : default_data_candidates()) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(candidate, ec)) continue;
    if (auto data = load_csv_dataset(candidate)) return std::move(data).value();
  }
  return synthetic_digits();
}

Split split_dataset(const Dataset& all, double eval_fraction, std::uint64_t seed) {
  const auto order = permutation(all.rows(), seed, 0x5eed);
  const int eval_rows =
      static_cast<int>(static_cast<double>(all.rows()) * std::clamp(eval_fraction, 0.0, 0.9));
  Split split;
  for (Dataset* part : {&split.train, &split.eval}) {
    *part = Dataset{all.name, all.source, all.features, all.classes, {}, {}};
  }
  for (int i = 0; i < all.rows(); ++i) {
    const int r = order[static_cast<size_t>(i)];
    Dataset& part = i < eval_rows ? split.eval : split.train;
    part.x.insert(part.x.end(), all.row(r), all.row(r) + all.features);
    part.y.push_back(all.y[static_cast<size_t>(r)]);
  }
  return split;
}

}  // namespace railyard::workloads
