#include "cli/job_util.hpp"

#include <charconv>
#include <chrono>
#include <thread>

#include "cli/cli_util.hpp"

namespace railyard::cli {

long parse_job_id(const std::string& text) {
  long id = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), id);
  if (ec != std::errc() || end != text.data() + text.size() || id <= 0)
    fail_usage("\"" + text + "\" is not a job id (a positive number)");
  return id;
}

bool job_is_final(const nlohmann::json& job) {
  const std::string state = job.value("state", "");
  const bool requeue = job.contains("spec") && job["spec"].is_object() && job["spec"].value("requeue", false);
  if (state == "COMPLETED" || state == "CANCELLED" || state == "TIMEOUT" || state == "OUT_OF_MEMORY") return true;
  if (state == "FAILED" || state == "NODE_FAIL") return !requeue;
  return false;
}

int job_exit_status(const nlohmann::json& job) {
  const std::string state = job.value("state", "");
  if (job.contains("exit_code") && job["exit_code"].is_number_integer()) {
    const int code = job["exit_code"].get<int>();
    if (code != 0 || state == "COMPLETED") return code & 0xff;
  }
  return state == "COMPLETED" ? 0 : 1;
}

std::vector<nlohmann::json> list_jobs(Api& api, const std::string& query) {
  std::vector<nlohmann::json> out;
  long after = 0;
  for (;;) {
    auto page = api.get("/jobs?limit=10000&after=" + std::to_string(after) + (query.empty() ? "" : "&" + query));
    for (auto& j : page["jobs"]) out.push_back(std::move(j));
    if (!page.contains("next_after") || !page["next_after"].is_number()) break;
    after = page["next_after"].get<long>();
  }
  return out;
}

void sleep_for_seconds(double seconds) {
  std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<long>(seconds * 1000)));
}

}  // namespace railyard::cli
