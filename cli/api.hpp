// The scheduler as the CLI sees it: where it is (flags, environment, config file), and JSON requests whose
// failures become the command's exit code.
//
// Resolution order for the URL and the token, first found wins:
//   --url / --token / --ca-file  >  RAILYARD_URL / RAILYARD_TOKEN / RAILYARD_CA_FILE  >  the config file
//   >  http://127.0.0.1:8600 (no token; the system's CA certificates for https://)
// The config file is $XDG_CONFIG_HOME/railyard/config, else $HOME/.config/railyard/config, with lines
// `url = http(s)://...`, `token = ...` and `ca_file = PATH` ('#' starts a comment).
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "common/result.hpp"

namespace CLI {
class App;
}

namespace railyard::net {
class HttpClient;
}

namespace railyard::cli {

inline constexpr const char* kDefaultUrl = "http://127.0.0.1:8600";

struct ServerOptions {
  std::string url;
  std::string token;
  std::string ca_file;
  double timeout_s = 30;
};

// Adds --url, --token and --timeout to a command that talks to the scheduler.
void add_server_options(CLI::App& cmd, ServerOptions& o);

std::string config_file_path();  // "" when neither $XDG_CONFIG_HOME nor $HOME is set
struct ConfigValues {
  std::string url;
  std::string token;
  std::string ca_file;  // read only; write_config_file keeps the line as it is
};
ConfigValues read_config_file(const std::string& path);
// Writes (replaces) the url and token lines, mode 0600, creating the folder.
Status write_config_file(const std::string& path, const ConfigValues& values);

// Maps an HTTP status and the API's error body to an Error (400 → invalid, 401/403 → permission,
// 404 → not found, 409 → conflict, else internal). An unknown route becomes kUnavailable with a message
// saying this scheduler does not serve it.
Error api_error(int status, const std::string& body, const std::string& method, const std::string& target);

class Api {
 public:
  // Resolves the URL and token; a malformed URL fails the command (exit 2).
  explicit Api(const ServerOptions& options);
  ~Api();

  const std::string& url() const { return url_; }
  const std::string& token() const { return token_; }
  bool has_token() const { return !token_.empty(); }

  // Parsed JSON of a 2xx answer, or the error.
  Result<nlohmann::json> call(const std::string& method, const std::string& target,
                              const nlohmann::json& body = nullptr);
  // As call(), but a failure ends the command (cli_util.hpp fail()).
  nlohmann::json get(const std::string& target);
  nlohmann::json post(const std::string& target, const nlohmann::json& body = nlohmann::json::object());
  // POSTs need a token: fails with a hint when none is configured.
  void require_token() const;

 private:
  std::string url_;
  std::string token_;
  std::unique_ptr<net::HttpClient> http_;
};

// Percent-encodes a query parameter value.
std::string url_encode(const std::string& text);

}  // namespace railyard::cli
