// Trace reading and report arithmetic of the simulator (scheduler/sim).
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "scheduler/sim/report.hpp"
#include "scheduler/sim/synth.hpp"
#include "scheduler/sim/trace.hpp"

namespace railyard::sim {
namespace {

constexpr const char* kHeader = "job_id,submit_s,duration_s,num_gpus,user,status\n";

Result<Trace> read(const std::string& body, TraceOptions o = {}) {
  std::istringstream in(kHeader + body);
  return read_trace(in, o);
}

TEST(SimTrace, ReadsRowsAndSortsBySubmitThenFileOrder) {
  auto t = read("b,20,100,2,vc1,unknown\na,10,50.5,1,vc2,unknown\nc,10,7,8,vc1,\n");
  ASSERT_TRUE(t) << t.error().message;
  ASSERT_EQ(t->jobs.size(), 3u);
  EXPECT_EQ(t->jobs[0].job_id, "a");
  EXPECT_EQ(t->jobs[1].job_id, "c");
  EXPECT_EQ(t->jobs[2].job_id, "b");
  EXPECT_DOUBLE_EQ(t->jobs[0].duration_s, 50.5);
  EXPECT_EQ(t->jobs[0].line, 3);
  EXPECT_EQ(t->jobs[1].user, "vc1");
  EXPECT_EQ(t->skipped_rows, 0);
}

TEST(SimTrace, ScaleLoadLimitAndUserFilter) {
  TraceOptions o;
  o.scale_gpus = 8;
  o.load = 2;
  o.user = "vc1";
  o.limit = 2;
  auto t = read("a,10,5,1,vc1,x\nb,20,5,2,vc2,x\nc,30,5,4,vc1,x\nd,40,5,1,vc1,x\n", o);
  ASSERT_TRUE(t) << t.error().message;
  ASSERT_EQ(t->jobs.size(), 2u);
  EXPECT_EQ(t->jobs[0].job_id, "a");
  EXPECT_DOUBLE_EQ(t->jobs[0].submit_s, 5);
  EXPECT_EQ(t->jobs[0].gpus, 8);
  EXPECT_EQ(t->jobs[1].job_id, "c");
  EXPECT_DOUBLE_EQ(t->jobs[1].submit_s, 15);
  EXPECT_EQ(t->jobs[1].gpus, 32);
}

TEST(SimTrace, BadRowsAreNamedByLineAndSkipped) {
  TraceOptions o;
  o.max_gpus = 32;
  auto t = read(
      "ok1,0,10,1,u,x\n"
      "neg,0,-5,1,u,x\n"
      "zero,0,10,0,u,x\n"
      "text,abc,10,1,u,x\n"
      "huge,0,10,64,u,x\n"
      "short,0,10\n"
      "ok2,1,10,32,u,x\n",
      o);
  ASSERT_TRUE(t) << t.error().message;
  EXPECT_EQ(t->jobs.size(), 2u);
  EXPECT_EQ(t->skipped_rows, 5);
  ASSERT_EQ(t->problems.size(), 5u);
  EXPECT_NE(t->problems[0].find("line 3"), std::string::npos) << t->problems[0];
  EXPECT_NE(t->problems[0].find("duration_s is negative"), std::string::npos);
  EXPECT_NE(t->problems[1].find("line 4"), std::string::npos);
  EXPECT_NE(t->problems[1].find("num_gpus"), std::string::npos);
  EXPECT_NE(t->problems[2].find("line 5"), std::string::npos);
  EXPECT_NE(t->problems[2].find("not a number"), std::string::npos);
  EXPECT_NE(t->problems[3].find("line 6"), std::string::npos);
  EXPECT_NE(t->problems[3].find("64 GPUs"), std::string::npos);
  EXPECT_NE(t->problems[4].find("line 7"), std::string::npos);
}

TEST(SimTrace, StopOnBadRowIsAnErrorNamingTheLine) {
  TraceOptions o;
  o.stop_on_bad_row = true;
  auto t = read("ok,0,10,1,u,x\nbad,0,10,0,u,x\n", o);
  ASSERT_FALSE(t);
  EXPECT_EQ(t.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(t.error().message.find("line 3"), std::string::npos) << t.error().message;
}

TEST(SimTrace, MissingHeaderEmptyAndUnreadableFile) {
  std::istringstream no_header("a,0,10,1,u,x\n");
  EXPECT_FALSE(read_trace(no_header, {}));
  std::istringstream empty("");
  EXPECT_FALSE(read_trace(empty, {}));
  auto missing = load_trace_file("/nonexistent/trace.csv", {});
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find("/nonexistent/trace.csv"), std::string::npos);
  TraceOptions bad_load;
  bad_load.load = 0;
  EXPECT_FALSE(read("a,0,10,1,u,x\n", bad_load));
}

TEST(SimTrace, DependencyArrayAndStatusColumnsInAnyOrder) {
  std::istringstream in(
      "job_id,submit_s,duration_s,num_gpus,user,array,dependency,status\n"
      "report,5,60,1,ada,,afterany:sweep;afternotok:prep,Pass\n"
      "prep,0,600,8,ada,,,FAILED\n"
      "sweep,0,3600,8,ada,0-15%4,afterok:prep,\n"
      "one,6,10,1,ada,,afterok:sweep_3,killed\n");
  auto t = read_trace(in, {});
  ASSERT_TRUE(t) << t.error().message;
  ASSERT_EQ(t->jobs.size(), 4u);
  EXPECT_EQ(t->jobs[0].job_id, "prep");
  EXPECT_TRUE(t->jobs[0].fails);
  const TraceJob& sweep = t->jobs[1];
  ASSERT_TRUE(sweep.array);
  EXPECT_EQ(sweep.array->size(), 16);
  EXPECT_EQ(sweep.array->max_running, 4);
  EXPECT_FALSE(sweep.fails);
  ASSERT_EQ(sweep.after.size(), 1u);
  EXPECT_EQ(sweep.after[0].row, 0u);
  const TraceJob& report = t->jobs[2];  // sorted by submit: its dependencies come before it
  ASSERT_EQ(report.after.size(), 2u);
  EXPECT_EQ(report.after[0].type, jobs::Dependency::Type::kAfterAny);
  EXPECT_EQ(report.after[0].row, 1u);
  EXPECT_EQ(report.after[1].type, jobs::Dependency::Type::kAfterNotOk);
  EXPECT_EQ(report.after[1].row, 0u);
  const TraceJob& one = t->jobs[3];
  EXPECT_TRUE(one.fails);
  ASSERT_EQ(one.after.size(), 1u);
  EXPECT_EQ(one.after[0].row, 1u);
  EXPECT_EQ(one.after[0].task, 3);
}

// Offered load: GPU-seconds asked over the submit span, per cluster GPU; an array row counts every task.
// set_offered_load divides submit times to reach a target and keeps their order.
TEST(SimTrace, OfferedLoadCountsGpuSecondsOverTheSubmitSpan) {
  std::istringstream in(
      "job_id,submit_s,duration_s,num_gpus,user,array\n"
      "a,100,50,2,u,\n"
      "b,150,10,8,u,0-3\n"
      "c,300,100,1,u,\n");
  auto t = read_trace(in, {});
  ASSERT_TRUE(t) << t.error().message;
  // (2*50 + 8*10*4 + 1*100) GPU-s over 200 s on 16 GPUs
  auto load = offered_load(t->jobs, 16);
  ASSERT_TRUE(load);
  EXPECT_DOUBLE_EQ(*load, 520.0 / (200.0 * 16));
  auto divisor = set_offered_load(t->jobs, 16, 0.5);
  ASSERT_TRUE(divisor) << divisor.error().message;
  EXPECT_DOUBLE_EQ(*divisor, 0.5 / (520.0 / 3200.0));
  EXPECT_DOUBLE_EQ(*offered_load(t->jobs, 16), 0.5);
  EXPECT_DOUBLE_EQ(t->jobs[0].submit_s, 100 / *divisor);
  EXPECT_LT(t->jobs[1].submit_s, t->jobs[2].submit_s);
  EXPECT_DOUBLE_EQ(t->jobs[2].duration_s, 100);  // run times are the trace's
}

TEST(SimTrace, OfferedLoadNeedsASubmitSpanAndAPositiveTarget) {
  auto same = read("a,5,10,1,u,x\nb,5,20,1,u,x\n");
  ASSERT_TRUE(same);
  EXPECT_FALSE(offered_load(same->jobs, 8));
  auto none = set_offered_load(same->jobs, 8, 1.0);
  ASSERT_FALSE(none);
  EXPECT_NE(none.error().message.find("more than one time"), std::string::npos) << none.error().message;
  EXPECT_DOUBLE_EQ(same->jobs[0].submit_s, 5);  // untouched
  auto idle = read("a,0,0,1,u,x\nb,5,0,1,u,x\n");
  ASSERT_TRUE(idle);
  EXPECT_FALSE(set_offered_load(idle->jobs, 8, 1.0));
  auto fine = read("a,0,10,1,u,x\nb,5,20,1,u,x\n");
  ASSERT_TRUE(fine);
  for (double bad : {0.0, -1.0, std::nan("")}) EXPECT_FALSE(set_offered_load(fine->jobs, 8, bad)) << bad;
  EXPECT_DOUBLE_EQ(fine->jobs[1].submit_s, 5);
}

TEST(SimTrace, QosColumnSetsEachJobsQosAndABadOneIsABadRow) {
  std::istringstream in(
      "job_id,submit_s,duration_s,num_gpus,user,qos\n"
      "a,0,10,64,u,high\n"
      "b,1,10,1,u,scavenger\n"
      "c,2,10,1,u,\n"
      "d,3,10,1,u,urgent\n");
  auto t = read_trace(in, {});
  ASSERT_TRUE(t) << t.error().message;
  ASSERT_EQ(t->jobs.size(), 3u);
  EXPECT_EQ(t->jobs[0].qos, jobs::Qos::kHigh);
  EXPECT_EQ(t->jobs[1].qos, jobs::Qos::kScavenger);
  EXPECT_EQ(t->jobs[2].qos, jobs::Qos::kNormal);
  ASSERT_EQ(t->problems.size(), 1u);
  EXPECT_NE(t->problems[0].find("line 5: qos must be high, normal or scavenger"), std::string::npos)
      << t->problems[0];
}

// --trace-out's writer: what it writes of a read trace reads back to the same jobs.
TEST(SimTrace, WrittenTraceReadsBackWithStatusQosDependenciesAndArrays) {
  std::istringstream in(
      "job_id,submit_s,duration_s,num_gpus,user,array,dependency,status,qos\n"
      "report,5,60,1,ada,,afterany:sweep;afternotok:prep,Pass,\n"
      "prep,0,600,8,ada,,,FAILED,high\n"
      "sweep,0,3600,8,ada,0-15%4,afterok:prep,,scavenger\n"
      "one,6,10,1,ada,,afterok:sweep_3;aftercorr:sweep,killed,normal\n");
  auto first = read_trace(in, {});
  ASSERT_TRUE(first) << first.error().message;
  std::ostringstream out;
  write_trace_csv(out, first->jobs);
  std::istringstream again(out.str());
  auto second = read_trace(again, {});
  ASSERT_TRUE(second) << second.error().message << "\n" << out.str();
  ASSERT_EQ(second->jobs.size(), first->jobs.size());
  for (size_t i = 0; i < first->jobs.size(); ++i) {
    const TraceJob &a = first->jobs[i], &b = second->jobs[i];
    EXPECT_EQ(b.job_id, a.job_id);
    EXPECT_EQ(b.submit_s, a.submit_s);
    EXPECT_EQ(b.fails, a.fails) << a.job_id;
    EXPECT_EQ(b.qos, a.qos) << a.job_id;
    EXPECT_EQ(b.array, a.array) << a.job_id;
    ASSERT_EQ(b.after.size(), a.after.size()) << a.job_id;
    for (size_t k = 0; k < a.after.size(); ++k) {
      EXPECT_EQ(b.after[k].type, a.after[k].type);
      EXPECT_EQ(b.after[k].row, a.after[k].row);
      EXPECT_EQ(b.after[k].task, a.after[k].task);
    }
  }
}

TEST(SimTrace, ADependencyOnALaterOrUnknownRowIsABadRow) {
  std::istringstream in(
      "job_id,submit_s,duration_s,num_gpus,user,dependency,array\n"
      "early,0,10,1,u,afterok:late,\n"
      "late,5,10,1,u,,\n"
      "ghost,6,10,1,u,afterany:nobody,\n"
      "task,7,10,1,u,afterok:late_2,\n"
      "typo,8,10,1,u,after:late,\n"
      "arr,9,10,1,u,,0-x\n");
  auto t = read_trace(in, {});
  ASSERT_TRUE(t) << t.error().message;
  ASSERT_EQ(t->jobs.size(), 1u);
  EXPECT_EQ(t->jobs[0].job_id, "late");
  ASSERT_EQ(t->problems.size(), 5u);
  const std::string all = t->problems[0] + t->problems[1] + t->problems[2] + t->problems[3] + t->problems[4];
  EXPECT_NE(all.find("line 2: dependency names \"late\", which is no row submitted before"), std::string::npos) << all;
  EXPECT_NE(all.find("\"nobody\""), std::string::npos) << all;
  EXPECT_NE(all.find("\"late_2\""), std::string::npos) << all;  // late is no array
  EXPECT_NE(all.find("TYPE:JOB_ID"), std::string::npos) << all;
  EXPECT_NE(all.find("line 7: array"), std::string::npos) << all;
}

TEST(SimTrace, AHeaderWithAnUnknownOrRepeatedColumnIsRefused) {
  std::istringstream unknown("job_id,submit_s,duration_s,num_gpus,user,colour\n");
  auto t = read_trace(unknown, {});
  ASSERT_FALSE(t);
  EXPECT_NE(t.error().message.find("unknown column \"colour\""), std::string::npos) << t.error().message;
  std::istringstream twice("job_id,submit_s,duration_s,num_gpus,user,array,array\n");
  EXPECT_FALSE(read_trace(twice, {}));
  std::istringstream order("submit_s,job_id,duration_s,num_gpus,user\n");
  EXPECT_FALSE(read_trace(order, {}));
}

TEST(SimReport, PercentileInterpolates) {
  std::vector<double> v = {4, 1, 3, 2};
  EXPECT_DOUBLE_EQ(percentile(v, 0.5), 2.5);
  EXPECT_DOUBLE_EQ(percentile(v, 0.0), 1);
  EXPECT_DOUBLE_EQ(percentile(v, 1.0), 4);
  std::vector<double> none;
  EXPECT_DOUBLE_EQ(percentile(none, 0.99), 0);
}

TEST(SimReport, SummarizeComputesDefinedMetrics) {
  SimResult r;
  r.policy = "p";
  r.cluster_gpus = 16;
  r.first_submit = 0;
  r.last_end = 100;
  r.busy_gpu_s = 800;
  r.free_gpu_s = 800;
  r.fragmented_gpu_s = 200;
  JobResult a;  // waited 10, ran 50 on 2 nodes spanning 2 leaves where 1 would do
  a.submit = 0, a.first_start = 10, a.end = 60, a.gpus = 16, a.nodes = 2, a.leaves_spanned = 2,
  a.min_leaves = 1;
  a.duration_s = 40, a.comm_slowdown = 1.25;
  JobResult b;  // 1-second job: bounded slowdown uses the 10 s floor
  b.submit = 50, b.first_start = 50, b.end = 51, b.gpus = 1, b.nodes = 1, b.duration_s = 1;
  r.jobs = {a, b};
  PolicyReport p = summarize(r, 3);
  EXPECT_EQ(p.jobs, 2);
  EXPECT_EQ(p.finished, 2);
  EXPECT_DOUBLE_EQ(p.mean_wait_s, 5);
  EXPECT_DOUBLE_EQ(p.median_wait_s, 5);
  EXPECT_DOUBLE_EQ(p.mean_jct_s, 30.5);
  EXPECT_DOUBLE_EQ(p.mean_bounded_slowdown, (60.0 / 40.0 + 1.0) / 2);
  EXPECT_DOUBLE_EQ(p.utilization, 0.5);
  EXPECT_DOUBLE_EQ(p.fragmentation, 0.25);
  EXPECT_EQ(p.multi_node_jobs, 1);
  EXPECT_DOUBLE_EQ(p.min_span_share, 0);
  EXPECT_DOUBLE_EQ(p.mean_extra_leaves, 1);
  EXPECT_DOUBLE_EQ(p.mean_comm_slowdown, 1.125);
  EXPECT_EQ(p.skipped_rows, 3);
  auto j = to_json({p}, 1.5);
  for (const char* key : {"jobs", "mean_wait_s", "median_wait_s", "p99_wait_s", "mean_jct_s", "p99_jct_s",
                          "mean_bounded_slowdown", "makespan_s", "utilization", "min_span_share",
                          "mean_comm_slowdown", "fragmentation", "preemptions", "skipped_rows"})
    EXPECT_TRUE(j["policies"]["p"].contains(key)) << key;
  EXPECT_DOUBLE_EQ(j["wall_seconds"].get<double>(), 1.5);
}

}  // namespace
}  // namespace railyard::sim
