// Static files of the web dashboard, served at `/` from one root directory. No Beast: answers are plain
// HttpResponses. Only GET/HEAD; "/" is index.html; paths with ".." segments, or that resolve (symlinks
// included) outside the root, are refused; a missing file is a 404 JSON error like the API's.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "scheduler/api/http.hpp"

namespace railyard::api {

class StaticFiles {
 public:
  // `root` empty: nothing is served (every path is 404).
  explicit StaticFiles(std::filesystem::path root);
  const std::filesystem::path& root() const { return root_; }
  HttpResponse get(std::string_view path) const;

 private:
  std::filesystem::path root_;  // canonical
};

// The Content-Type for a file name by its extension (application/octet-stream when unknown).
std::string_view content_type_for(std::string_view file_name);

// --web-root's default: <dir of the executable>/../share/railyard/web if it exists, else web/dist under the
// current directory if it exists, else "" (none).
std::string default_web_root(const std::string& exe_path);

}  // namespace railyard::api
