#include "cli/output.hpp"

#include <sys/ioctl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <iostream>

namespace railyard::cli {

bool use_color() {
  const char* no_color = std::getenv("NO_COLOR");
  return ::isatty(STDOUT_FILENO) && !(no_color && *no_color);
}

int terminal_width() {
  winsize ws{};
  if (::isatty(STDOUT_FILENO) && ::ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  if (const char* cols = std::getenv("COLUMNS")) {
    const int n = std::atoi(cols);
    if (n > 0) return n;
  }
  return 0;
}

std::string paint(const std::string& text, Color color) {
  if (color == Color::kNone || !use_color()) return text;
  static constexpr const char* kCodes[] = {"", "32", "33", "31", "34", "90", "1"};
  return "\033[" + std::string(kCodes[static_cast<int>(color)]) + "m" + text + "\033[0m";
}

Color state_color(const std::string& s) {
  if (s == "RUNNING" || s == "COMPLETED" || s == "up") return Color::kGreen;
  if (s == "PENDING" || s == "HELD" || s == "STARTING" || s == "drain" || s == "draining") return Color::kYellow;
  if (s == "FAILED" || s == "NODE_FAIL" || s == "TIMEOUT" || s == "OUT_OF_MEMORY" || s == "down")
    return Color::kRed;
  if (s == "CANCELLED" || s == "PREEMPTED") return Color::kGray;
  return Color::kNone;
}

namespace {

// Display width of UTF-8 text (code points; good enough for names and the ellipsis).
size_t display_width(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

std::string cut(const std::string& s, size_t width) {
  if (display_width(s) <= width) return s;
  if (width == 0) return "";
  std::string out;
  size_t n = 0;
  for (size_t i = 0; i < s.size() && n < width - 1; ++i) {
    out += s[i];
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) ++n;
    while (i + 1 < s.size() && (static_cast<unsigned char>(s[i + 1]) & 0xC0) == 0x80) out += s[++i];
  }
  return out + "…";
}

}  // namespace

void Table::add(std::vector<std::string> cells, std::vector<Color> colors) {
  cells.resize(headers_.size());
  colors.resize(headers_.size(), Color::kNone);
  rows_.push_back(std::move(cells));
  colors_.push_back(std::move(colors));
}

void Table::print() const {
  const size_t n = headers_.size();
  std::vector<size_t> width(n);
  for (size_t c = 0; c < n; ++c) {
    width[c] = display_width(headers_[c]);
    for (const auto& row : rows_) width[c] = std::max(width[c], display_width(row[c]));
  }
  const int term = terminal_width();
  if (term > 0) {
    auto total = [&] {
      size_t t = 0;
      for (size_t w : width) t += w + 2;
      return t - 2;
    };
    while (total() > static_cast<size_t>(term)) {
      size_t widest = 0;
      for (size_t c = 1; c < n; ++c)
        if (width[c] > width[widest]) widest = c;
      if (width[widest] <= 6) break;
      --width[widest];
    }
  }
  auto line = [&](const std::vector<std::string>& cells, const std::vector<Color>* colors, bool header) {
    std::string out;
    for (size_t c = 0; c < n; ++c) {
      std::string text = cut(cells[c], width[c]);
      const size_t pad = c + 1 == n ? 0 : width[c] - display_width(text) + 2;
      out += paint(text, header ? Color::kBold : (*colors)[c]) + std::string(pad, ' ');
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    std::cout << out << "\n";
  };
  line(headers_, nullptr, true);
  for (size_t r = 0; r < rows_.size(); ++r) line(rows_[r], &colors_[r], false);
}

std::string format_time(const nlohmann::json& t) {
  if (!t.is_number()) return "-";
  const std::time_t secs = static_cast<std::time_t>(t.get<double>());
  std::tm tm{};
  ::localtime_r(&secs, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

std::string format_starts_in(int64_t start, int64_t now) {
  const int64_t d = start - now;
  if (d <= 0) return "starts any moment";
  if (d < 60) return "starts in <1 min";
  char in[32];
  if (d < 90 * 60) std::snprintf(in, sizeof in, "~%lld min", static_cast<long long>((d + 30) / 60));
  else if (d < 48 * 3600) std::snprintf(in, sizeof in, "~%lld h", static_cast<long long>((d + 1800) / 3600));
  else std::snprintf(in, sizeof in, "~%lld days", static_cast<long long>((d + 43200) / 86400));
  const std::time_t secs = static_cast<std::time_t>(start);
  std::tm tm{};
  ::localtime_r(&secs, &tm);
  char at[32];
  std::strftime(at, sizeof at, d < 24 * 3600 ? "%H:%M" : "%a %d %b %H:%M", &tm);
  return std::string("starts in ") + in + ", " + at;
}

std::string format_duration(double seconds) {
  if (seconds < 0) seconds = 0;
  const long s = static_cast<long>(seconds + 0.5);
  char buf[32];
  if (s < 60) std::snprintf(buf, sizeof buf, "%lds", s);
  else if (s < 3600) std::snprintf(buf, sizeof buf, "%ldm%02lds", s / 60, s % 60);
  else if (s < 86400) std::snprintf(buf, sizeof buf, "%ldh%02ldm", s / 3600, s % 3600 / 60);
  else std::snprintf(buf, sizeof buf, "%ldd%02ldh", s / 86400, s % 86400 / 3600);
  return buf;
}

std::string cell(const nlohmann::json& v) {
  if (v.is_null()) return "-";
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_float()) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.4g", v.get<double>());
    return buf;
  }
  return v.dump();
}

void print_json(const nlohmann::json& value) { std::cout << value.dump(2) << std::endl; }

std::vector<std::pair<std::string, std::string>> container_rows(const nlohmann::json& spec) {
  if (!spec.is_object() || !spec.contains("container") || !spec["container"].is_object()) return {};
  const nlohmann::json& c = spec["container"];
  auto text = [](const nlohmann::json& j, const char* key) {
    return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : std::string();
  };
  std::string mounts;
  if (c.contains("mounts") && c["mounts"].is_array())
    for (const auto& m : c["mounts"]) mounts += (mounts.empty() ? "" : ", ") + cell(m);
  std::string workdir = text(c, "workdir");
  if (workdir.empty())
    workdir = text(spec, "workdir").empty() ? "the image's" : text(spec, "workdir") + " (the job's workdir)";
  const bool writable = c.contains("writable") && c["writable"].is_boolean() && c["writable"].get<bool>();
  std::vector<std::pair<std::string, std::string>> rows = {
      {"image", text(c, "image")},
      {"mounts", mounts.empty() ? "none" : mounts},
      {"container dir", workdir},
      {"root fs", writable ? "writable" : "read-only (/tmp, /run, /var/tmp writable)"},
  };
  if (!text(c, "name").empty()) rows.emplace_back("container name", text(c, "name"));
  return rows;
}

}  // namespace railyard::cli
