// Human output of the CLI: tables sized to the terminal, colour only on a TTY without NO_COLOR, and
// times/durations the way people read them. Machine output is --json (the API's JSON, re-printed).
#pragma once

#include <cstdint>

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace railyard::cli {

enum class Color { kNone, kGreen, kYellow, kRed, kBlue, kGray, kBold };

// True when standard output is a terminal and NO_COLOR is unset (https://no-color.org).
bool use_color();
// Columns of the terminal on stdout; $COLUMNS; else 0 = unlimited (output piped to a file).
int terminal_width();
std::string paint(const std::string& text, Color color);

// Colour of a job state or node health ("RUNNING" green, "FAILED" red, "drain" yellow, ...).
Color state_color(const std::string& state);

// A left-aligned text table. When wider than the terminal, the widest column is cut ("…") until it fits.
class Table {
 public:
  explicit Table(std::vector<std::string> headers) : headers_(std::move(headers)) {}
  void add(std::vector<std::string> cells, std::vector<Color> colors = {});
  void print() const;
  bool empty() const { return rows_.empty(); }

 private:
  std::vector<std::string> headers_;
  std::vector<std::vector<std::string>> rows_;
  std::vector<std::vector<Color>> colors_;
};

// "2026-12-02 20:31:07" (local time) of a unix time; "-" for null.
std::string format_time(const nlohmann::json& unix_seconds);
// When a reserved start at unix time `start` is, seen at `now`, as people read it: "starts in ~4 min, 00:19"
// (local time; a weekday and date when it is not within a day), "starts in <1 min", "starts any moment".
std::string format_starts_in(int64_t start, int64_t now);
// "45s", "12m03s", "3h05m", "2d04h".
std::string format_duration(double seconds);
// A JSON value as a table cell: strings bare, null as "-", numbers as they print.
std::string cell(const nlohmann::json& value);
// Prints JSON for --json: pretty, one document.
void print_json(const nlohmann::json& value);

// `show`'s rows for the container of a job spec (the API's "spec"): image, mounts, the folder it starts in,
// its root file system, its name when it has one. None for a job without a container.
std::vector<std::pair<std::string, std::string>> container_rows(const nlohmann::json& spec);

}  // namespace railyard::cli
