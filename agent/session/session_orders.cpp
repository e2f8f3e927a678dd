// Session: the scheduler's orders (launch, kill, exec, logs) and what the supervisors report back.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>

#include "agent/launch/alloc_dir.hpp"
#include "agent/launch/launcher.hpp"
#include "agent/launch/plan.hpp"
#include "agent/launch/proc.hpp"
#include "agent/launch/process.hpp"
#include "agent/launch/supervisor.hpp"
#include "agent/session/session_internal.hpp"
#include "agent/state/alloc_state.hpp"
#include "agent/streams/tailer.hpp"
#include "agent/streams/telemetry.hpp"

namespace railyard::agent {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr size_t kMaxPendingEvents = 10'000;  // per allocation while disconnected; older ones are dropped
// Processes started by an exec order (orteds) are numbered from here, apart from the ranks.
constexpr int kFirstExecRank = 1000;
constexpr size_t kMaxLogChunk = 512 * 1024;   // leaves room for JSON escaping under the 1 MiB frame limit

long long unix_ms_now() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

// Length of the longest prefix of `data` that does not end inside a UTF-8 sequence.
size_t utf8_boundary(const std::string& data) {
  const size_t n = data.size();
  for (size_t back = 1; back <= 4 && back <= n; ++back) {
    const auto c = static_cast<unsigned char>(data[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte: look further back
    const size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    return need > back ? n - back : n;
  }
  return n;
}

std::string join_words(const std::vector<std::string>& argv) {
  std::string out;
  for (size_t i = 0; i < argv.size(); ++i) out += (i ? " " : "") + argv[i];
  return out;
}

}  // namespace

// A launch_failed answers the order by whatever alloc, job and node it named, even when it did not parse.
void Session::on_launch(const json& msg) {
  const std::string alloc = msg.value("alloc", std::string()), node_name = msg.value("node", std::string());
  const int64_t job = msg.contains("job") && msg["job"].is_number_integer() ? msg["job"].get<int64_t>() : 0;
  auto fail = [&](const std::string& why) { send(protocol::encode(protocol::LaunchFailed{alloc, job, node_name, why})); };
  auto req = parse_launch(msg);
  if (!req) return fail(req.error().message);
  Node* n = node(req->local().name);
  if (!n) return fail("node " + req->local().name + " is not hosted by this agent");
  protocol::Launched launched{alloc, job, node_name, {}};
  if (n->allocs.count(req->alloc_id)) {  // a repeated order (after a reconnect): report what runs
    for (const auto& rec : n->supervisor->records())
      if (rec.alloc_id == req->alloc_id)
        for (const auto& r : rec.ranks) launched.ranks.push_back({r.rank, r.pid});
    return send(protocol::encode(launched));
  }
  // Who the job runs as, resolved now: a later node of an mpi job fails here rather than at its exec order.
  auto creds = resolve_job_user(req->spec.user, options_.allow_root_jobs);
  if (!creds) return fail(creds.error().message);
  Alloc a;
  a.job = req->job_id;
  a.user = effective_user(*creds);
  a.gpus = req->local().gpus;
  // The first telemetry-only batch after one metrics interval: a job that ends sooner sends none (its
  // end is in alloc_finished), which spares a /proc scan and a message per short job.
  a.next_telemetry = Clock::now() + options_.metrics_interval;
  if (!options_.scheduler_url.empty()) req->spec.env["RAILYARD_URL"] = options_.scheduler_url;
  if (!options_.ca_file.empty()) req->spec.env["RAILYARD_CA_FILE"] = options_.ca_file;
  // Made with this node's key: the scheduler checks it with the key of the allocation's first node, the one
  // whose mpirun asks for remote launches.
  req->spec.env["RAILYARD_EXEC_TOKEN"] = exec_token(key_of(n->name), req->alloc_id);
  if (req->spec.container) {
    if (!containers_)
      return fail("node " + n->name + " cannot run image " + req->spec.container->image + ": " + containers_why_);
    auto waits = wait_for_image(msg, *req, *creds);
    if (!waits) return fail(waits.error().message);
    if (*waits) return;  // answered when the pull ends
    a.image = *req;
    a.containers = true;
  }

  if (req->spec.launcher == jobs::Launcher::kMpi && req->node_rank != 0) {
    // A later node of an mpi job: hold the GPUs; its orted arrives with an exec order.
    std::vector<std::string> notes;  // logged by the launcher
    auto groups = n->launcher->cgroup_for(*req, notes);
    if (!groups) return fail(groups.error().message);
    AllocRecord rec{req->job_id, req->alloc_id, n->name, unix_ms_now(), 0, std::move(*groups), {}, a.user, a.gpus};
    if (auto s = n->allocs_store->put(rec); !s) log(s.error().message);
    n->supervisor->hold(std::move(rec));
    n->allocs.emplace(req->alloc_id, std::move(a));
    return send(protocol::encode(launched));
  }
  auto started = n->launcher->launch(*req);
  if (!started) return fail(started.error().message);
  for (const auto& r : started->record.ranks) {
    a.pgids.push_back(r.pgid);
    launched.ranks.push_back({r.rank, r.pid});
  }
  if (started->rank0_out) {
    a.tailer.emplace(std::move(started->rank0_out));
    std::optional<MetricTarget> target;
    if (req->spec.target) target = MetricTarget{req->spec.target->metric, req->spec.target->value};
    a.tracker.emplace(target);
  }
  n->supervisor->add(std::move(started->record));
  n->allocs.emplace(req->alloc_id, std::move(a));
  send(protocol::encode(launched));
}

void Session::on_kill(const std::string& alloc, const std::string& node_name, const std::string& reason) {
  Node* n = node(node_name);
  drop_queued(alloc);  // a launch still waiting for its image never starts
  if (n && n->supervisor->contains(alloc)) {
    if (auto it = n->allocs.find(alloc); it != n->allocs.end() && it->second.message.empty())
      it->second.message = "killed: " + reason;
    (void)n->supervisor->cancel(alloc);  // alloc_finished (cancelled) follows from poll_node
    return;
  }
  // Nothing runs: answer at once, so the scheduler frees the GPUs.
  protocol::AllocFinished report{alloc, job_of_alloc(alloc), node_name, "cancelled", 0, 0, "not running here", {}};
  send(finished_.add(protocol::encode(report)));
}

void Session::on_exec(const json& msg) {
  const auto order = msg.get<protocol::Exec>();
  if (queued_behind_pull(order.alloc, msg)) return;  // its launch waits for the image: after it, in order
  protocol::ExecFailed failed{order.req, ""};
  auto send_failed = [&] { send(protocol::encode(failed)); };
  const std::string& alloc = order.alloc;
  const std::string& node_name = order.node;
  const auto& argv = order.argv;
  Node* n = node(node_name);
  auto it = n ? n->allocs.find(alloc) : decltype(n->allocs.end()){};
  if (!n || it == n->allocs.end() || !n->supervisor->contains(alloc) || argv.empty()) {
    failed.message = argv.empty() ? "empty argv" : "no allocation " + alloc + " on " + node_name;
    return send_failed();
  }
  Alloc& a = it->second;
  if (a.user.empty()) {  // adopted from an older agent's record, which did not keep the user
    failed.message = "allocation " + alloc + " on " + node_name + " does not record its user; remote launch refused";
    return send_failed();
  }
  auto creds = resolve_job_user(a.user, options_.allow_root_jobs);
  if (!creds) {
    failed.message = creds.error().message;
    return send_failed();
  }
  auto dir = n->launcher->make_alloc_dir(a.job, alloc, *creds);
  // Open MPI's directories of this allocation on this node (shared-memory backing files, the orted's
  // session directory): the job's user writes there, so each is that user's own, one per allocation.
  auto vader = make_owned_dir(n->dir / "vader", alloc, *creds);
  auto session = make_owned_dir(n->dir / "ompi", alloc, *creds);
  // Where this node's orted writes its ranks' own logs (mpirun's --output-filename, the same path here).
  const fs::path& mpi_out = n->launcher->options().mpi_output_dir;
  auto ranks_out = mpi_out.empty() ? Result<Fd>(Fd()) : make_owned_dir(mpi_out, alloc, *creds);
  for (const Error* e : {dir ? nullptr : &dir.error(), vader ? nullptr : &vader.error(),
                         session ? nullptr : &session.error(), ranks_out ? nullptr : &ranks_out.error()})
    if (e) {
      failed.message = e->message;
      return send_failed();
    }
  // The orted (and the ranks it starts) join the allocation's cgroup, made when the node was held.
  std::vector<int> procs_fds;
  for (const auto& r : n->supervisor->records())
    if (r.alloc_id == alloc)
      for (const auto& g : r.cgroups)
        if (const int fd = open((g + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC); fd >= 0)
          procs_fds.push_back(fd);
  // In an image, the image's environment and ours; on the host, the agent's too.
  EnvMap env = a.image ? EnvMap{} : environ_map();
  // What railyard-agent-exec sets for a host when it runs the command itself (see exec_main.cpp).
  env["OMPI_MCA_btl_vader_backing_directory"] = (n->dir / "vader" / alloc).string();
  env["OMPI_MCA_orte_tmpdir_base"] = (n->dir / "ompi" / alloc).string();
  env["RAILYARD_NODE"] = n->name;
  env["RAILYARD_JOB_ID"] = std::to_string(a.job);
  env["RAILYARD_ALLOC_ID"] = alloc;
  env["RAILYARD_EXEC_TOKEN"] = exec_token(key_of(n->name), alloc);
  if (!options_.scheduler_url.empty()) env["RAILYARD_URL"] = options_.scheduler_url;
  if (!options_.ca_file.empty()) env["RAILYARD_CA_FILE"] = options_.ca_file;
  std::string gpus;
  for (size_t i = 0; i < a.gpus.size(); ++i) gpus += (i ? "," : "") + std::to_string(a.gpus[i]);
  env["CUDA_VISIBLE_DEVICES"] = gpus;
  // The words joined and run by a shell, as ssh would on the remote host (orted's argv carries quoting).
  SpawnSpec spec{{"/bin/sh", "-c", join_words(argv)}, to_env_list(env), dir->path().string(), -1, -1, *creds,
                 procs_fds, n->launcher->options().job_umask};
  if (a.image) {
    // orted in the job's image; Open MPI's directories of this allocation and its ranks' log directory are
    // mounted at their paths, and so is railyard-agent-exec, read-only: orted refuses to start when the
    // plm_rsh_agent mpirun passes it is not there, though with no tree spawn it never runs it.
    std::vector<std::string> cgroups;
    std::vector<jobs::Mount> own;
    for (const auto& d : {n->dir / "vader" / alloc, n->dir / "ompi" / alloc})
      own.push_back({d.string(), d.string(), false});
    if (!mpi_out.empty()) own.push_back({(mpi_out / alloc).string(), (mpi_out / alloc).string(), false});
    const std::string& helper = n->launcher->options().exec_helper;
    if (!helper.empty() && helper.front() == '/') own.push_back({helper, helper, true});
    auto job_mounts = checked_mounts(a.image->spec.container->mounts, *creds);
    if (!job_mounts) {
      for (int fd : procs_fds) close(fd);
      failed.message = job_mounts.error().message;
      return send_failed();
    }
    own.insert(own.end(), job_mounts->begin(), job_mounts->end());
    for (const auto& r : n->supervisor->records())
      if (r.alloc_id == alloc) cgroups = r.cgroups;
    const ProcessPlan plan{kFirstExecRank + a.execs, spec.argv, spec.env, ""};
    auto c = n->launcher->container_spawn(*a.image, plan, *dir, *creds, cgroups, own,
                                          container_name(alloc, n->name, "exec" + std::to_string(a.execs), n->dir.string()));
    if (!c) {
      for (int fd : procs_fds) close(fd);
      failed.message = c.error().message;
      return send_failed();
    }
    c->cgroup_procs_fds = procs_fds;
    spec = std::move(*c);
  }
  auto spawned =
      spawn_in_alloc(*dir, kFirstExecRank + a.execs, "exec-" + n->name + "-" + std::to_string(a.execs), spec);
  for (int fd : procs_fds) close(fd);
  if (!spawned) {
    failed.message = spawned.error().message;
    return send_failed();
  }
  ++a.execs;
  if (auto s = n->supervisor->add_process(alloc, *spawned); !s) {
    signal_group(spawned->pgid, SIGKILL);
    failed.message = s.error().message;
    return send_failed();
  }
  a.pgids.push_back(spawned->pgid);
  for (const auto& r : n->supervisor->records())
    if (r.alloc_id == alloc) (void)n->allocs_store->put(r);
  send(protocol::encode(protocol::ExecStarted{order.req, spawned->pid}));
}

// Rank 0's log, and every rank's of an env or none allocation, is rank-<R>.<stream> in the allocation
// directory; rank 0's of an mpi allocation is mpirun's output, every rank's together. The other ranks of an
// mpi allocation (one whose mpi output directory this node made) are the files Open MPI's daemon on this
// node wrote for them, reached through AllocDir::open_read_below.
Result<Fd> Session::open_rank_log(const Node& n, long long job, const std::string& alloc, int rank,
                                  const std::string& stream) const {
  const fs::path& mpi_out = n.launcher->options().mpi_output_dir;
  if (rank > 0 && !mpi_out.empty()) {
    auto ranks = AllocDir::open_owned(mpi_out, alloc);
    if (ranks) {
      for (const auto& rel : mpi_rank_log_paths(rank, stream))
        if (auto f = ranks->open_read_below(rel); f || f.error().code != ErrorCode::kNotFound) return f;
      return not_found("no log of rank " + std::to_string(rank));
    }
    if (ranks.error().code != ErrorCode::kNotFound) return ranks.error();
  }
  auto dir = n.launcher->open_alloc_dir(job, alloc);
  if (!dir) return dir.error();
  return dir->open_read("rank-" + std::to_string(rank) + "." + stream);
}

void Session::on_logs(const json& msg) {
  const auto order = msg.get<protocol::Logs>();
  const std::string& alloc = order.alloc;
  const std::string stream = order.stream == "err" ? "err" : "out";
  if (order.offset < 0) throw json::type_error::create(302, "field \"offset\" must not be negative", &msg);
  const auto offset = static_cast<std::uint64_t>(order.offset);
  const size_t max_bytes =
      std::min<size_t>(order.max_bytes > 0 ? static_cast<size_t>(order.max_bytes) : kMaxLogChunk, kMaxLogChunk);
  protocol::LogChunk chunk{order.req, alloc, order.rank, order.stream, order.offset, "", 0, order.offset, {}};
  Node* n = node(order.node);
  if (!n) {
    chunk.error = "node not hosted by this agent";
    return send(protocol::encode(chunk));
  }
  auto it = n->allocs.find(alloc);
  const long long job = it != n->allocs.end() ? it->second.job : job_of_alloc(alloc);
  // The log is in the job user's directory: opened without following a link, without blocking on a FIFO,
  // and only when it is a regular file of that user (AllocDir::open_read); read at most max_bytes.
  auto file = open_rank_log(*n, job, alloc, order.rank, stream);
  struct stat st {};
  if (!file || fstat(file->get(), &st) != 0) {
    chunk.error =
        !file && file.error().code != ErrorCode::kNotFound
            ? file.error().message
            : "no log rank-" + std::to_string(order.rank) + "." + stream + " for " + alloc + " on " + n->name;
    return send(protocol::encode(chunk));
  }
  const auto size = static_cast<std::uint64_t>(st.st_size);
  std::string data;
  if (offset < size) {
    data.resize(std::min<std::uint64_t>(max_bytes, size - offset));
    const ssize_t got = pread(file->get(), data.data(), data.size(), static_cast<off_t>(offset));
    data.resize(got > 0 ? static_cast<size_t>(got) : 0);
    if (offset + data.size() < size) data.resize(utf8_boundary(data));
  }
  chunk.size = static_cast<int64_t>(size);
  chunk.next_offset = static_cast<int64_t>(offset + data.size());
  chunk.data = std::move(data);
  send(protocol::encode(chunk));
}

void Session::finished(Node& n, const std::string& alloc, long long job, const std::string& state, int code) {
  auto it = n.allocs.find(alloc);
  protocol::AllocFinished report{alloc,
                                 job,
                                 n.name,
                                 state,
                                 code,
                                 it != n.allocs.end() ? it->second.signal : 0,
                                 it != n.allocs.end() ? it->second.message : std::string(),
                                 {}};
  json m = finished_.add(protocol::encode(report));
  if (registered_) send(m);
}

void Session::stream_metrics(Node& n, Alloc& a, const std::string& alloc, Clock::time_point now, bool final) {
  if (a.tailer) {
    auto lines = a.tailer->read();
    if (final)
      for (auto& l : a.tailer->flush()) lines.push_back(std::move(l));
    for (const auto& line : lines)
      for (const auto& ev : a.tracker->feed(line)) a.events.push_back(to_json(ev));
    if (a.events.size() > kMaxPendingEvents) a.events.erase(a.events.begin());
  }
  if (!registered_) return;
  const int malformed = a.tracker ? a.tracker->malformed() : 0;
  const bool news = !a.events.empty() || malformed != a.malformed_sent;
  if (!(final && news) && !(news && now >= a.next_metrics) && now < a.next_telemetry) return;
  // A finished allocation's groups are empty: its last sample is zeros without a /proc scan.
  const ProcessTelemetry t = final ? ProcessTelemetry{} : sample_groups(a.pgids, groups_->table());
  send(protocol::encode(protocol::Metrics{
      alloc, a.job, n.name, std::move(a.events),
      json{{"cpu_s", t.cpu_seconds}, {"rss_bytes", t.rss_bytes}, {"processes", t.processes}}, malformed}));
  a.events = json::array();
  a.malformed_sent = malformed;
  a.next_metrics = now + options_.metrics_interval;
  a.next_telemetry = now + options_.telemetry_interval;
}

void Session::poll_node(Node& n, Clock::time_point now) {
  for (auto& ev : n.supervisor->poll(*groups_)) {
    if (auto* ex = std::get_if<RankExited>(&ev)) {
      auto it = n.allocs.find(ex->alloc_id);
      // An engine client that did not exit by itself (killed, or not ours to wait for) did not remove its
      // container (--rm): the allocation's end removes them.
      if (it != n.allocs.end() && (ex->signal != 0 || ex->exit_code_lost)) it->second.engine_interrupted = true;
      if (it == n.allocs.end() || ex->code == 0 || !it->second.message.empty()) continue;
      it->second.signal = ex->signal;
      const std::string who =
          ex->rank >= kFirstExecRank
              ? "remote launch " + std::to_string(ex->rank - kFirstExecRank) + " (railyard-agent-exec)"
              : "rank " + std::to_string(ex->rank);
      it->second.message = ex->exit_code_lost ? who + ": exit code lost"
                           : ex->signal       ? who + " killed by signal " + std::to_string(ex->signal)
                                              : who + " exited with code " + std::to_string(ex->code);
    } else if (auto* done = std::get_if<AllocationFinished>(&ev)) {
      auto it = n.allocs.find(done->alloc_id);
      if (it != n.allocs.end()) stream_metrics(n, it->second, done->alloc_id, now, true);
      if (it != n.allocs.end() && it->second.containers)
        remove_containers(n, done->alloc_id, it->second.engine_interrupted || done->state == AllocState::kLost);
      finished(n, done->alloc_id, done->job_id, std::string(to_string(done->state)), done->exit_code);
      n.allocs.erase(done->alloc_id);
    }
  }
  for (auto& [id, a] : n.allocs) stream_metrics(n, a, id, now, false);
}

}  // namespace railyard::agent
