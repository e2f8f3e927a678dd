// `railyard submit/queue/show/cancel/hold/release/logs/history/watch` against the real daemon.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <regex>

#include "tests/cli_test_util.hpp"

namespace railyard::testing {
namespace {

class CliJobs : public ::testing::Test {
 protected:
  CliCluster c;

  std::string submit(const std::vector<std::string>& args, const std::string& token) {
    auto r = c.run(args, token);
    EXPECT_EQ(r.code, 0) << r.err;
    return trimmed(r.out);
  }
  // A part that needs a route the scheduler does not serve yet: say so and go on with the others.
  static std::ostream& skip_part() { return std::cout << "[ SKIPPED PART ] "; }

  void SubmitPrintsTheIdAloneAndQueueJsonParsesBack();
  void QueueTableFiltersByUserAndState();
  void ShowGivesPlacementSpanAndCostEstimate();
  void ShowListsTheStateHistoryWhenTheSchedulerServesIt();
  void UnknownJobExits3();
  void CancellingAnotherUsersJobExits3AndLeavesItAlone();
  void HoldAndReleaseAPendingJob();
  void BadFlagsAndBadSpecsExit2();
  void UnreachableSchedulerExits1WithTheReason();
  void SilentSchedulerTimesOutWithTheReason();
  void JsonJobFileIsSubmittedAsWritten();
  void SbatchScriptIsImportedWithWarningsOnStderr();
  void LogsOfAnotherUsersJobOrAnUnknownJobExit3();
  void HistoryJsonParsesBack();
  void WatchOncePrintsTheTargetLine();
  void DependenciesAreSentAndShownAsWritten();
  void ContainerFlagsAreSentAndShown();
};

void CliJobs::SubmitPrintsTheIdAloneAndQueueJsonParsesBack() {
  SCOPED_TRACE("SubmitPrintsTheIdAloneAndQueueJsonParsesBack");
  auto r = c.run({"submit", "--gpus", "16", "--name", "wide", "--time", "2h", "--target", "accuracy=0.9", "--",
                  "/bin/echo", "hi"},
                 c.ada());
  ASSERT_EQ(r.code, 0) << r.err;
  ASSERT_TRUE(std::regex_match(r.out, std::regex("[0-9]+\n"))) << r.out;
  auto q = c.run({"queue", "--json", "--user", "ada"}, "");
  ASSERT_EQ(q.code, 0) << q.err;
  auto j = q.json();
  ASSERT_TRUE(j.is_object()) << q.out;
  nlohmann::json job;
  for (const auto& x : j["jobs"])
    if (x["id"] == std::stoi(r.out)) job = x;
  ASSERT_TRUE(job.is_object()) << q.out;
  EXPECT_EQ(job["name"], "wide");
  EXPECT_EQ(job["user"], "ada");
  EXPECT_EQ(job["gpus"], 16);
  EXPECT_EQ(job["spec"]["command"], nlohmann::json::array({"/bin/echo", "hi"}));
  EXPECT_EQ(job["spec"]["time_limit"], 7200);
  EXPECT_EQ(job["spec"]["target"]["metric"], "eval_accuracy");
  EXPECT_DOUBLE_EQ(job["spec"]["target"]["value"].get<double>(), 0.9);
}

void CliJobs::QueueTableFiltersByUserAndState() {
  SCOPED_TRACE("QueueTableFiltersByUserAndState");
  submit({"submit", "--gpus", "8", "--name", "ada-job", "--", "true"}, c.ada());
  submit({"submit", "--gpus", "8", "--name", "bob-job", "--", "true"}, c.bob());
  auto all = c.run({"queue"}, "");
  ASSERT_EQ(all.code, 0) << all.err;
  EXPECT_NE(all.out.find("ada-job"), std::string::npos);
  EXPECT_NE(all.out.find("bob-job"), std::string::npos);
  EXPECT_EQ(all.out.find("\033["), std::string::npos) << "no colour when not a terminal";
  auto mine = c.run({"queue", "--user", "bob"}, "");
  EXPECT_EQ(mine.out.find("ada-job"), std::string::npos);
  EXPECT_NE(mine.out.find("bob-job"), std::string::npos);
  auto running = c.run({"queue", "--state", "completed", "--json"}, "");
  ASSERT_EQ(running.code, 0) << running.err;
  EXPECT_TRUE(running.json()["jobs"].empty());
  auto bad = c.run({"queue", "--state", "SLEEPING"}, "");
  EXPECT_EQ(bad.code, 2) << bad.err;
}

void CliJobs::ShowGivesPlacementSpanAndCostEstimate() {
  SCOPED_TRACE("ShowGivesPlacementSpanAndCostEstimate");
  const std::string id = submit({"submit", "--nodes", "2", "--gpus-per-node", "8", "--", "true"}, c.ada());
  auto text = c.run({"show", id}, "");
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.out.find("switch span"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("allreduce est."), std::string::npos) << text.out;
  auto r = c.run({"show", id, "--json"}, "");
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = r.json();
  EXPECT_EQ(j["job"]["id"], std::stoi(id));
  EXPECT_EQ(j["job"]["nodes"].size(), 2u);
  EXPECT_EQ(j["job"]["leaves_spanned"], j["job"]["min_leaves"]);
  ASSERT_TRUE(j["allreduce_estimate"].is_object()) << r.out;
  EXPECT_GT(j["allreduce_estimate"]["seconds"].get<double>(), 0);
  EXPECT_EQ(j["allreduce_estimate"]["bytes"].get<double>(), 1024.0 * 1024 * 1024);
}

void CliJobs::ShowListsTheStateHistoryWhenTheSchedulerServesIt() {
  SCOPED_TRACE("ShowListsTheStateHistoryWhenTheSchedulerServesIt");
  const std::string id = submit({"submit", "--gpus", "8", "--", "true"}, c.ada());
  ASSERT_EQ(c.run({"cancel", id}, c.ada()).code, 0);
  auto j = c.run({"show", id, "--json"}, "").json();
  if (j["events"].is_null()) return void(skip_part() << "GET /api/v1/jobs/ID/events not served by this scheduler yet" << "\n");
  ASSERT_FALSE(j["events"].empty());
  EXPECT_NE(j["events"].dump().find("ada"), std::string::npos) << j["events"].dump();
}

void CliJobs::UnknownJobExits3() {
  SCOPED_TRACE("UnknownJobExits3");
  EXPECT_EQ(c.run({"show", "999"}, "").code, 3);
  auto r = c.run({"cancel", "999"}, c.ada());
  EXPECT_EQ(r.code, 3);
  EXPECT_NE(r.err.find("999"), std::string::npos) << r.err;
  EXPECT_EQ(c.run({"show", "abc"}, "").code, 2);
}

void CliJobs::CancellingAnotherUsersJobExits3AndLeavesItAlone() {
  SCOPED_TRACE("CancellingAnotherUsersJobExits3AndLeavesItAlone");
  const std::string id = submit({"submit", "--gpus", "8", "--", "true"}, c.ada());
  auto r = c.run({"cancel", id}, c.bob());
  EXPECT_EQ(r.code, 3) << r.err;
  EXPECT_NE(r.err.find("ada"), std::string::npos) << r.err;
  EXPECT_NE(c.run({"show", id, "--json"}, "").json()["job"]["state"], "CANCELLED");
  auto own = c.run({"cancel", id}, c.ada());
  EXPECT_EQ(own.code, 0) << own.err;
  EXPECT_EQ(own.out, id + " CANCELLED\n");
  EXPECT_EQ(c.run({"cancel", id}, c.ada()).code, 1) << "a finished job: conflict";
}

void CliJobs::HoldAndReleaseAPendingJob() {
  SCOPED_TRACE("HoldAndReleaseAPendingJob");
  // Two jobs of the whole 256-GPU pod: the second waits whatever else runs.
  const std::string first = submit({"submit", "--gpus", "256", "--", "true"}, c.ada());
  const std::string id = submit({"submit", "--gpus", "256", "--", "true"}, c.ada());
  auto hold = c.run({"hold", id}, c.ada());
  ASSERT_EQ(hold.code, 0) << hold.err;
  EXPECT_EQ(hold.out, id + " HELD\n");
  auto release = c.run({"release", id}, c.ada());
  ASSERT_EQ(release.code, 0) << release.err;
  EXPECT_EQ(release.out, id + " PENDING\n");
  EXPECT_EQ(c.run({"cancel", first, id}, c.ada()).code, 0);
}

void CliJobs::BadFlagsAndBadSpecsExit2() {
  SCOPED_TRACE("BadFlagsAndBadSpecsExit2");
  EXPECT_EQ(c.run({"queue", "--no-such-flag"}, "").code, 2);
  EXPECT_EQ(c.run({"submit", "--gpus", "8"}, c.ada()).code, 2) << "no command";
  EXPECT_EQ(c.run({"submit", "--", "true"}, c.ada()).code, 2) << "no size";
  EXPECT_EQ(c.run({"submit", "--gpus", "8", "--launcher", "ssh", "--", "true"}, c.ada()).code, 2);
  EXPECT_EQ(c.run({"submit", "--gpus", "8", "--time", "forever", "--", "true"}, c.ada()).code, 2);
  auto r = c.run({"submit", "--nodes", "1", "--gpus-per-node", "9", "--", "true"}, c.ada());
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("gpus_per_node=9"), std::string::npos) << r.err;
  for (const char* gpus : {"0", "-3", "2.5", "eight", "-99999999999999999999"}) {
    auto zero = c.run({"submit", "--gpus", gpus, "--", "true"}, c.ada());
    EXPECT_EQ(zero.code, 2) << gpus;
    EXPECT_NE(zero.err.find(std::string("--gpus: must be a whole number of at least 1, not ") + gpus),
              std::string::npos)
        << zero.err;
  }
  auto huge = c.run({"submit", "--gpus", "99999999999999999999", "--", "true"}, c.ada());
  EXPECT_EQ(huge.code, 2);
  EXPECT_NE(huge.err.find("--gpus: 99999999999999999999 is too large (at most 2147483647)"),
            std::string::npos)
      << huge.err;
  write_text(c.file("typo.json"), R"({"gpu": 8, "command": ["true"]})");
  auto typo = c.run({"submit", c.file("typo.json")}, c.ada());
  EXPECT_EQ(typo.code, 2);
  EXPECT_NE(typo.err.find("did you mean"), std::string::npos) << typo.err;
}

void CliJobs::UnreachableSchedulerExits1WithTheReason() {
  SCOPED_TRACE("UnreachableSchedulerExits1WithTheReason");
  auto env = c.env(c.ada());
  env["RAILYARD_URL"] = "http://127.0.0.1:1";
  auto r = run_cli(RAILYARD_BIN, {"queue"}, env);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("railyard: cannot reach the scheduler at http://127.0.0.1:1: connection refused"),
            std::string::npos)
      << r.err;
}

// A server that takes the connection (the kernel's backlog does) and never answers: --timeout ends the wait.
void CliJobs::SilentSchedulerTimesOutWithTheReason() {
  SCOPED_TRACE("SilentSchedulerTimesOutWithTheReason");
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), len), 0);
  ASSERT_EQ(::listen(fd, 4), 0);
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const std::string url = "http://127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
  auto r = run_cli(RAILYARD_BIN, {"queue", "--url", url, "--timeout", "0.5"}, c.env(c.ada()));
  auto s = run_cli(RAILYARD_BIN, {"submit", "--url", url, "--timeout", "0.5", "--gpus", "1", "--", "true"},
                   c.env(c.ada()));
  ::close(fd);
  for (const auto& x : {r, s}) {
    EXPECT_EQ(x.code, 1);
    EXPECT_NE(x.err.find("railyard: cannot reach the scheduler at " + url + ": timed out"), std::string::npos)
        << x.err;
  }
}

void CliJobs::JsonJobFileIsSubmittedAsWritten() {
  SCOPED_TRACE("JsonJobFileIsSubmittedAsWritten");
  write_text(c.file("job.json"),
             R"({"name": "from-file", "nodes": 2, "gpus_per_node": 4, "launcher": "env", "command": ["train"]})");
  const std::string id = submit({"submit", c.file("job.json")}, c.ada());
  auto j = c.run({"show", id, "--json"}, "").json()["job"];
  EXPECT_EQ(j["name"], "from-file");
  EXPECT_EQ(j["gpus"], 8);
  EXPECT_EQ(j["spec"]["launcher"], "env");
}

void CliJobs::SbatchScriptIsImportedWithWarningsOnStderr() {
  SCOPED_TRACE("SbatchScriptIsImportedWithWarningsOnStderr");
  write_text(c.file("train.sbatch"), "#!/bin/bash\n#SBATCH --job-name=resnet\n#SBATCH --nodes=2\n"
                                     "#SBATCH --gres=gpu:h100:8\n#SBATCH --time=01:30:00\n"
                                     "#SBATCH --mail-type=END\nsrun python train.py\n");
  auto r = c.run({"submit", c.file("train.sbatch")}, c.ada());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("line 6"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("mail-type"), std::string::npos) << r.err;
  auto j = c.run({"show", trimmed(r.out), "--json"}, "").json()["job"];
  EXPECT_EQ(j["name"], "resnet");
  EXPECT_EQ(j["gpus"], 16);
  EXPECT_EQ(j["gpu_type"], "H100");
  EXPECT_EQ(j["spec"]["time_limit"], 5400);
  EXPECT_EQ(j["spec"]["command"][0], "/bin/bash");
  write_text(c.file("bad.sbatch"), "#!/bin/bash\n#SBATCH --nodes=abc\nhostname\n");
  auto bad = c.run({"submit", c.file("bad.sbatch")}, c.ada());
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("line 2"), std::string::npos) << bad.err;
}

void CliJobs::LogsOfAnotherUsersJobOrAnUnknownJobExit3() {
  SCOPED_TRACE("LogsOfAnotherUsersJobOrAnUnknownJobExit3");
  const std::string id = submit({"submit", "--gpus", "8", "--", "true"}, c.ada());
  auto r = c.run({"logs", id}, c.bob());
  if (r.err.find("does not serve") != std::string::npos) return void(skip_part() << "logs route not served yet: " << r.err << "\n");
  EXPECT_EQ(r.code, 3) << r.err;
  EXPECT_EQ(c.run({"logs", "999"}, c.ada()).code, 3);
}

void CliJobs::HistoryJsonParsesBack() {
  SCOPED_TRACE("HistoryJsonParsesBack");
  submit({"submit", "--gpus", "8", "--", "true"}, c.ada());
  auto r = c.run({"history", "--json", "--by", "project"}, "");
  if (r.err.find("does not serve") != std::string::npos) return void(skip_part() << "accounting route not served yet" << "\n");
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = r.json();
  EXPECT_EQ(j["by"], "project");
  EXPECT_TRUE(j["rows"].is_array());
  EXPECT_EQ(c.run({"history", "--since", "yesterday"}, "").code, 2);
}

void CliJobs::WatchOncePrintsTheTargetLine() {
  SCOPED_TRACE("WatchOncePrintsTheTargetLine");
  const std::string id = submit({"submit", "--gpus", "8", "--target", "accuracy=0.95", "--", "true"}, c.ada());
  auto r = c.run({"watch", id, "--once"}, "");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("eval_accuracy - / 0.95"), std::string::npos) << r.out;
}

void CliJobs::DependenciesAreSentAndShownAsWritten() {
  SCOPED_TRACE("DependenciesAreSentAndShownAsWritten");
  const std::string x = submit({"submit", "--gpus", "8", "--", "true"}, c.ada());
  const std::string arr = submit({"submit", "--gpus", "8", "--array", "0-3", "--", "true"}, c.ada());
  const std::string id = submit({"submit", "--gpus", "8", "-d", "afterany:" + x + ",afterok:" + x,
                                 "--dependency", "afterok:" + arr + "_2", "--", "true"},
                                c.ada());
  auto j = c.run({"show", id, "--json"}, "").json()["job"];
  EXPECT_EQ(j["spec"]["afterok"], nlohmann::json::array({std::stoi(x)}));
  EXPECT_EQ(j["spec"]["after"], nlohmann::json::array({"afterany:" + x, "afterok:" + arr + "_2"}));
  auto text = c.run({"show", id}, "");
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.out.find("afterok:" + x + ", afterany:" + x + ", afterok:" + arr + "_2"), std::string::npos)
      << text.out;
  auto unsupported = c.run({"submit", "--gpus", "8", "-d", "singleton", "--", "true"}, c.ada());
  EXPECT_EQ(unsupported.code, 2);
  EXPECT_NE(unsupported.err.find("\"singleton\" is not supported"), std::string::npos) << unsupported.err;
  auto no_task = c.run({"submit", "--gpus", "8", "-d", "afterok:" + x + "_1", "--", "true"}, c.ada());
  EXPECT_EQ(no_task.code, 2);
  EXPECT_NE(no_task.err.find("job " + x + " is not an array"), std::string::npos) << no_task.err;
  c.run({"cancel", id, x, arr}, c.ada());  // room for the parts after this one
}

void CliJobs::ContainerFlagsAreSentAndShown() {
  SCOPED_TRACE("ContainerFlagsAreSentAndShown");
  const std::string id = submit(
      {"submit", "--gpus", "8", "--workdir", "/tmp", "--image", "nvcr.io#nvidia/pytorch:24.04-py3", "--mount",
       "/lustre/imagenet:/data:ro", "--mount", "/scratch:/scratch", "--container-name", "pt", "--", "true"},
      c.ada());
  auto j = c.run({"show", id, "--json"}, "").json()["job"];
  EXPECT_EQ(j["spec"]["container"], nlohmann::json::parse(R"({"image": "nvcr.io/nvidia/pytorch:24.04-py3",
              "mounts": ["/lustre/imagenet:/data:ro", "/scratch:/scratch"], "workdir": "", "writable": false,
              "name": "pt"})"));
  auto text = c.run({"show", id}, "");
  ASSERT_EQ(text.code, 0) << text.err;
  for (const char* line :
       {"  image           nvcr.io/nvidia/pytorch:24.04-py3\n",
        "  mounts          /lustre/imagenet:/data:ro, /scratch:/scratch\n",
        "  container dir   /tmp (the job's workdir)\n",
        "  root fs         read-only (/tmp, /run, /var/tmp writable)\n", "  container name  pt\n"})
    EXPECT_NE(text.out.find(line), std::string::npos) << line << text.out;
  // A job file's container, with --container-writable over it; a script's from pyxis' directives.
  write_text(c.file("boxed.json"), R"({"gpus": 8, "command": ["true"], "container": {"image": "ubuntu"}})");
  const std::string file = submit({"submit", "--container-writable", c.file("boxed.json")}, c.ada());
  EXPECT_EQ(c.run({"show", file, "--json"}, "").json()["job"]["spec"]["container"]["writable"], true);
  write_text(c.file("boxed.sbatch"),
             "#!/bin/bash\n#SBATCH -G 8 -t 5\n#SBATCH --container-image=ubuntu:22.04 "
             "--container-mounts=/lustre\nhostname\n");
  const std::string script = submit({"submit", c.file("boxed.sbatch")}, c.ada());
  EXPECT_EQ(c.run({"show", script, "--json"}, "").json()["job"]["spec"]["container"]["mounts"],
            nlohmann::json::array({"/lustre:/lustre"}));
  // `railyard sbatch` with pyxis' options on its command line: they override the script's.
  auto sb = c.run({"sbatch", "--parsable", "--container-image=nvcr.io#nvidia/pytorch:24.04-py3",
                   "--container-writable", c.file("boxed.sbatch")},
                  c.ada());
  ASSERT_EQ(sb.code, 0) << sb.err;
  const std::string sbatched = trimmed(sb.out);
  auto boxed = c.run({"show", sbatched, "--json"}, "").json()["job"]["spec"]["container"];
  EXPECT_EQ(boxed["image"], "nvcr.io/nvidia/pytorch:24.04-py3");
  EXPECT_EQ(boxed["mounts"], nlohmann::json::array({"/lustre:/lustre"})) << "the script's";
  EXPECT_EQ(boxed["writable"], true);
  auto bad =
      c.run({"submit", "--gpus", "8", "--image", "ubuntu", "--mount", "/lustre:data", "--", "true"}, c.ada());
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("--mount \"/lustre:data\": target \"data\": not an absolute path"),
            std::string::npos)
      << bad.err;
  auto orphan = c.run({"submit", "--gpus", "8", "--mount", "/a:/b", "--", "true"}, c.ada());
  EXPECT_EQ(orphan.code, 2);
  EXPECT_NE(orphan.err.find("need --image IMAGE"), std::string::npos) << orphan.err;
  c.run({"cancel", id, file, script, sbatched}, c.ada());
}

// One daemon per test process (each costs seconds under ASan on a busy machine): the parts share it,
// placement-dependent parts first, the one that fills the pod last.
TEST_F(CliJobs, HappyPaths) {
  ShowGivesPlacementSpanAndCostEstimate();
  SubmitPrintsTheIdAloneAndQueueJsonParsesBack();
  QueueTableFiltersByUserAndState();
  JsonJobFileIsSubmittedAsWritten();
  SbatchScriptIsImportedWithWarningsOnStderr();
  ShowListsTheStateHistoryWhenTheSchedulerServesIt();
  HistoryJsonParsesBack();
  WatchOncePrintsTheTargetLine();
  DependenciesAreSentAndShownAsWritten();
  ContainerFlagsAreSentAndShown();
  HoldAndReleaseAPendingJob();
}

TEST_F(CliJobs, ErrorPathsExitCodes) {
  UnknownJobExits3();
  CancellingAnotherUsersJobExits3AndLeavesItAlone();
  BadFlagsAndBadSpecsExit2();
  UnreachableSchedulerExits1WithTheReason();
  SilentSchedulerTimesOutWithTheReason();
  LogsOfAnotherUsersJobOrAnUnknownJobExit3();
}

// main() registers only the command groups a call needs (issue 11): every command must still be found, and
// help, errors and --version must not depend on which groups were registered.
TEST(CliStartup, EveryCommandIsFoundAndHelpListsThemAll) {
  const std::map<std::string, std::string> env{{"HOME", "/nonexistent"}};
  auto help = run_cli(RAILYARD_BIN, {"--help"}, env);
  ASSERT_EQ(help.code, 0) << help.err;
  std::vector<std::string> names;
  const std::regex command_line("\n  ([a-z]+)  +");  // "  submit      Submit a job: ..."
  for (std::sregex_iterator it(help.out.begin(), help.out.end(), command_line), end; it != end; ++it)
    names.push_back((*it)[1]);
  for (const char* want : {"submit", "queue", "logs", "nodes", "token", "up", "down", "topo", "sim"})
    EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want << " missing from\n" << help.out;
  for (const auto& name : names) {
    auto r = run_cli(RAILYARD_BIN, {name, "--help"}, env);
    EXPECT_EQ(r.code, 0) << name << ": " << r.err;
    EXPECT_NE(r.out.find("railyard " + name), std::string::npos) << name << ": " << r.out;
  }
  auto version = run_cli(RAILYARD_BIN, {"--version"}, env);
  EXPECT_EQ(version.code, 0);
  EXPECT_TRUE(std::regex_match(version.out, std::regex("railyard [0-9]+\\.[0-9]+\\.[0-9]+\n"))) << version.out;
  auto none = run_cli(RAILYARD_BIN, {}, env);
  EXPECT_EQ(none.code, 2);
  EXPECT_NE(none.err.find("A subcommand is required"), std::string::npos) << none.err;
  auto typo = run_cli(RAILYARD_BIN, {"sumbit", "--gpus", "1"}, env);
  EXPECT_EQ(typo.code, 2);
  EXPECT_NE(typo.err.find("A subcommand is required"), std::string::npos) << typo.err;
}

}  // namespace
}  // namespace railyard::testing
