#include "cli/api.hpp"

#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "cli/cli_util.hpp"
#include "common/net/http_client.hpp"

namespace railyard::cli {

namespace fs = std::filesystem;

void add_server_options(CLI::App& cmd, ServerOptions& o) {
  cmd.add_option("--url", o.url, "Scheduler URL (default: $RAILYARD_URL, the config file, " +
                                     std::string(kDefaultUrl) + ")");
  cmd.add_option("--token", o.token, "API token (default: $RAILYARD_TOKEN, the config file)");
  cmd.add_option("--ca-file", o.ca_file,
                 "PEM CA bundle to verify an https:// scheduler (default: $RAILYARD_CA_FILE, the config file, "
                 "the system's trust store)");
  cmd.add_option("--timeout", o.timeout_s, "Seconds to wait for each answer")->capture_default_str();
}

std::string config_file_path() {
  const char* xdg = std::getenv("XDG_CONFIG_HOME");
  if (xdg && *xdg) return (fs::path(xdg) / "railyard" / "config").string();
  const char* home = std::getenv("HOME");
  if (home && *home) return (fs::path(home) / ".config" / "railyard" / "config").string();
  return "";
}

namespace {

std::string trim(std::string s) {
  const size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  const size_t e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

}  // namespace

ConfigValues read_config_file(const std::string& path) {
  ConfigValues out;
  if (path.empty()) return out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (const size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    const size_t eq = line.find('=');
    if (eq == std::string::npos) continue;
    const std::string key = trim(line.substr(0, eq));
    const std::string value = trim(line.substr(eq + 1));
    if (key == "url") out.url = value;
    if (key == "token") out.token = value;
    if (key == "ca_file") out.ca_file = value;
  }
  return out;
}

Status write_config_file(const std::string& path, const ConfigValues& values) {
  if (path.empty()) return internal_error("no config file path: set $HOME or $XDG_CONFIG_HOME");
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  // Keep unrelated lines; replace url and token.
  std::string kept;
  {
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line)) {
      const std::string key = trim(line.substr(0, line.find('=')));
      if (key != "url" && key != "token") kept += line + "\n";
    }
  }
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!out) return internal_error("cannot write " + tmp);
    ::chmod(tmp.c_str(), 0600);
    out << kept << "url = " << values.url << "\n";
    if (!values.token.empty()) out << "token = " << values.token << "\n";
    if (!out) return internal_error("cannot write " + tmp);
  }
  fs::rename(tmp, path, ec);
  if (ec) return internal_error("cannot write " + path + ": " + ec.message());
  return ok();
}

Error api_error(int status, const std::string& body, const std::string& method, const std::string& target) {
  auto j = nlohmann::json::parse(body, nullptr, false);
  std::string code, message;
  if (j.is_object() && j.contains("error") && j["error"].is_object()) {
    code = j["error"].value("code", "");
    message = j["error"].value("message", "");
  }
  if (message.empty()) message = "HTTP " + std::to_string(status) + (body.empty() ? "" : ": " + body.substr(0, 200));
  if (status == 404 && message == "no such route")
    return {ErrorCode::kUnavailable,
            "this scheduler does not serve " + method + " " + target.substr(0, target.find('?')) + " (yet)"};
  if (status == 405)
    return {ErrorCode::kUnavailable, "this scheduler does not serve " + method + " " +
                                         target.substr(0, target.find('?')) + ": " + message};
  switch (status) {
    case 400:
    case 413:
      return invalid(message);
    case 401:
      return {ErrorCode::kPermission, message + " (set a token with --token or RAILYARD_TOKEN)"};
    case 403:
      return {ErrorCode::kPermission, message};
    case 404:
      return not_found(message);
    case 409:
      return {ErrorCode::kConflict, message};
    default:
      return internal_error(message);
  }
}

Api::Api(const ServerOptions& options) {
  const ConfigValues file = read_config_file(config_file_path());
  url_ = !options.url.empty() ? options.url : !env_or_empty("RAILYARD_URL").empty() ? env_or_empty("RAILYARD_URL")
                                          : !file.url.empty()                        ? file.url
                                                                                      : kDefaultUrl;
  token_ = !options.token.empty()                    ? options.token
           : !env_or_empty("RAILYARD_TOKEN").empty() ? env_or_empty("RAILYARD_TOKEN")
                                                     : file.token;
  const std::string ca_file = !options.ca_file.empty()                    ? options.ca_file
                              : !env_or_empty("RAILYARD_CA_FILE").empty() ? env_or_empty("RAILYARD_CA_FILE")
                                                                          : file.ca_file;
  auto parsed = net::parse_http_url(url_);
  if (!parsed) fail(parsed.error());
  const auto timeout = std::chrono::milliseconds(static_cast<long>(options.timeout_s * 1000));
  http_ = std::make_unique<net::HttpClient>(url_, std::move(parsed).value(), timeout, ca_file);
}

Api::~Api() = default;

Result<nlohmann::json> Api::call(const std::string& method, const std::string& target, const nlohmann::json& body) {
  const std::string path = "/api/v1" + target;
  auto reply = http_->request(method, path, body.is_null() ? "" : body.dump(), token_);
  if (!reply) return reply.error();
  if (reply->status < 200 || reply->status >= 300) return api_error(reply->status, reply->body, method, path);
  if (reply->body.empty()) return nlohmann::json::object();
  auto j = nlohmann::json::parse(reply->body, nullptr, false);
  if (j.is_discarded()) return internal_error("the scheduler answered " + path + " with malformed JSON");
  return j;
}

nlohmann::json Api::get(const std::string& target) {
  auto r = call("GET", target);
  if (!r) fail(r.error());
  return std::move(r).value();
}

nlohmann::json Api::post(const std::string& target, const nlohmann::json& body) {
  require_token();
  auto r = call("POST", target, body);
  if (!r) fail(r.error());
  return std::move(r).value();
}

void Api::require_token() const {
  if (token_.empty())
    fail({ErrorCode::kPermission, "no API token: pass --token, set RAILYARD_TOKEN, or run `railyard up` "
                                  "(an admin creates tokens with `railyard token create`)"});
}

std::string url_encode(const std::string& text) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

}  // namespace railyard::cli
