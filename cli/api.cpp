#include "cli/api.hpp"

#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <algorithm>
#include <random>
#include <thread>

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
      return {ErrorCode::kPermission,
              message +
                  " (set a token with --token or RAILYARD_TOKEN, or on the scheduler's host use its Unix "
                  "socket: --url unix:/PATH)"};
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
  const std::string url = !options.url.empty()                    ? options.url
                          : !env_or_empty("RAILYARD_URL").empty() ? env_or_empty("RAILYARD_URL")
                          : !file.url.empty()                     ? file.url
                                                                  : kDefaultUrl;
  token_ = !options.token.empty()                    ? options.token
           : !env_or_empty("RAILYARD_TOKEN").empty() ? env_or_empty("RAILYARD_TOKEN")
                                                     : file.token;
  ca_file_ = !options.ca_file.empty()                    ? options.ca_file
             : !env_or_empty("RAILYARD_CA_FILE").empty() ? env_or_empty("RAILYARD_CA_FILE")
                                                         : file.ca_file;
  for (size_t start = 0; start <= url.size();) {
    const size_t comma = std::min(url.find(',', start), url.size());
    std::string one = trim(url.substr(start, comma - start));
    start = comma + 1;
    if (one.empty()) continue;
    if (auto parsed = net::parse_http_url(one); !parsed) fail(parsed.error());
    urls_.push_back(std::move(one));
  }
  if (urls_.empty()) fail(invalid("--url " + url + ": no URL"));
  http_.resize(urls_.size());
  timeout_ = std::chrono::milliseconds(static_cast<long>(options.timeout_s * 1000));
}

Api::~Api() = default;

net::HttpClient& Api::client(size_t index) {
  if (index >= http_.size()) http_.resize(index + 1);
  if (!http_[index]) {
    auto parsed = net::parse_http_url(urls_[index]);
    if (!parsed) fail(parsed.error());
    http_[index] = std::make_unique<net::HttpClient>(urls_[index], std::move(parsed).value(), timeout_, ca_file_);
  }
  return *http_[index];
}

Result<nlohmann::json> Api::answer(const std::string& method, const std::string& path, int status,
                                   const std::string& body) {
  if (status < 200 || status >= 300) return api_error(status, body, method, path);
  if (body.empty()) return nlohmann::json::object();
  auto j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_discarded()) return internal_error("the scheduler answered " + path + " with malformed JSON");
  return j;
}

Result<nlohmann::json> Api::call_at(size_t index, const std::string& method, const std::string& target) {
  const std::string path = "/api/v1" + target;
  auto reply = client(index).request(method, path, "", token_);
  if (!reply) return reply.error();
  return answer(method, path, reply->status, reply->body);
}

namespace {

std::string random_key() {
  std::random_device rd;
  std::string out;
  static const char* kHex = "0123456789abcdef";
  for (int i = 0; i < 32; ++i) out += kHex[rd() & 15];
  return out;
}

// The leader a standby names in its 503 ({"error": {...}, "leader": {"address": ...}}), or "".
std::string leader_hint(const std::string& body) {
  auto j = nlohmann::json::parse(body, nullptr, false);
  if (!j.is_object() || !j.contains("leader") || !j["leader"].is_object()) return "";
  return j["leader"].value("address", "");
}

// Whether two scheduler URLs name the same place (a trailing '/' aside).
bool same_url(std::string_view a, std::string_view b) {
  while (a.size() > 1 && a.back() == '/') a.remove_suffix(1);
  while (b.size() > 1 && b.back() == '/') b.remove_suffix(1);
  return a == b;
}

}  // namespace

Result<nlohmann::json> Api::call(const std::string& method, const std::string& target, const nlohmann::json& body) {
  std::string path = "/api/v1" + target;
  const bool submit = method == "POST" && (target == "/jobs" || target == "/jobs:batch");
  if (submit) path += "?idempotency_key=" + random_key();
  const bool repeatable = method == "GET" || submit;
  const std::string text = body.is_null() ? "" : body.dump();
  const auto until = std::chrono::steady_clock::now() + timeout_;
  for (int tries = 1;; ++tries) {
    auto reply = client(current_).request(method, path, text, token_);
    std::string hint;
    if (reply) {
      const bool not_leader = reply->status == 503 && reply->body.find("\"leader\"") != std::string::npos;
      if (!not_leader) return answer(method, path, reply->status, reply->body);
      hint = leader_hint(reply->body);
    } else if (urls_.size() == 1 || !repeatable) {
      return reply.error();
    }
    if (std::chrono::steady_clock::now() >= until)
      return reply ? Error{ErrorCode::kUnavailable, "no scheduler of " + std::to_string(urls_.size()) +
                                                        " leads (last: " + urls_[current_] + ")"}
                   : reply.error();
    // Follow the hint only when it is one of the configured URLs: a standby, or whoever answers at its
    // address, must not be able to send the token elsewhere. Else try the next URL at once (a dead first
    // URL costs a refused connect, not a pause); pause after each full round.
    size_t next = (current_ + 1) % urls_.size();
    if (!hint.empty()) {
      auto it = std::find_if(urls_.begin(), urls_.end(), [&](const std::string& u) { return same_url(u, hint); });
      if (it == urls_.end())
        return Error{ErrorCode::kUnavailable,
                     urls_[current_] + " is a standby and names " + hint +
                         " as the leader, which is not a configured scheduler URL (--url, RAILYARD_URL, the "
                         "config file): not following it, so the token is not sent there. If it is yours, add "
                         "it to the comma-separated list, e.g. --url " + urls_[current_] + "," + hint};
      next = static_cast<size_t>(it - urls_.begin());
      if (next == current_) next = (current_ + 1) % urls_.size();  // it names itself: not ready yet
    }
    if (tries % static_cast<int>(urls_.size()) == 0) std::this_thread::sleep_for(std::chrono::milliseconds(200));
    current_ = next;
  }
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

bool Api::identified() const {
  return !token_.empty() || std::all_of(urls_.begin(), urls_.end(),
                                        [](const std::string& u) { return u.rfind("unix:", 0) == 0; });
}

void Api::require_token() const {
  if (!identified())
    fail(
        {ErrorCode::kPermission,
         "no API token: pass --token, set RAILYARD_TOKEN, or run `railyard up`; on the scheduler's host "
         "--url unix:/PATH/railyard.sock needs none (an admin creates tokens with `railyard token create`)"});
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
