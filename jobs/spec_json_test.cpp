#include "jobs/spec_json.hpp"

#include <gtest/gtest.h>

#include <string>

namespace railyard::jobs {
namespace {

using nlohmann::json;

constexpr const char* kExample = R"({
  "name": "llama-70b-pretrain",
  "user": "ada",
  "project": "llm",
  "kind": "batch",
  "nodes": 32,
  "gpus_per_node": 8,
  "gpu_type": "h100",
  "features": ["ib-ndr"],
  "layout": "pack",
  "exclusive": true,
  "time_limit": "2-00:00:00",
  "qos": "high",
  "priority": 10,
  "launcher": "env",
  "command": ["python", "train.py", "--config", "70b.yaml"],
  "env": {"NCCL_DEBUG": "WARN"},
  "workdir": "/home/ada/llama",
  "container": {"image": "nvcr.io/nvidia/pytorch:24.04-py3", "mounts": ["/lustre/llm:/data:ro"]},
  "requeue": true,
  "target": {"metric": "eval_accuracy", "value": 0.72},
  "afterok": [41],
  "dependency": "afterok:42:41"
})";

TEST(SpecJson, ReadsTheReadmeExample) {
  auto r = parse_job_spec_text(kExample);
  ASSERT_TRUE(r) << r.error().message;
  const JobSpec& s = *r;
  EXPECT_EQ(s.name, "llama-70b-pretrain");
  EXPECT_EQ(s.user, "ada");
  EXPECT_EQ(s.project, "llm");
  EXPECT_EQ(s.kind, JobKind::kBatch);
  EXPECT_EQ(s.total_gpus(), 256);
  EXPECT_EQ(s.gpu_type, "H100");  // upper-cased
  EXPECT_EQ(s.features, std::vector<std::string>{"ib-ndr"});
  EXPECT_EQ(s.layout, Layout::kPack);
  EXPECT_TRUE(s.exclusive);
  EXPECT_EQ(s.time_limit_s, 2 * 86400);
  EXPECT_EQ(s.qos, Qos::kHigh);
  EXPECT_EQ(s.priority, 10);
  EXPECT_EQ(s.launcher, Launcher::kEnv);
  EXPECT_EQ(s.command.size(), 4u);
  EXPECT_EQ(s.env.at("NCCL_DEBUG"), "WARN");
  EXPECT_EQ(s.workdir, "/home/ada/llama");
  ASSERT_TRUE(s.container);
  EXPECT_EQ(s.container->image, "nvcr.io/nvidia/pytorch:24.04-py3");
  EXPECT_EQ(s.container->mounts, (std::vector<Mount>{{"/lustre/llm", "/data", true}}));
  EXPECT_TRUE(s.requeue);
  ASSERT_TRUE(s.target);
  EXPECT_DOUBLE_EQ(s.target->value, 0.72);
  EXPECT_EQ(s.afterok, (std::vector<JobId>{41, 42}));  // merged with "dependency", duplicates dropped
}

TEST(SpecJson, DependenciesOfEveryKindAreSortedIntoAfterokAndAfter) {
  auto r =
      parse_job_spec_text(R"({"user": "ada", "gpus": 1, "command": "true", "array": "0-3", "afterok": [41],
    "after": ["afterok:43", "afterany:40", "afterok:12_3", "afterany:40"],
    "dependency": "afterok:41,aftercorr:50,afternotok:44"})");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->afterok, (std::vector<JobId>{41, 43}));
  using T = Dependency::Type;
  EXPECT_EQ(r->after,
            (std::vector<Dependency>{
                {T::kAfterAny, 40}, {T::kAfterOk, 12, 3}, {T::kAfterCorr, 50}, {T::kAfterNotOk, 44}}));
  const json j = to_json(*r);
  EXPECT_EQ(j["after"], json({"afterany:40", "afterok:12_3", "aftercorr:50", "afternotok:44"}));
  EXPECT_EQ(j["afterok"], json({41, 43}));
  EXPECT_FALSE(to_json(JobSpec{}).contains("after"));  // written only when there are some
}

TEST(SpecJson, DefaultsForAMinimalSpec) {
  auto r = parse_job_spec_text(R"({"user": "ada", "gpus": 8, "command": "python train.py"})");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->kind, JobKind::kBatch);
  EXPECT_EQ(r->time_limit_s, 3600);
  EXPECT_EQ(r->qos, Qos::kNormal);
  EXPECT_EQ(r->layout, Layout::kAuto);
  EXPECT_EQ(r->replicas, 1);
  EXPECT_FALSE(r->target);
  EXPECT_EQ(r->command, (std::vector<std::string>{"/bin/sh", "-c", "python train.py"}));
}

TEST(SpecJson, Normalizes) {
  auto r = parse_job_spec_text(R"({"user": "a", "kind": "service", "mig": "1G.10GB", "gpu_type": "Any"})");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->mig, "1g.10gb");
  EXPECT_EQ(r->gpus, 1);  // a MIG job without "gpus" takes one slice
  EXPECT_EQ(r->gpu_type, "");
}

struct ErrorCase {
  std::string text;
  std::string expected;  // a substring of the error
};

std::string nested_arrays(int levels) { return std::string(levels, '[') + std::string(levels, ']'); }

std::string long_command(size_t n) {
  json j = {{"command", json::array()}};
  for (size_t i = 0; i < n; ++i) j["command"].push_back("x");
  return j.dump();
}

std::string many_env(size_t n) {
  json j = {{"env", json::object()}};
  for (size_t i = 0; i < n; ++i) j["env"]["V" + std::to_string(i)] = "1";
  return j.dump();
}

std::string many_mounts(size_t n) {
  json j = {{"container", {{"image", "ubuntu"}, {"mounts", json::array()}}}};
  for (size_t i = 0; i < n; ++i) j["container"]["mounts"].push_back("/src:/m" + std::to_string(i));
  return j.dump();
}

TEST(SpecJson, EveryParseErrorNamesItsField) {
  const std::vector<ErrorCase> cases = {
      {"{", "invalid JSON: parse error at line 1, column 2"},
      {"", "invalid JSON"},
      {"{\"name\": \"\xff\"}", "invalid JSON"},
      {"[1, 2]", "job spec: expected a JSON object, got an array"},
      {R"({"gpu": 8})", R"(unknown field "gpu" (did you mean "gpus"?))"},
      {R"({"nmae": "x"})", R"(unknown field "nmae" (did you mean "name"?))"},
      {R"({"zzzzzzzz": 1})", R"(unknown field "zzzzzzzz")"},
      {R"({"gpus": "8"})", R"(gpus: expected an integer, got string "8")"},
      {R"({"gpus": 8.5})", "gpus: expected an integer, got number 8.5"},
      {R"({"nodes": 10000000000})", "nodes: 10000000000 is out of range"},
      {R"({"gpus": 18446744073709551615})", "gpus: 18446744073709551615 is out of range"},
      {R"({"replicas": null})", "replicas: expected an integer, got null"},
      {R"({"kind": "bach"})", R"(kind: expected "batch" or "service", got "bach" (did you mean "batch"?))"},
      {R"({"layout": 3})", R"(layout: expected "auto", "pack" or "spread", got integer 3)"},
      {R"({"qos": "urgent"})", R"(qos: expected "high", "normal" or "scavenger", got "urgent")"},
      {R"({"launcher": "torchrun"})", R"(launcher: expected "none", "env" or "mpi")"},
      {R"({"exclusive": "yes"})", R"(exclusive: expected true or false, got string "yes")"},
      {R"({"command": 5})", "command: expected an array of strings or a shell command string, got integer 5"},
      {R"({"command": ["a", 1]})", "command[1]: expected a string, got integer 1"},
      {R"({"features": "ib"})", "features: expected an array of strings"},
      {R"({"env": {"A": 1}})", "env.A: expected a string, got integer 1"},
      {R"({"env": []})", "env: expected an object of strings, got an array"},
      {R"({"time_limit": "1:2:3:4"})", R"(time_limit "1:2:3:4": expected HH:MM:SS)"},
      {R"({"time_limit": "90"})", "a bare number is ambiguous"},
      {R"({"time_limit": "2x"})", R"(time_limit "2x": expected a number with a unit)"},
      {R"({"time_limit": 1.5})", "time_limit: expected seconds (an integer)"},
      {R"({"target": 0.9})", "target: expected an object"},
      {R"({"target": {"metric": "x"}})", "target.value: missing"},
      {R"({"target": {"value": "high"}})", "target.value: expected a number"},
      {R"({"target": {"valeu": 1}})", R"(target: unknown field "valeu" (did you mean "value"?))"},
      {R"({"afterok": [1, "2"]})", R"(afterok[1]: expected an integer, got string "2")"},
      {R"({"afterok": 3})", "afterok: expected an array of job ids"},
      {R"({"dependency": "singleton"})",
       R"(dependency "singleton": dependency type "singleton" is not supported (afterok, afterany, afternotok and aftercorr are))"},
      {R"({"after": "afterany:3"})",
       R"(after: expected an array of strings like "afterany:40" or "afterok:12_3")"},
      {R"({"after": [3]})", R"(after[0]: expected a string like "afterany:40", got integer 3)"},
      {R"({"after": ["afterany:3", "afterany:4:5"]})",
       R"(after[1] "afterany:4:5": job id "4:5" is not a positive integer)"},
      {R"({"after": ["aftercorr:3_1"]})",
       R"(after[0] "aftercorr:3_1": aftercorr takes a whole array (aftercorr:3), not one task ("3_1"))"},
      {R"({"dependency": "afterok:x"})", R"(dependency "afterok:x": job id "x" is not a positive integer)"},
      {R"({"gpus": 1, "gpus": 2})", R"(duplicate key "gpus")"},
      {R"({"env": {"A": "1", "A": "2"}})", R"(duplicate key "A")"},
      {"{\"x\": " + nested_arrays(32) + "}", "job spec: nested deeper than 32 levels"},
      {long_command(10'001), "command: 10001 entries; at most 10000 allowed"},
      {many_env(10'001), "env: 10001 entries; at most 10000 allowed"},
      {std::string(kMaxSpecTextBytes + 1, ' '), "job spec: 1048577 bytes; at most 1048576 allowed"},
      {R"({"container": "ubuntu"})",
       R"(container: expected an object {"image": ..., "mounts": [...], ...}, got string "ubuntu")"},
      {R"({"container": {}})",
       R"(container.image: missing (the image to run in, e.g. "nvcr.io/nvidia/pytorch:24.04-py3"))"},
      {R"({"container": {"image": "ubuntu", "mount": []}})",
       R"(container: unknown field "mount" (did you mean "mounts"?))"},
      {R"({"container": {"image": 5}})",
       R"(container.image: expected a string like "nvcr.io/nvidia/pytorch:24.04-py3", got integer 5)"},
      {R"({"container": {"image": ""}})", R"(container.image "": empty: name an image)"},
      {R"({"container": {"image": "nvcr.io/nvidia/pytorch 24.04"}})",
       R"(container.image "nvcr.io/nvidia/pytorch 24.04": contains a space or a control character)"},
      {R"({"container": {"image": "docker-archive:img.tar"}})",
       R"(container.image "docker-archive:img.tar": docker-archive: needs the archive's absolute path on the node)"},
      {R"({"container": {"image": "a#b#c"}})", R"(container.image "a#b#c": more than one '#')"},
      {R"({"container": {"image": "ubuntu", "mounts": "/a:/b"}})",
       R"(container.mounts: expected an array of strings like "/lustre:/data:ro", got string "/a:/b")"},
      {R"({"container": {"image": "ubuntu", "mounts": ["/a:/b", 3]}})",
       R"(container.mounts[1]: expected a string like "/lustre:/data:ro", got integer 3)"},
      {R"({"container": {"image": "ubuntu", "mounts": ["/lustre"]}})",
       R"(container.mounts[0] "/lustre": expected SRC:DST, SRC:DST:ro or SRC:DST:rw)"},
      {R"({"container": {"image": "ubuntu", "mounts": ["lustre:/data"]}})",
       R"(container.mounts[0] "lustre:/data": source "lustre": not an absolute path)"},
      {R"({"container": {"image": "ubuntu", "mounts": ["/lustre:data"]}})",
       R"(container.mounts[0] "/lustre:data": target "data": not an absolute path)"},
      {R"({"container": {"image": "ubuntu", "mounts": ["/a/../etc:/data"]}})", R"(has a ".." component)"},
      {R"({"container": {"image": "ubuntu", "mounts": [":/data"]}})", R"(source "": empty)"},
      {R"({"container": {"image": "ubuntu", "mounts": ["/a:/"]}})",
       R"(target "/": cannot mount over the container's root)"},
      {R"({"container": {"image": "ubuntu", "mounts": ["/a:/b:rbind"]}})",
       R"(option "rbind": expected ro or rw)"},
      {R"({"container": {"image": "ubuntu", "mounts": ["/a:/data", "/b:/data:ro"]}})",
       R"(container.mounts: two mounts at "/data" ("/a:/data" and "/b:/data:ro"))"},
      {many_mounts(65), "container.mounts: 65 entries; at most 64 allowed"},
      {R"({"container": {"image": "ubuntu", "workdir": "workspace"}})",
       R"(container.workdir "workspace": not an absolute path)"},
      {R"({"container": {"image": "ubuntu", "workdir": 1}})",
       "container.workdir: expected a string, got integer 1"},
      {R"({"container": {"image": "ubuntu", "writable": "yes"}})",
       R"(container.writable: expected true or false, got string "yes")"},
      {R"({"container": {"image": "ubuntu", "name": "a b"}})",
       R"(container.name "a b": only letters, digits)"},
  };
  for (const ErrorCase& c : cases) {
    auto r = parse_job_spec_text(c.text);
    ASSERT_FALSE(r) << c.text.substr(0, 80);
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument) << c.text.substr(0, 80);
    EXPECT_NE(r.error().message.find(c.expected), std::string::npos)
        << "input: " << c.text.substr(0, 80) << "\nerror: " << r.error().message
        << "\nwanted: " << c.expected;
  }
}

// The strict reader every submit path shares (issue 32): a repeated key is found at any depth and named by
// where it is, and the first repeat is the one reported.
TEST(SpecJson, StrictReaderNamesWhereAKeyRepeats) {
  const std::pair<std::string, std::string> cases[] = {
      {R"({"a": 1, "a": 2})", R"(duplicate key "a" (each field may appear once))"},
      {R"({"jobs": [{"gpus": 1}, {"gpus": 1, "gpus": 2}]})", R"(jobs[1]: duplicate key "gpus")"},
      {R"({"jobs": [1, "x", {"env": {"A": "1", "A": "2"}}]})", R"(jobs[2].env: duplicate key "A")"},
      {R"([[{"x": 1}], [{"x": 1, "x": 2}]])", R"([1][0]: duplicate key "x")"},
      {R"({"jobs": [{"a": 1, "a": 2}], "jobs": []})", R"(jobs[0]: duplicate key "a")"},
  };
  for (const auto& [text, want] : cases) {
    auto r = parse_json_text(text, 1 << 20, kMaxJsonDepth, "request body");
    ASSERT_FALSE(r) << text;
    EXPECT_EQ(r.error().message.rfind(want, 0), 0u) << text << "\n" << r.error().message;
  }
  auto fine =
      parse_json_text(R"({"jobs": [{"a": 1}, {"a": 2}], "b": {"a": 3}})", 1 << 20, kMaxJsonDepth, "body");
  ASSERT_TRUE(fine) << fine.error().message;
  EXPECT_EQ((*fine)["jobs"][1]["a"], 2);
  EXPECT_EQ(parse_json_text("{}", 1, kMaxJsonDepth, "request body").error().message,
            "request body: 2 bytes; at most 1 allowed");
}

TEST(SpecJson, DepthLimitIsExact) {
  // 32 levels in all (the spec object plus 31 arrays) parse; the unknown field is then the only problem.
  auto r = parse_job_spec_text("{\"x\": " + nested_arrays(31) + "}");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, R"(unknown field "x")");
  json deep = json::array();
  for (int i = 0; i < 40; ++i) deep = json::array({deep});
  auto d = parse_job_spec(json{{"command", deep}});
  ASSERT_FALSE(d);
  EXPECT_EQ(d.error().message, "job spec: nested deeper than 32 levels");
}

TEST(SpecJson, ReportsAllProblemsAtOnce) {
  auto r = parse_job_spec_text(R"({"gpu": 1, "kind": 3, "env": {"A": false}})");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message,
            R"(env.A: expected a string, got false; unknown field "gpu" (did you mean "gpus"?); )"
            R"(kind: expected "batch" or "service", got integer 3)");
}

TEST(SpecJson, TimeLimitForms) {
  const std::vector<std::pair<std::string, int64_t>> cases = {
      {"3600", 3600},
      {"\"01:30:00\"", 5400},
      {"\"30:00\"", 1800},
      {"\"1-00:00:00\"", 86400},
      {"\"90m\"", 5400},
      {"\"2h\"", 7200},
      {"\"1h30m\"", 5400},
      {"\"45s\"", 45},
      {"\"1d\"", 86400},
      {"\"unlimited\"", 0},
      {"0", 0},
      {"-5", -5},  // validate refuses
  };
  for (const auto& [text, seconds] : cases) {
    auto r = parse_job_spec_text("{\"time_limit\": " + text + "}");
    ASSERT_TRUE(r) << text << ": " << r.error().message;
    EXPECT_EQ(r->time_limit_s, seconds) << text;
  }
}

JobSpec full_spec() {
  JobSpec s;
  s.name = "svc";
  s.user = "grace";
  s.project = "inference";
  s.kind = JobKind::kService;
  s.gpus = 1;
  s.replicas = 4;
  s.gpu_type = "A100";
  s.mig = "3g.40gb";
  s.features = {"nvme", "ib-hdr"};
  s.layout = Layout::kSpread;
  s.mem_mb = 65536;
  s.time_limit_s = 0;
  s.qos = Qos::kScavenger;
  s.priority = -20;
  s.launcher = Launcher::kMpi;
  s.command = {"serve", "--port", "8000", "quote\"and\\back\nslash"};
  s.env = {{"A", "1"}, {"B", "two words"}};
  s.workdir = "/srv";
  s.requeue = true;
  s.target = Target{"eval_loss", 1.25};
  s.afterok = {7, 3};
  s.after = {{Dependency::Type::kAfterAny, 40}, {Dependency::Type::kAfterOk, 12, 3}};
  s.container = ContainerSpec{"nvcr.io/nvidia/pytorch:24.04-py3",
                              {{"/lustre/ada", "/data", true}, {"/scratch", "/scratch", false}},
                              "/workspace",
                              true,
                              "pt-24.04"};
  return s;
}

TEST(SpecJson, RoundTrips) {
  for (const JobSpec& original : {full_spec(), JobSpec{}}) {
    json j = to_json(original);
    auto back = parse_job_spec_text(j.dump(2));
    ASSERT_TRUE(back) << back.error().message;
    EXPECT_EQ(to_json(*back), j);
    EXPECT_EQ(back->command, original.command);
    EXPECT_EQ(back->env, original.env);
    EXPECT_EQ(back->afterok, original.afterok);
    EXPECT_EQ(back->after, original.after);
    EXPECT_EQ(back->target.has_value(), original.target.has_value());
    EXPECT_EQ(back->container, original.container);
  }
  json j = to_json(full_spec());
  EXPECT_EQ(j["kind"], "service");
  EXPECT_EQ(j["time_limit"], 0);
  EXPECT_EQ(j["target"]["metric"], "eval_loss");
  EXPECT_FALSE(to_json(JobSpec{}).contains("target"));
  EXPECT_FALSE(to_json(JobSpec{}).contains("container"));  // a host process: written only when set
}

// The container as pyxis users write it is read normalized; what to_json writes back is that normal form,
// which reads back unchanged (the launch order carries it to the agents so).
TEST(SpecJson, ContainerIsReadNormalizedAndWrittenBackExactly) {
  auto r = parse_job_spec_text(R"({"user": "ada", "gpus": 8, "command": "python train.py", "container": {
    "image": "nvcr.io#nvidia/pytorch:24.04-py3",
    "mounts": ["/lustre/ada//data/:/data:ro", "/scratch:/scratch:rw"],
    "workdir": "/workspace", "writable": true, "name": "pt"}})");
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_TRUE(r->container);
  const ContainerSpec& c = *r->container;
  EXPECT_EQ(c.image, "nvcr.io/nvidia/pytorch:24.04-py3");
  EXPECT_EQ(c.mounts,
            (std::vector<Mount>{{"/lustre/ada/data", "/data", true}, {"/scratch", "/scratch", false}}));
  EXPECT_EQ(c.workdir, "/workspace");
  EXPECT_TRUE(c.writable);
  EXPECT_EQ(c.name, "pt");
  const json j = to_json(*r);
  EXPECT_EQ(j["container"], json::parse(R"({"image": "nvcr.io/nvidia/pytorch:24.04-py3",
    "mounts": ["/lustre/ada/data:/data:ro", "/scratch:/scratch"], "workdir": "/workspace", "writable": true,
    "name": "pt"})"));
  auto back = parse_job_spec_text(j.dump());
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(back->container, r->container);
  EXPECT_EQ(to_json(*back), j);

  auto minimal = parse_job_spec_text(R"({"container": {"image": "ubuntu"}})");
  ASSERT_TRUE(minimal) << minimal.error().message;
  EXPECT_EQ(minimal->container, (ContainerSpec{"ubuntu", {}, "", false, ""}));
  EXPECT_FALSE(parse_job_spec_text("{}")->container);
}

// A container's problems come with the spec's others, all at once.
TEST(SpecJson, ContainerProblemsAreReportedWithTheRest) {
  auto r = parse_job_spec_text(
      R"({"gpus": "8", "container": {"image": "a b", "mounts": ["/x:y", "/a:/d", "/b:/d"], "workdir": "w"}})");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message,
            R"(container.image "a b": contains a space or a control character; )"
            R"(container.mounts[0] "/x:y": target "y": not an absolute path; )"
            R"(container.mounts: two mounts at "/d" ("/a:/d" and "/b:/d"); )"
            R"(container.workdir "w": not an absolute path; gpus: expected an integer, got string "8")");
}

TEST(SpecJson, FieldListMatchesToJson) {
  JobSpec full = full_spec();
  full.array = ArraySpec{{{0, 3, 1}}, 0};  // only arrays and their tasks have these fields
  full.array_job = 7;
  full.array_task = 2;
  json j = to_json(full);
  for (std::string_view f : job_spec_fields()) {
    if (f == "dependency") continue;  // an input alias of afterok
    EXPECT_TRUE(j.contains(f)) << f;
  }
  EXPECT_EQ(j.size(), job_spec_fields().size() - 1);
}

// The stored text (to_json(s).dump()) reads back to the same spec on every kind of value: escapes, control
// characters, non-ASCII text, every enum, empty and full lists, negative numbers.
TEST(SpecJson, StoredTextReadsBackToTheSameSpec) {
  JobSpec task = full_spec();
  task.array_job = 12;
  task.array_task = 9999999;
  JobSpec array = full_spec();
  array.array = parse_array_spec("0-9:3,12%2").value();
  std::vector<JobSpec> specs = {JobSpec{}, full_spec(), task, array};
  JobSpec odd = full_spec();
  odd.name = std::string("tab\there\x01\x1f\x7f") + "\xc3\xa9t\xc3\xa9 \xe2\x9c\x93";  // "été ✓"
  odd.env = {{"K\"ey", "v\\al"}, {"\xce\xbb", "/path with spaces"}};
  odd.features = {};
  odd.afterok = {1, 9'000'000'000};
  odd.priority = -1000;
  odd.time_limit_s = 7 * 24 * 3600;
  odd.target = Target{"top1", 0.759};
  specs.push_back(odd);
  for (auto kind : {JobKind::kBatch, JobKind::kService})
    for (auto layout : {Layout::kAuto, Layout::kPack, Layout::kSpread})
      for (auto qos : {Qos::kHigh, Qos::kNormal, Qos::kScavenger})
        for (auto launcher : {Launcher::kNone, Launcher::kEnv, Launcher::kMpi}) {
          JobSpec s;
          s.kind = kind;
          s.layout = layout;
          s.qos = qos;
          s.launcher = launcher;
          s.exclusive = launcher == Launcher::kMpi;
          s.requeue = qos == Qos::kHigh;
          specs.push_back(s);
        }
  for (const JobSpec& s : specs) {
    auto back = parse_job_spec_text(to_json(s).dump());
    ASSERT_TRUE(back) << back.error().message << " in " << to_json(s).dump();
    EXPECT_EQ(to_json(*back), to_json(s));
    EXPECT_EQ(back->name, s.name);
    EXPECT_EQ(back->env, s.env);
    EXPECT_EQ(back->afterok, s.afterok);
  }
}

}  // namespace
}  // namespace railyard::jobs
