// The probe's process-group hooks in C++: a collective's row at issue, its completion from
// its work, the rank's live state, without entering Python (docs/probe.md, "Cost").
//
// Python (probe/native.py) builds this once per torch version, attaches it to the host
// (gloo, mpi) groups and drains the finished rows at each flush; it sets the thread's tag
// and the step. A hook never throws into a collective: a problem is kept for ``errors()``.

#include <torch/extension.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

namespace {

using c10d::HookOpName;

int64_t now_ns() {
  // CLOCK_MONOTONIC, as Python's time.perf_counter_ns on Linux.
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

struct Record {
  int64_t step, start, end, nbytes, count, seq;
  int64_t root;  // a send's or recv's peer, group-local (-1: none)
  int32_t group, tag;
  int32_t op, dtype;
  bool drained;
};

struct Group {
  std::string label;  // as the live state holds it: 48 bytes at most
  int64_t seq;
};

struct LiveMap {
  char* base = nullptr;
  int64_t collective_at = 0, done_at = 0, left_at = 0, stage_at = 0, collective_ns_at = 0;
  size_t size = 0;
  bool armed = false;  // the next collective outside set-up writes the stage "running"
  int64_t last_entered = -1;
};

struct Waits {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::pair<c10::intrusive_ptr<c10d::Work>, int64_t>> queue;
  bool started = false;
};

struct State {
  std::mutex mu;
  std::deque<Record> records;
  int64_t first_id = 0;
  std::deque<Group> groups;
  std::vector<char> unrecorded, setup;  // by tag code
  std::vector<std::string> op_names;    // by HookOpName, for the live state
  std::atomic<int64_t> step{0};
  LiveMap live;
  std::vector<std::string> errors;
  Waits polled, waited;
};

State& state() {
  static State* s = new State();  // never freed: a waiting thread may outlive exit
  return *s;
}

thread_local int32_t tag_now = 0;
thread_local int64_t issued = -1;

bool flagged(const std::vector<char>& flags, int32_t code) {
  return code >= 0 && code < static_cast<int32_t>(flags.size()) && flags[code];
}

void note_error(const std::string& text) {
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.errors.size() < 16) {
    s.errors.push_back(text);
  }
}

struct Sized {
  int64_t nbytes = 0, count = 0;
  int32_t dtype = -1;
};

Sized total(const std::vector<at::Tensor>& tensors, int64_t times) {
  Sized s;
  for (const auto& t : tensors) {
    s.nbytes += static_cast<int64_t>(t.nbytes());
    s.count += t.numel();
  }
  if (!tensors.empty()) {
    s.dtype = static_cast<int32_t>(tensors[0].scalar_type());
  }
  s.nbytes *= times;
  s.count *= times;
  return s;
}

// Bytes by the nccl-tests convention, as probe/group_hooks.py's SIZES.
bool sized(const c10d::PreHookArgs& a, int64_t group_size, Sized& out) {
  switch (a.name) {
    case HookOpName::ALLREDUCE:
    case HookOpName::BROADCAST:
    case HookOpName::REDUCE:
    case HookOpName::REDUCE_SCATTER:
    case HookOpName::ALLTOALL:
    case HookOpName::SEND:
      out = total(a.input_tensors, 1);
      return true;
    case HookOpName::ALLGATHER:
      out = total(a.output_tensors, 1);
      return true;
    case HookOpName::GATHER:
      out = total(a.input_tensors, group_size);
      return true;
    case HookOpName::SCATTER:
      out = total(a.output_tensors, group_size);
      return true;
    case HookOpName::BARRIER:
      out = Sized{};
      return true;
    case HookOpName::RECV:
      out = total(a.output_tensors.empty() ? a.input_tensors : a.output_tensors, 1);
      return true;
    default:
      return false;
  }
}

void put_text(char* at, size_t width, const std::string& text) {
  std::memset(at, 0, width);
  std::memcpy(at, text.data(), std::min(width, text.size()));
}

void put_int(char* at, int64_t value) {
  std::memcpy(at, &value, sizeof value);
}

// Layouts of events/live_state.py: COLLECTIVE "<16s48sqqqq", DONE "<q", STAGE "<24sq".
void live_enter(State& s, const Group& g, const Record& r, int64_t id) {
  LiveMap& m = s.live;
  if (m.base == nullptr) {
    return;
  }
  char* c = m.base + m.collective_at;
  static const std::string unknown = "unknown";
  const bool named = r.op >= 0 && r.op < static_cast<int32_t>(s.op_names.size());
  put_text(c, 16, named ? s.op_names[r.op] : unknown);
  put_text(c + 16, 48, g.label);
  put_int(c + 64, r.seq);
  put_int(c + 72, r.nbytes);
  put_int(c + 80, r.start);
  put_int(c + 88, 0);
  m.last_entered = id;
  if (m.armed && !flagged(s.setup, r.tag)) {
    put_text(m.base + m.stage_at, 24, "running");
    put_int(m.base + m.stage_at + 24, r.start);
    m.armed = false;
  }
}

void complete(int64_t id, int64_t end) {
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  int64_t i = id - s.first_id;
  if (i < 0 || i >= static_cast<int64_t>(s.records.size())) {
    return;
  }
  Record& r = s.records[i];
  if (r.end >= 0) {
    return;
  }
  r.end = end;
  if (s.live.base != nullptr) {
    put_int(s.live.base + s.live.done_at, end);
    char* total = s.live.base + s.live.collective_ns_at;
    int64_t sum;
    std::memcpy(&sum, total, sizeof sum);
    put_int(total, sum + (end - r.start));
    if (s.live.last_entered == id) {
      put_int(s.live.base + s.live.left_at, end);
    }
  }
}

// A work without a future completes when its caller's wait does. gloo's send and recv works
// consume their buffer's completion in ``wait``, so a second waiter would block the caller:
// one thread polls their ``isCompleted`` (every 10 us at first, at most every 250 us). Other
// such works (gloo's reduce-scatter) never say ``isCompleted``, and their ``wait`` may be
// repeated: another thread waits for them, in their order.
using Pending = std::vector<std::pair<c10::intrusive_ptr<c10d::Work>, int64_t>>;

void take(Waits& w, Pending& into, bool block) {
  std::unique_lock<std::mutex> lock(w.mu);
  if (block) {
    w.cv.wait(lock, [&] { return !w.queue.empty(); });
  }
  for (auto& item : w.queue) {
    into.push_back(std::move(item));
  }
  w.queue.clear();
}

void finished(const c10::intrusive_ptr<c10d::Work>& work, int64_t id) {
  if (!work->exception()) {  // a failed collective stays incomplete, as its wait raised
    complete(id, now_ns());
  }
}

void poll_loop(Waits& w) {
  Pending pending;
  auto pause = std::chrono::microseconds(10);
  for (;;) {
    size_t before = pending.size();
    take(w, pending, pending.empty());
    if (pending.size() > before) {
      pause = std::chrono::microseconds(10);
    }
    size_t kept = 0;
    for (auto& item : pending) {
      bool done = true;
      try {
        done = item.first->isCompleted();
        if (done) {
          finished(item.first, item.second);
        }
      } catch (...) {
      }
      if (!done) {
        pending[kept++] = std::move(item);
      }
    }
    pending.resize(kept);
    if (!pending.empty()) {
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(250));
    }
  }
}

void wait_loop(Waits& w) {
  Pending pending;
  for (;;) {
    take(w, pending, true);
    for (auto& item : pending) {
      try {
        item.first->wait();
        finished(item.first, item.second);
      } catch (...) {
      }
    }
    pending.clear();
  }
}

void watch(Waits& w, void (*loop)(Waits&), const c10::intrusive_ptr<c10d::Work>& work,
           int64_t id) {
  std::lock_guard<std::mutex> lock(w.mu);
  if (!w.started) {
    std::thread(loop, std::ref(w)).detach();
    w.started = true;
  }
  w.queue.emplace_back(work, id);
  w.cv.notify_one();
}

void pre(int32_t group, int64_t group_size, const c10d::PreHookArgs& a) {
  issued = -1;
  auto& s = state();
  int32_t tag = tag_now;
  if (flagged(s.unrecorded, tag)) {
    return;
  }
  try {
    Sized z;
    if (!sized(a, group_size, z)) {
      return;
    }
    int64_t start = now_ns();
    std::lock_guard<std::mutex> lock(s.mu);
    Group& g = s.groups[group];
    const bool p2p = a.name == HookOpName::SEND || a.name == HookOpName::RECV;
    Record r{s.step.load(), start, -1, z.nbytes, z.count, g.seq++, p2p ? a.root : -1, group,
             tag, static_cast<int32_t>(a.name), z.dtype, false};
    s.records.push_back(r);
    issued = s.first_id + static_cast<int64_t>(s.records.size()) - 1;
    live_enter(s, g, r, issued);
  } catch (const std::exception& e) {
    note_error(std::string("a collective not recorded: ") + e.what());
  }
}

void post(const c10d::PostHookArgs& a) {
  auto& s = state();
  int64_t id = issued;
  issued = -1;
  if (id < 0) {
    return;
  }
  try {
    if (!a.work) {
      complete(id, now_ns());
      return;
    }
    c10::intrusive_ptr<c10::ivalue::Future> future;
    try {
      future = a.work->getFuture();
    } catch (const std::exception&) {
      future.reset();
    }
    if (future) {
      future->addCallback([id](c10::ivalue::Future&) { complete(id, now_ns()); });
    } else if (a.name == HookOpName::SEND || a.name == HookOpName::RECV) {
      watch(s.polled, poll_loop, a.work, id);
    } else {
      watch(s.waited, wait_loop, a.work, id);
    }
  } catch (const std::exception& e) {
    note_error(std::string("a collective has no completion: ") + e.what());
  }
}

// --- what Python calls ---

void configure(const std::vector<std::string>& op_names, const std::vector<int32_t>& unrecorded,
               const std::vector<int32_t>& setup) {
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.op_names = op_names;
  auto flags = [](const std::vector<int32_t>& codes) {
    std::vector<char> out;
    for (int32_t c : codes) {
      if (c >= static_cast<int32_t>(out.size())) {
        out.resize(c + 1, 0);
      }
      out[c] = 1;
    }
    return out;
  };
  s.unrecorded = flags(unrecorded);
  s.setup = flags(setup);
}

int32_t add_group(const std::string& label) {
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.groups.push_back(Group{label.substr(0, 48), 0});
  return static_cast<int32_t>(s.groups.size()) - 1;
}

void attach(const c10::intrusive_ptr<c10d::ProcessGroup>& pg, int64_t hook_id, int32_t group,
            int64_t group_size) {
  pg->registerPreHook(
      hook_id, [group, group_size](const c10d::PreHookArgs& a) { pre(group, group_size, a); });
  pg->registerPostHook(hook_id, post);
}

void detach(const c10::intrusive_ptr<c10d::ProcessGroup>& pg, int64_t hook_id) {
  pg->unregisterPreHook(hook_id);
  pg->unregisterPostHook(hook_id);
}

void set_tag(int32_t code) { tag_now = code; }

void set_step(int64_t step) { state().step.store(step); }

void unmap_live(LiveMap& m) {
  if (m.base != nullptr) {
    munmap(m.base, m.size);
  }
  m = LiveMap{};
}

// Map the rank's live state file (an empty path: stop writing it). ``collective_ns_at``: the
// running total of the time in collectives, which each completion raises.
bool set_live(const std::string& path, int64_t collective_at, int64_t done_at, int64_t left_at,
              int64_t stage_at, int64_t collective_ns_at) {
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  unmap_live(s.live);
  if (path.empty()) {
    return true;
  }
  int fd = open(path.c_str(), O_RDWR);
  if (fd < 0) {
    return false;
  }
  const size_t size = static_cast<size_t>(std::max(stage_at + 32, collective_ns_at + 8));
  void* base = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (base == MAP_FAILED) {
    return false;
  }
  s.live.base = static_cast<char*>(base);
  s.live.collective_at = collective_at;
  s.live.done_at = done_at;
  s.live.left_at = left_at;
  s.live.stage_at = stage_at;
  s.live.collective_ns_at = collective_ns_at;
  s.live.size = size;
  return true;
}

void arm_running(bool armed) {
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.live.armed = armed;
}

using Row = std::tuple<int64_t, int32_t, int64_t, int64_t, int64_t, int64_t, int32_t, int32_t,
                       int64_t, int32_t, int64_t>;

// Finished rows (all rows on ``final``, unfinished with duration -1), in issue order:
// (step, op, start_ns, dur_ns, nbytes, count, dtype, group, seq, tag, group-local peer).
std::vector<Row> drain(bool final) {
  auto& s = state();
  std::vector<Row> out;
  std::lock_guard<std::mutex> lock(s.mu);
  for (auto& r : s.records) {
    if (r.drained || (r.end < 0 && !final)) {
      continue;
    }
    out.emplace_back(r.step, r.op, r.start, r.end >= 0 ? r.end - r.start : -1, r.nbytes, r.count,
                     r.dtype, r.group, r.seq, r.tag, r.root);
    r.drained = true;
  }
  while (!s.records.empty() && s.records.front().drained) {
    s.records.pop_front();
    s.first_id++;
  }
  return out;
}

std::vector<std::string> take_errors() {
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  std::vector<std::string> out;
  out.swap(s.errors);
  return out;
}

int32_t dtype_code(const at::Tensor& t) { return static_cast<int32_t>(t.scalar_type()); }

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("configure", &configure);
  m.def("add_group", &add_group);
  m.def("attach", &attach);
  m.def("detach", &detach);
  m.def("set_tag", &set_tag);
  m.def("set_step", &set_step);
  m.def("set_live", &set_live);
  m.def("arm_running", &arm_running);
  m.def("drain", &drain);
  m.def("take_errors", &take_errors);
  m.def("dtype_code", &dtype_code);
}
