// The scheduler as the CLI sees it: where it is (flags, environment, config file), and JSON requests whose
// failures become the command's exit code.
//
// Resolution order for the URL and the token, first found wins:
//   --url / --token / --ca-file  >  RAILYARD_URL / RAILYARD_TOKEN / RAILYARD_CA_FILE  >  the config file
//   >  http://127.0.0.1:8600 (no token; the system's CA certificates for https://)
// A unix:/PATH URL talks to the scheduler's Unix socket (`railyard-scheduler --unix-socket`): there a request
// without a token is made by the Unix user running the command, so no token is needed.
// The config file is $XDG_CONFIG_HOME/railyard/config, else $HOME/.config/railyard/config, with lines
// `url = http(s)://...`, `token = ...` and `ca_file = PATH` ('#' starts a comment).
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <chrono>
#include <string>
#include <vector>

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

// High availability (issue 30): the URL may be a comma-separated list of every scheduler of the cluster.
// A request goes to the last one that answered as the leader; a standby's 503 that names the leader sends
// it there when the leader is one of the configured URLs (else the call fails saying so: the token goes
// only to configured schedulers), and an unreachable scheduler to the next one, until the timeout. A request is repeated
// elsewhere only when repeating it is safe: reads, and submits, which carry an idempotency key (the query
// parameter idempotency_key, random per call) so that a retried submit gets the ids of the first.
class Api {
 public:
  // Resolves the URL and token; a malformed URL fails the command (exit 2).
  explicit Api(const ServerOptions& options);
  ~Api();

  // The scheduler answering now (the first URL until another answered).
  const std::string& url() const { return urls_[current_]; }
  const std::vector<std::string>& urls() const { return urls_; }
  // One request to one scheduler of the list, without following the leader: GET /api/v1/leader and
  // `railyard cluster status`.
  Result<nlohmann::json> call_at(size_t index, const std::string& method, const std::string& target);
  const std::string& token() const { return token_; }
  bool has_token() const { return !token_.empty(); }
  // Whether requests name their caller: a token, or a unix:/PATH URL (the kernel names the user).
  bool identified() const;

  // Parsed JSON of a 2xx answer, or the error.
  Result<nlohmann::json> call(const std::string& method, const std::string& target,
                              const nlohmann::json& body = nullptr);
  // As call(), but a failure ends the command (cli_util.hpp fail()).
  nlohmann::json get(const std::string& target);
  nlohmann::json post(const std::string& target, const nlohmann::json& body = nlohmann::json::object());
  // POSTs need a caller: fails with a hint when neither a token nor a unix: URL names one.
  void require_token() const;

 private:
  net::HttpClient& client(size_t index);
  Result<nlohmann::json> answer(const std::string& method, const std::string& path, int status,
                                const std::string& body);

  std::vector<std::string> urls_;
  size_t current_ = 0;
  std::string token_;
  std::string ca_file_;
  std::chrono::milliseconds timeout_{30000};
  std::vector<std::unique_ptr<net::HttpClient>> http_;  // one per URL, made on first use
};

// Percent-encodes a query parameter value.
std::string url_encode(const std::string& text);

}  // namespace railyard::cli
