// Session: image jobs' images and containers (agent/launch/container.hpp). Every engine command here runs
// as a child process that tick() polls: a pull of many gigabytes never holds the agent's loop.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <set>

#include "agent/launch/container.hpp"
#include "agent/launch/process.hpp"
#include "jobs/container.hpp"
#include "agent/session/session_internal.hpp"

namespace railyard::agent {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr size_t kMaxTaskOutput = 1 << 20;

std::string last_line(const std::string& text) {
  size_t end = text.find_last_not_of("\r\n ");
  if (end == std::string::npos) return {};
  const size_t start = text.rfind('\n', end);
  return text.substr(start == std::string::npos ? 0 : start + 1, end - (start == std::string::npos ? 0 : start + 1) + 1);
}

// The engine's reason, not its progress lines: the last line that says "Error" or "error", else the last.
std::string engine_error(const std::string& output) {
  std::string found;
  for (size_t pos = 0; pos < output.size();) {
    const size_t nl = std::min(output.find('\n', pos), output.size());
    const std::string line = output.substr(pos, nl - pos);
    if (line.find("rror") != std::string::npos) found = line;
    pos = nl + 1;
  }
  return found.empty() ? last_line(output) : found;
}

}  // namespace

void Session::run_engine(std::vector<std::string> argv, std::function<void(int, const std::string&)> done,
                         std::function<void(const std::string&)> progress) {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return done(-1, "cannot make a pipe");
  SpawnSpec spec{std::move(argv), containers_->engine_env(), "/", p[1], p[1], std::nullopt, {}, std::nullopt};
  auto spawned = spawn_process(spec);
  close(p[1]);
  if (!spawned) {
    close(p[0]);
    return done(-1, spawned.error().message);
  }
  fcntl(p[0], F_SETFL, O_NONBLOCK);
  auto t = std::make_unique<EngineTask>();
  t->pid = spawned->pid;
  t->out = Fd(p[0]);
  t->done = std::move(done);
  t->progress = std::move(progress);
  engine_tasks_.push_back(std::move(t));
}

void Session::poll_engine_tasks() {
  auto drain = [](EngineTask& t) {
    char buf[16384];
    bool more = false;
    for (ssize_t n; (n = read(t.out.get(), buf, sizeof buf)) > 0;)
      if (t.output.size() < kMaxTaskOutput) {
        t.output.append(buf, static_cast<size_t>(n));
        more = true;
      }
    if (more && t.progress) t.progress(t.output);
  };
  for (size_t i = 0; i < engine_tasks_.size();) {
    EngineTask& t = *engine_tasks_[i];
    drain(t);
    int status = 0;
    const pid_t r = waitpid(t.pid, &status, WNOHANG);
    if (r == 0) {
      ++i;
      continue;
    }
    drain(t);
    auto task = std::move(engine_tasks_[i]);
    engine_tasks_.erase(engine_tasks_.begin() + static_cast<std::ptrdiff_t>(i));
    // done() may start another task (a pull after an exists check): it goes to the end of the list.
    task->done(r == task->pid && WIFEXITED(status) ? WEXITSTATUS(status) : -1, task->output);
  }
}

Result<bool> Session::wait_for_image(const json& order, LaunchRequest& req, const std::optional<Credentials>& user) {
  std::string image = req.spec.container->image;
  std::string source = image;
  if (is_archive_image(image)) {
    // The archive is read by the engine as root: only one the job's user could read is loaded, and by the
    // path checked (links resolved as that user).
    const std::string path = jobs::archive_path(image);
    auto checked = checked_mounts({{path, path, true}}, user);
    if (!checked) return Error{ErrorCode::kPermission, "image " + image + ": " + checked.error().message};
    source = image.substr(0, image.find(':') + 1) + checked->front().source + image.substr(image.find(':') + 1 + path.size());
  }
  if (auto it = images_.find(image); it != images_.end()) {
    req.spec.container->image = it->second;
    return false;
  }
  auto& pull = pulls_[image];
  if (!pull) {
    pull = std::make_unique<ImagePull>();
    pull->started = Clock::now();
    start_pull(image, source);
  }
  pull->waiting.emplace_back(req.alloc_id, order);
  return true;
}

bool Session::queued_behind_pull(const std::string& alloc, const json& order) {
  for (auto& [image, pull] : pulls_)
    for (const auto& w : pull->waiting)
      if (w.first == alloc) {
        pull->waiting.emplace_back(alloc, order);
        return true;
      }
  return false;
}

bool Session::drop_queued(const std::string& alloc) {
  bool dropped = false;
  for (auto& [image, pull] : pulls_)
    dropped |= std::erase_if(pull->waiting, [&](const auto& w) { return w.first == alloc; }) > 0;
  return dropped;
}

void Session::start_pull(const std::string& image, const std::string& source) {
  log("pulling image " + image);
  auto pull = [this, image, source] {
    run_engine(
        containers_->pull_argv(source), [this, image](int status, const std::string& out) { pull_done(image, status, out); },
        [this, image](const std::string& out) {
          // Without a terminal the engine prints a line per layer as it starts copying it, and no byte counts.
          int layers = 0;
          for (size_t pos = 0; (pos = out.find("Copying blob", pos)) != std::string::npos; pos += 12) ++layers;
          if (auto it = pulls_.find(image); it != pulls_.end()) it->second->layers = layers;
        });
  };
  if (is_archive_image(image)) return pull();
  // A registry image already in the engine's cache is used as it is (a pull would ask the registry again).
  run_engine(containers_->exists_argv(image), [this, image, pull](int status, const std::string&) {
    if (status == 0) return pull_done(image, 0, image);
    pull();
  });
}

void Session::pull_done(const std::string& image, int status, const std::string& output) {
  auto node = pulls_.extract(image);
  if (node.empty()) return;
  auto waiting = std::move(node.mapped()->waiting);
  const std::string reference = is_archive_image(image) ? last_line(output) : image;  // an archive: its id
  if (status == 0 && !reference.empty()) {
    images_[image] = reference;
    log("image " + image + " is in the cache" + (reference != image ? " as " + reference : ""));
    // Each order was read once already (receive() then queued it); one that still fails is logged, and the
    // orders after it go on.
    for (auto& [alloc, order] : waiting) {
      const std::string type = order.value("type", std::string());
      try {
        if (type == "launch") on_launch(order);
        if (type == "exec") on_exec(order);
      } catch (const json::exception& e) {
        log("the " + type + " order of " + alloc + " that waited for image " + image + ": " + e.what());
      }
    }
    return;
  }
  const std::string why = "cannot pull image " + image + ": " + engine_error(output);
  log(why);
  for (auto& [alloc, order] : waiting) {
    const std::string type = order.value("type", std::string());
    if (type == "launch")
      send(protocol::encode(protocol::LaunchFailed{alloc, order.value("job", int64_t{0}),
                                                   order.value("node", std::string()), why}));
    if (type == "exec") send(protocol::encode(protocol::ExecFailed{order.contains("req") ? order["req"] : json(), why}));
  }
}

// Each launch waiting for a pull is reported every few seconds: the job's reason says what it waits for, and
// the scheduler takes it as an answer to the launch order.
void Session::report_pull_progress(Clock::time_point now) {
  constexpr auto kEvery = std::chrono::seconds(5);
  if (!registered_) return;
  for (auto& [image, pull] : pulls_) {
    if (now < pull->next_progress) continue;
    pull->next_progress = now + kEvery;
    const auto secs = std::chrono::duration_cast<std::chrono::seconds>(now - pull->started).count();
    std::string what = "pulling image " + image + " (" + std::to_string(secs / 60) + " min " + std::to_string(secs % 60) + " s";
    if (pull->layers > 0) what += ", " + std::to_string(pull->layers) + " layer" + (pull->layers == 1 ? "" : "s") + " started";
    what += ")";
    for (const auto& [alloc, order] : pull->waiting)
      if (order.value("type", std::string()) == "launch")
        send(protocol::encode(protocol::LaunchProgress{alloc, order.value("job", int64_t{0}),
                                                       order.value("node", std::string()), what}));
  }
}

void Session::on_images(const json& msg) {
  const auto order = msg.get<protocol::Images>();
  protocol::ImageList answer{order.req, order.node, json::array(), {}, std::nullopt};
  auto reply = [this](const protocol::ImageList& a) { send(protocol::encode(a)); };
  if (!node(order.node)) {
    answer.error = "node " + order.node + " is not hosted by this agent";
    return reply(answer);
  }
  if (!containers_) {
    answer.error = "node " + order.node + " has no container engine: " + containers_why_;
    return reply(answer);
  }
  if (order.pull) {
    auto image = jobs::parse_image(*order.pull);
    if (!image || is_archive_image(*image)) {
      answer.error = "prefetch " + *order.pull + ": " + (image ? "an archive is loaded by the job that names it" : image.error().message);
      return reply(answer);
    }
    if (!images_.count(*image) && !pulls_.count(*image)) {
      auto& pull = pulls_[*image];
      pull = std::make_unique<ImagePull>();
      pull->started = Clock::now();
      start_pull(*image, *image);
    }
  }
  run_engine(containers_->images_argv(), [this, answer, reply](int status, const std::string& out) mutable {
    auto list = status == 0 ? containers_->parse_images(out) : Result<std::vector<CachedImage>>(internal_error(engine_error(out)));
    if (!list) {
      answer.error = "listing images: " + list.error().message;
    } else {
      for (const auto& i : *list)
        answer.images.push_back(
            {{"id", i.id}, {"names", i.names}, {"size_bytes", i.size_bytes}, {"created", i.created_unix}});
    }
    for (const auto& [image, pull] : pulls_) answer.pulling.push_back(image);
    reply(answer);
  });
}

void Session::remove_containers(Node& n, const std::string& alloc, bool engine) {
  std::error_code ec;
  fs::remove_all(n.dir / "containers" / alloc, ec);
  if (!containers_ || !engine) return;
  removals_.push_back({n.name, n.dir.string(), alloc, 0, Clock::now(), false});
}

// A container whose processes were just killed may still be in the middle of the engine's own cleanup (its
// conmon killed with them, its state not yet written), and `podman rm` then fails: each removal is retried,
// a second apart, until the engine says it is done.
void Session::run_removals(Clock::time_point now) {
  constexpr int kAttempts = 30;
  for (auto& r : removals_) {
    if (r.running || now < r.at) continue;
    r.running = true;
    run_engine(containers_->remove_argv({{"railyard.alloc", r.alloc}, {kNodeDirLabel, r.node_dir}}),
               [this, key = r.node_dir + "/" + r.alloc](int status, const std::string& out) {
                 auto it = std::find_if(removals_.begin(), removals_.end(),
                                        [&](const Removal& x) { return x.node_dir + "/" + x.alloc == key; });
                 if (it == removals_.end()) return;
                 if (status == 0) return void(removals_.erase(it));
                 if (++it->attempts >= kAttempts) {
                   log("giving up removing the containers of " + it->alloc + " on " + it->node + ": " + engine_error(out));
                   return void(removals_.erase(it));
                 }
                 it->running = false;
                 it->at = Clock::now() + std::chrono::seconds(1);
               });
  }
}

// Containers of this node whose allocation the agent does not supervise (it was killed and the allocation
// ended meanwhile, or its records are gone): nothing will ever stop them but this.
void Session::reap_orphan_containers(Node& n) {
  if (!containers_) return;
  auto labels = containers_->container_labels(kNodeDirLabel, n.dir.string(), "railyard.alloc");
  if (!labels) return log("listing the containers of " + n.name + ": " + labels.error().message);
  const std::set<std::string> allocs(labels->begin(), labels->end());
  for (const auto& alloc : allocs) {
    if (auto it = n.allocs.find(alloc); it != n.allocs.end()) {
      it->second.containers = true;  // adopted: removed when it ends
      continue;
    }
    log("removing the containers of " + alloc + " on " + n.name + ": no such allocation here any more");
    remove_containers(n, alloc);
  }
}

}  // namespace railyard::agent
