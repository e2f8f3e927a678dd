#include "scheduler/api/static_files.hpp"

#include <fstream>
#include <sstream>
#include <utility>

namespace railyard::api {
namespace fs = std::filesystem;

namespace {

constexpr std::pair<std::string_view, std::string_view> kTypes[] = {
    {".html", "text/html; charset=utf-8"},
    {".js", "text/javascript; charset=utf-8"},
    {".mjs", "text/javascript; charset=utf-8"},
    {".css", "text/css; charset=utf-8"},
    {".svg", "image/svg+xml"},
    {".png", "image/png"},
    {".json", "application/json"},
    {".woff2", "font/woff2"},
    {".ico", "image/x-icon"},
    {".txt", "text/plain; charset=utf-8"},
    {".map", "application/json"},
};

HttpResponse missing() { return error_response(404, "not_found", "no such file"); }

}  // namespace

std::string_view content_type_for(std::string_view name) {
  const size_t dot = name.rfind('.');
  if (dot != std::string_view::npos)
    for (const auto& [ext, type] : kTypes)
      if (name.substr(dot) == ext) return type;
  return "application/octet-stream";
}

StaticFiles::StaticFiles(fs::path root) {
  std::error_code ec;
  if (!root.empty()) root_ = fs::canonical(root, ec);
  if (ec) root_.clear();
}

HttpResponse StaticFiles::get(std::string_view path) const {
  if (root_.empty() || path.empty() || path.front() != '/') return missing();
  std::string rel(path.substr(1));
  if (rel.empty() || rel.back() == '/') rel += "index.html";
  // Refuse any ".." segment outright (also percent-decoded ones: the router decodes before us), and
  // backslashes and NULs that some file systems would read differently.
  for (size_t start = 0; start <= rel.size();) {
    const size_t end = std::min(rel.find('/', start), rel.size());
    if (rel.compare(start, end - start, "..") == 0) return error_response(400, "bad_request", "bad path");
    start = end + 1;
  }
  if (rel.find('\\') != std::string::npos || rel.find('\0') != std::string::npos)
    return error_response(400, "bad_request", "bad path");
  std::error_code ec;
  fs::path file = fs::canonical(root_ / rel, ec);
  if (ec) return missing();
  if (fs::is_directory(file, ec)) file = fs::canonical(file / "index.html", ec);
  if (ec || !fs::is_regular_file(file, ec)) return missing();
  // Symlinks that lead out of the root count as missing.
  const auto [r, f] = std::mismatch(root_.begin(), root_.end(), file.begin(), file.end());
  if (r != root_.end()) return missing();
  std::ifstream in(file, std::ios::binary);
  if (!in) return missing();
  std::ostringstream body;
  body << in.rdbuf();
  HttpResponse res{200, std::string(content_type_for(file.filename().string())), body.str(), {}};
  res.headers.emplace_back("Cache-Control", "no-cache");
  return res;
}

std::string default_web_root(const std::string& exe_path) {
  std::error_code ec;
  const fs::path exe = fs::canonical(exe_path, ec);
  if (!ec) {
    const fs::path share = exe.parent_path().parent_path() / "share" / "railyard" / "web";
    if (fs::is_directory(share, ec)) return share.string();
  }
  if (fs::is_directory("web/dist", ec)) return fs::absolute("web/dist").string();
  return {};
}

}  // namespace railyard::api
