#include "topology/io_nvsmi.hpp"

#include <algorithm>
#include <bit>
#include <cctype>
#include <cstdint>
#include <optional>

#include "topology/io_common.hpp"

namespace railyard::topology {

std::string_view to_string(LinkKind k) {
  switch (k) {
    case LinkKind::kSelf:
      return "X";
    case LinkKind::kNvLink:
      return "NV";
    case LinkKind::kPix:
      return "PIX";
    case LinkKind::kPxb:
      return "PXB";
    case LinkKind::kPhb:
      return "PHB";
    case LinkKind::kNode:
      return "NODE";
    case LinkKind::kSys:
      return "SYS";
  }
  return "?";
}

namespace {

constexpr int kMaxGpus = 64;  // adjacency kept in 64-bit masks

struct Matrix {
  std::vector<std::string> columns;  // GPU labels first, then NIC labels
  int gpus = 0;
  std::vector<std::vector<GpuLink>> rows;  // by column index; empty when the row is missing
  std::vector<int> row_line;
};

Error at_line(int line, const std::string& message) {
  return invalid("line " + std::to_string(line) + ": " + message);
}

bool all_digits(std::string_view s) {
  return !s.empty() &&
         std::all_of(s.begin(), s.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
}

bool is_gpu_label(std::string_view w) {
  return w.size() > 3 && w.substr(0, 3) == "GPU" && all_digits(w.substr(3));
}

std::optional<GpuLink> parse_cell(std::string_view w) {
  if (w == "X") return GpuLink{LinkKind::kSelf, 0};
  if (w.size() > 2 && w.substr(0, 2) == "NV" && all_digits(w.substr(2)) && w.size() < 6)
    return GpuLink{LinkKind::kNvLink, std::stoi(std::string(w.substr(2)))};
  for (LinkKind k : {LinkKind::kPix, LinkKind::kPxb, LinkKind::kPhb, LinkKind::kNode, LinkKind::kSys})
    if (w == to_string(k)) return GpuLink{k, 0};
  if (w == "SOC") return GpuLink{LinkKind::kSys, 0};  // the name of SYS before driver 384
  return std::nullopt;
}

std::vector<std::string_view> split_lines(std::string_view text) {
  std::vector<std::string_view> lines;
  for (size_t pos = 0; pos <= text.size();) {
    size_t nl = std::min(text.find('\n', pos), text.size());
    lines.push_back(text.substr(pos, nl - pos));
    pos = nl + 1;
  }
  return lines;
}

// The header is the first line whose words start GPU0 and whose second word is a column label, not a cell.
Result<size_t> read_header(const std::vector<std::string_view>& lines, Matrix& m) {
  for (size_t i = 0; i < lines.size(); ++i) {
    auto ws = detail::words(lines[i]);
    if (ws.empty() || ws[0] != "GPU0" || (ws.size() > 1 && parse_cell(ws[1]))) continue;
    for (auto w : ws) {
      if (w == "CPU" || w == "NUMA" || w == "GPU" || w == "Legend:") break;
      m.columns.emplace_back(w);
    }
    while (m.gpus < static_cast<int>(m.columns.size()) && is_gpu_label(m.columns[m.gpus])) {
      if (m.columns[m.gpus] != "GPU" + std::to_string(m.gpus))
        return at_line(static_cast<int>(i) + 1, "GPU columns out of order at \"" + m.columns[m.gpus] + "\"");
      ++m.gpus;
    }
    if (m.gpus > kMaxGpus) return at_line(static_cast<int>(i) + 1, "more than 64 GPUs");
    for (size_t c = m.gpus; c < m.columns.size(); ++c)
      if (is_gpu_label(m.columns[c]))
        return at_line(static_cast<int>(i) + 1, "GPU column \"" + m.columns[c] + "\" after the NIC columns");
    return i;
  }
  return invalid(
      "no matrix header found (expected a line of column labels starting GPU0, as nvidia-smi topo -m "
      "prints)");
}

Status read_row(std::string_view line, int number, Matrix& m) {
  auto ws = detail::words(line);
  auto col = std::find(m.columns.begin(), m.columns.end(), ws[0]) - m.columns.begin();
  if (!m.rows[col].empty()) return at_line(number, "second row for " + m.columns[col]);
  if (ws.size() < m.columns.size() + 1)
    return at_line(number, "row " + m.columns[col] + " has " + std::to_string(ws.size() - 1) +
                               " cells, expected " + std::to_string(m.columns.size()));
  for (size_t c = 0; c < m.columns.size(); ++c) {
    auto cell = parse_cell(ws[c + 1]);
    if (!cell)
      return at_line(number, "row " + m.columns[col] + ", column " + m.columns[c] + ": unknown link \"" +
                                 std::string(ws[c + 1]) + "\" (expected X, NV#, PIX, PXB, PHB, NODE or SYS)");
    if ((cell->kind == LinkKind::kSelf) != (static_cast<size_t>(col) == c))
      return at_line(number, "row " + m.columns[col] + ", column " + m.columns[c] + ": \"" +
                                 std::string(ws[c + 1]) + "\"; X belongs on the diagonal and only there");
    m.rows[col].push_back(*cell);
  }
  m.row_line[col] = number;
  return ok();
}

// Rows follow the header until a line that does not start with a column label (a blank line, "Legend:").
Result<size_t> read_rows(const std::vector<std::string_view>& lines, size_t header, Matrix& m) {
  m.rows.assign(m.columns.size(), {});
  m.row_line.assign(m.columns.size(), 0);
  size_t i = header + 1;
  for (; i < lines.size(); ++i) {
    auto ws = detail::words(lines[i]);
    if (ws.empty() || std::find(m.columns.begin(), m.columns.end(), ws[0]) == m.columns.end()) break;
    if (auto s = read_row(lines[i], static_cast<int>(i) + 1, m); !s) return s.error();
  }
  for (int g = 0; g < m.gpus; ++g)
    if (m.rows[g].empty()) return at_line(static_cast<int>(i) + 1, "no row for GPU" + std::to_string(g));
  return i;
}

Status check_gpu_cells(const Matrix& m) {
  for (int a = 0; a < m.gpus; ++a) {
    for (int b = a + 1; b < m.gpus; ++b) {
      const GpuLink& x = m.rows[a][b];
      const GpuLink& y = m.rows[b][a];
      if (x.kind != y.kind || x.nvlinks != y.nvlinks)
        return at_line(m.row_line[b], "GPU" + std::to_string(a) + " and GPU" + std::to_string(b) +
                                          " disagree (line " + std::to_string(m.row_line[a]) +
                                          " says otherwise)");
    }
    for (size_t c = m.gpus; c < m.columns.size(); ++c)
      if (m.rows[a][c].kind == LinkKind::kNvLink)
        return at_line(m.row_line[a],
                       "GPU" + std::to_string(a) + " reaches " + m.columns[c] + " over NVLink");
  }
  return ok();
}

void search_clique(const std::vector<uint64_t>& adjacent, int size, uint64_t candidates, int& best) {
  best = std::max(best, size);
  while (candidates && size + std::popcount(candidates) > best) {
    int v = std::countr_zero(candidates);
    candidates &= candidates - 1;
    search_clique(adjacent, size + 1, candidates & adjacent[v], best);
  }
}

void infer_summary(NvsmiTopology& t) {
  std::vector<uint64_t> adjacent(t.gpu_count, 0);
  int pairs = 0, nv_pairs = 0;
  for (int a = 0; a < t.gpu_count; ++a) {
    for (int b = 0; b < t.gpu_count; ++b) {
      if (a == b) continue;
      ++pairs;
      if (t.link(a, b).kind != LinkKind::kNvLink) continue;
      ++nv_pairs;
      adjacent[a] |= uint64_t{1} << b;
    }
  }
  t.fabric = nv_pairs == 0       ? IntraFabric::kPcie
             : nv_pairs == pairs ? IntraFabric::kNvSwitch
                                 : IntraFabric::kCubeMesh;
  int best = t.gpu_count > 0 ? 1 : 0;
  uint64_t all = t.gpu_count == 64 ? ~uint64_t{0} : (uint64_t{1} << t.gpu_count) - 1;
  search_clique(adjacent, 0, all, best);
  t.nvlink_domain_size = best;
  t.hcas = static_cast<int>(
      std::count_if(t.nics.begin(), t.nics.end(), [](const NicInfo& n) { return n.compute; }));
}

// "NIC0: mlx5_0" lines after the matrix.
std::string legend_name(const std::vector<std::string_view>& lines, size_t from, const std::string& label) {
  for (size_t i = from; i < lines.size(); ++i) {
    auto ws = detail::words(lines[i]);
    if (ws.size() == 2 && ws[0] == label + ":") return std::string(ws[1]);
  }
  return label;
}

NvsmiTopology summarize(const Matrix& m, const std::vector<std::string_view>& lines, size_t legend_from) {
  NvsmiTopology t;
  t.gpu_count = m.gpus;
  for (int a = 0; a < m.gpus; ++a)
    for (int b = 0; b < m.gpus; ++b) t.links.push_back(m.rows[a][b]);
  for (size_t c = m.gpus; c < m.columns.size(); ++c) {
    NicInfo nic;
    nic.label = m.columns[c];
    nic.device = legend_name(lines, legend_from, nic.label);
    for (int g = 0; g < m.gpus; ++g) nic.to_gpu.push_back(m.rows[g][c].kind);
    nic.nearest =
        nic.to_gpu.empty() ? LinkKind::kSys : *std::min_element(nic.to_gpu.begin(), nic.to_gpu.end());
    for (int g = 0; g < m.gpus; ++g)
      if (nic.to_gpu[g] == nic.nearest) nic.nearest_gpus.push_back(g);
    nic.compute = nic.nearest == LinkKind::kPix || nic.nearest == LinkKind::kPxb;
    t.nics.push_back(std::move(nic));
  }
  infer_summary(t);
  return t;
}

// Output captured from a terminal (script(1), a CI log, a cloud console) holds the escapes nvidia-smi
// colours and underlines its header with: ESC [ ... final byte (CSI, e.g. "\x1b[4m"), ESC ] ... BEL or
// ESC \\ (OSC), ESC and one character. They are dropped, as a terminal shows none of them; so is a CR.
std::string strip_terminal_escapes(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\r') continue;
    if (c != '\x1b') {
      out.push_back(c);
      continue;
    }
    if (i + 1 >= text.size()) break;
    const char kind = text[++i];
    if (kind == '[') {
      while (i + 1 < text.size() && !(text[i + 1] >= 0x40 && text[i + 1] <= 0x7e)) ++i;
      ++i;  // the final byte
    } else if (kind == ']') {
      while (i + 1 < text.size() && text[i + 1] != '\a' && !(text[i + 1] == '\x1b' && i + 2 < text.size() && text[i + 2] == '\\')) ++i;
      i += i + 1 < text.size() && text[i + 1] == '\a' ? 1 : 2;
    }
  }
  return out;
}

}  // namespace

Result<NvsmiTopology> parse_nvsmi_topo(std::string_view raw) {
  try {
    const std::string text = strip_terminal_escapes(raw);
    auto lines = split_lines(text);
    Matrix m;
    auto header = read_header(lines, m);
    if (!header) return header.error();
    auto end = read_rows(lines, *header, m);
    if (!end) return end.error();
    if (auto s = check_gpu_cells(m); !s) return s.error();
    return summarize(m, lines, *end);
  } catch (const std::exception& e) {  // a bug or out of memory; never let it escape a parser
    return internal_error(std::string("reading nvidia-smi topo -m output: ") + e.what());
  }
}

}  // namespace railyard::topology
