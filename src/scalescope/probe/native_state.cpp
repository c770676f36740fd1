// The probe's C++ state: each collective's row from issue to completion, the rank's live
// state, the threads that see works without a future complete, and (built beside a GPU) the
// CUDA events of a collective on a device. Whichever way saw the collective (torch's group
// hooks or the intercepted c10d ops) appends its row here; Python drains the finished rows
// at each flush. Nothing here throws into a collective: a problem is kept for take_errors().

#include "native_state.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <utility>

#ifdef SCALESCOPE_DEVICE_TIMING
#include <c10/core/Event.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#endif

namespace scalescope {

int64_t now_ns() {
  // CLOCK_MONOTONIC, as Python's time.perf_counter_ns on Linux.
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void Sized::add(const at::Tensor& t) {
  if (dtype < 0) {
    dtype = static_cast<int32_t>(t.scalar_type());
    cuda = t.is_cuda();
    device = cuda ? static_cast<int8_t>(t.get_device()) : -1;
  }
  nbytes += static_cast<int64_t>(t.nbytes());
  count += t.numel();
}

void Sized::times(int64_t n) {
  nbytes *= n;
  count *= n;
}

namespace {

#ifdef SCALESCOPE_DEVICE_TIMING
// A collective on a CUDA device: an event on the current stream at issue, and one recorded
// once the work completes (the future's callback runs on a stream that waits for it), as
// probe/cuda_timing.py does. Not verified on a GPU yet (docs/probe.md).
struct DeviceSpan {
  c10::Event start{c10::DeviceType::CUDA, c10::EventFlag::BACKEND_DEFAULT};
  c10::Event end{c10::DeviceType::CUDA, c10::EventFlag::BACKEND_DEFAULT};
  bool ended = false;  // the end event is recorded (s.mu)
  c10::DeviceIndex device = 0;
};

c10::Stream current_stream(c10::DeviceIndex device) {
  c10::impl::VirtualGuardImpl impl(c10::DeviceType::CUDA);
  return impl.getStream(c10::Device(c10::DeviceType::CUDA, device));
}
#else
struct DeviceSpan {};
#endif

struct Record {
  int64_t step, start, end, nbytes, count, seq;
  int64_t root;  // a send's or recv's peer, group-local (-1: none)
  int32_t group, tag;
  int32_t op, dtype;
  bool drained;
  std::shared_ptr<DeviceSpan> span;  // a device row's events (its end is resolved at drain)
};

struct Group {
  std::string label;  // as the live state holds it: 48 bytes at most
  int64_t seq;
  int64_t slot_at = 0;  // its time slot in the live state (GROUP_SLOT "<iiiiq"); 0: none
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

// A work without a future whose caller's wait completes it: never waited for by the probe
// (gloo's reduce-scatter fills its output in ``wait``, each time it is called).
// ``storages``: those of the tensors it was issued with; a functional collective's
// ``wait_tensor`` of one completes its row (waited_tensor), even when that wait freed the
// work (the functional ops' registry holds it until then).
struct Awaited {
  c10::weak_intrusive_ptr<c10d::Work> work;
  int64_t id;
  std::vector<const void*> storages;
};

// Awaited works beyond this many: the freed ones are swept out.
constexpr size_t kAwaitedSweep = 4096;

struct State {
  std::mutex mu;
  std::deque<Record> records;
  int64_t first_id = 0;
  std::deque<Group> groups;
  std::vector<char> unrecorded, setup;  // by tag code
  std::vector<std::string> op_names;    // by op code, for the live state
  std::atomic<int64_t> step{0};
  LiveMap live;
  std::vector<std::string> errors;
  Waits polled;
  std::unordered_map<const c10d::Work*, Awaited> awaited;
  std::unordered_map<const void*, std::pair<const c10d::Work*, int64_t>> awaited_storage;
  std::vector<std::shared_ptr<DeviceSpan>> spare;  // resolved spans: their events re-recorded
};

State& state() {
  static State* s = new State();  // never freed: a waiting thread may outlive exit
  return *s;
}

thread_local int32_t tag_now = 0;
thread_local const c10d::Work* last_sync = nullptr;  // this thread's last sync work awaited
thread_local std::vector<const void*> issue_storages;  // of the collective being issued

bool flagged(const std::vector<char>& flags, int32_t code) {
  return code >= 0 && code < static_cast<int32_t>(flags.size()) && flags[code];
}

void put_text(char* at, size_t width, const std::string& text) {
  std::memset(at, 0, width);
  std::memcpy(at, text.data(), std::min(width, text.size()));
}

void put_int(char* at, int64_t value) { std::memcpy(at, &value, sizeof value); }

Record* record_of(State& s, int64_t id) {
  int64_t i = id - s.first_id;
  if (i < 0 || i >= static_cast<int64_t>(s.records.size())) {
    return nullptr;
  }
  return &s.records[i];
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

void add_int(char* at, int64_t value) {
  int64_t sum;
  std::memcpy(&sum, at, sizeof sum);
  put_int(at, sum + value);
}

// The host left collective ``id`` (``r``) at ``end``: the live state's last completion, its
// running totals of time in collectives and in its group's, and the collective it is in
// (s.mu held).
void live_leave(State& s, int64_t id, const Record& r, int64_t end) {
  if (s.live.base == nullptr) {
    return;
  }
  put_int(s.live.base + s.live.done_at, end);
  add_int(s.live.base + s.live.collective_ns_at, end - r.start);
  const bool known = r.group >= 0 && r.group < static_cast<int32_t>(s.groups.size());
  const int64_t slot = known ? s.groups[r.group].slot_at : 0;
  if (slot > 0 && static_cast<size_t>(slot + 24) <= s.live.size) {
    add_int(s.live.base + slot + 16, end - r.start);
  }
  if (s.live.last_entered == id) {
    put_int(s.live.base + s.live.left_at, end);
  }
}

// s.mu held.
void complete_locked(State& s, int64_t id, int64_t end) {
  Record* r = record_of(s, id);
  if (r == nullptr || r->end >= 0) {
    return;
  }
  r->end = end;
  live_leave(s, id, *r, end);
}

void complete(int64_t id, int64_t end) {
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  complete_locked(s, id, end);
}

// A work without a future completes when its caller's wait does. gloo's send and recv works
// consume their buffer's completion in ``wait``, so a second waiter would block the caller:
// one thread polls their ``isCompleted`` (every 10 us at first, at most every 250 us). Other
// such works (gloo's reduce-scatter) never say ``isCompleted``, and their ``wait`` is not
// the probe's to call: it copies the result into the caller's output each time, over what
// the caller wrote there since. They wait for their caller (``await_caller``).
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

c10::intrusive_ptr<c10::ivalue::Future> future_of(const c10::intrusive_ptr<c10d::Work>& work) {
  try {
    return work->getFuture();
  } catch (const std::exception&) {
    return {};
  }
}

// Completed by the caller's ``Work.wait`` from Python (``waited``), or, for a sync call,
// by this thread's next collective (a caller that waits in C++ issues it after its wait).
// Drop an awaited work and its storages. s.mu held.
void forget(State& s, std::unordered_map<const c10d::Work*, Awaited>::iterator it) {
  for (const void* storage : it->second.storages) {
    auto found = s.awaited_storage.find(storage);
    if (found != s.awaited_storage.end() && found->second.first == it->first) {
      s.awaited_storage.erase(found);
    }
  }
  s.awaited.erase(it);
}

// Works freed without a wait the probe saw (their caller waited in C++). s.mu held.
void sweep_awaited(State& s) {
  for (auto it = s.awaited.begin(); it != s.awaited.end();) {
    auto next = std::next(it);
    if (it->second.work.expired()) {
      forget(s, it);
    }
    it = next;
  }
}

void await_caller(int64_t id, const c10::intrusive_ptr<c10d::Work>& work, bool async_op) {
  std::vector<const void*> storages = issue_storages;
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.awaited.size() >= kAwaitedSweep) {
    sweep_awaited(s);
  }
  auto old = s.awaited.find(work.get());  // a freed work's address, reused
  if (old != s.awaited.end()) {
    forget(s, old);
  }
  for (const void* storage : storages) {
    s.awaited_storage.insert_or_assign(storage, std::make_pair(work.get(), id));
  }
  s.awaited.emplace(work.get(), Awaited{c10::weak_intrusive_ptr<c10d::Work>(work), id,
                                        std::move(storages)});
  last_sync = async_op ? nullptr : work.get();
}

// The entry of ``key`` whose work is still alive (one of a freed work is dropped). s.mu held.
Awaited* live_awaited(State& s, const c10d::Work* key) {
  auto it = s.awaited.find(key);
  if (it == s.awaited.end()) {
    return nullptr;
  }
  if (it->second.work.expired()) {
    forget(s, it);
    return nullptr;
  }
  return &it->second;
}

// Complete the row of ``key``'s work at ``end``, if it awaits its caller. s.mu held.
void complete_awaited(State& s, const c10d::Work* key, int64_t end) {
  Awaited* a = live_awaited(s, key);
  if (a == nullptr) {
    return;
  }
  const int64_t id = a->id;
  forget(s, s.awaited.find(key));
  complete_locked(s, id, end);
}

// This thread issues another collective: its last sync call was waited for.
void settle() {
  if (last_sync == nullptr) {
    return;
  }
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  complete_awaited(s, last_sync, now_ns());
  last_sync = nullptr;
}

void end_on_host(int64_t id, const c10::intrusive_ptr<c10d::Work>& work, bool p2p,
                 bool async_op) {
  if (!work) {
    complete(id, now_ns());
    return;
  }
  if (auto future = future_of(work)) {
    future->addCallback([id](c10::ivalue::Future&) { complete(id, now_ns()); });
  } else if (p2p) {
    watch(state().polled, poll_loop, work, id);
  } else {
    await_caller(id, work, async_op);
  }
}

#ifdef SCALESCOPE_DEVICE_TIMING
// A span whose events this device created before (creating a CUDA event costs more than
// recording one), or a new one; its start recorded on the current stream.
std::shared_ptr<DeviceSpan> start_span(int8_t device) {
  const auto index = static_cast<c10::DeviceIndex>(device);
  std::shared_ptr<DeviceSpan> span;
  {
    auto& s = state();
    std::lock_guard<std::mutex> lock(s.mu);
    for (size_t i = s.spare.size(); i-- > 0;) {
      if (s.spare[i]->device == index) {
        span = std::move(s.spare[i]);
        s.spare.erase(s.spare.begin() + static_cast<std::ptrdiff_t>(i));
        break;
      }
    }
  }
  if (!span) {
    span = std::make_shared<DeviceSpan>();
    span->device = index;
  }
  span->ended = false;
  span->start.record(current_stream(index));
  return span;
}

void record_end(const std::shared_ptr<DeviceSpan>& span) {
  span->end.record(current_stream(span->device));
  std::lock_guard<std::mutex> lock(state().mu);
  span->ended = true;
}

// The host left a device row now; its duration is the events' once they pass (drain).
void end_on_device(int64_t id, const std::shared_ptr<DeviceSpan>& span,
                   const c10::intrusive_ptr<c10d::Work>& work) {
  auto& s = state();
  {
    std::lock_guard<std::mutex> lock(s.mu);
    Record* r = record_of(s, id);
    if (r != nullptr) {
      live_leave(s, id, *r, now_ns());
    }
  }
  auto future = work ? future_of(work) : c10::intrusive_ptr<c10::ivalue::Future>();
  if (future) {
    future->addCallback([span](c10::ivalue::Future&) { record_end(span); });
  } else {
    record_end(span);
  }
}

// Device rows whose end event passed get their duration (all of them, waited for, on
// ``final``); their spans are kept for the next collectives. s.mu held.
void resolve_devices(State& s, bool final) {
  for (auto& r : s.records) {
    if (r.end >= 0 || !r.span || !r.span->ended) {
      continue;
    }
    try {
      if (final) {
        r.span->end.synchronize();
      }
      if (r.span->end.query()) {
        double ms = r.span->start.elapsedTime(r.span->end);
        r.end = r.start + static_cast<int64_t>(std::llround(ms * 1e6));
        if (s.spare.size() < 64) {
          s.spare.push_back(std::move(r.span));
        }
        r.span.reset();
      }
    } catch (const std::exception& e) {
      r.span.reset();  // written as never completed
      if (s.errors.size() < 16) {
        s.errors.push_back(std::string("CUDA events not resolved: ") + e.what());
      }
    }
  }
}
#endif

}  // namespace

void note_error(const std::string& text) {
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.errors.size() < 16 && std::find(s.errors.begin(), s.errors.end(), text) == s.errors.end()) {
    s.errors.push_back(text);
  }
}

bool unrecorded_now() { return flagged(state().unrecorded, tag_now); }

bool device_timing() {
#ifdef SCALESCOPE_DEVICE_TIMING
  return true;
#else
  return false;
#endif
}

int64_t begin_row(const Issue& in) {
  settle();
  auto& s = state();
  const int32_t tag = tag_now;
  if (flagged(s.unrecorded, tag)) {
    return -1;
  }
  std::shared_ptr<DeviceSpan> span;
  if (in.size.cuda) {
#ifdef SCALESCOPE_DEVICE_TIMING
    span = start_span(in.size.device);
#else
    note_error("a collective on a CUDA device not recorded: the probe's C++ module was built "
               "without CUDA");
    return -1;
#endif
  }
  const int64_t start = now_ns();
  std::lock_guard<std::mutex> lock(s.mu);
  Group& g = s.groups.at(in.group);
  s.records.push_back(Record{s.step.load(), start, -1, in.size.nbytes, in.size.count, g.seq++,
                             in.root, in.group, tag, in.op, in.size.dtype, false,
                             std::move(span)});
  const int64_t id = s.first_id + static_cast<int64_t>(s.records.size()) - 1;
  live_enter(s, g, s.records.back(), id);
  return id;
}

void remember_storage(const at::Tensor& t) {
  if (t.defined() && t.has_storage()) {
    issue_storages.push_back(t.storage().unsafeGetStorageImpl());
  }
}

// The storages of the collective being issued are its own: cleared as its row ends.
struct StoragesCleared {
  ~StoragesCleared() { issue_storages.clear(); }
};

void end_row(int64_t id, const c10::intrusive_ptr<c10d::Work>& work, bool p2p, bool async_op) {
  StoragesCleared cleared;
  if (id < 0) {
    return;
  }
  try {
#ifdef SCALESCOPE_DEVICE_TIMING
    std::shared_ptr<DeviceSpan> span;
    {
      auto& s = state();
      std::lock_guard<std::mutex> lock(s.mu);
      Record* r = record_of(s, id);
      span = r == nullptr ? nullptr : r->span;
    }
    if (span) {
      end_on_device(id, span, work);
      return;
    }
#endif
    end_on_host(id, work, p2p, async_op);
  } catch (const std::exception& e) {
    note_error(std::string("a collective has no completion: ") + e.what());
  }
}

void waited(const c10::intrusive_ptr<c10d::Work>& work) {
  auto& s = state();
  if (!work) {
    return;
  }
  const int64_t end = now_ns();
  std::lock_guard<std::mutex> lock(s.mu);
  if (!s.awaited.empty()) {
    complete_awaited(s, work.get(), end);
  }
}

void waited_tensor(const at::Tensor& t) {
  if (!t.defined() || !t.has_storage()) {
    return;
  }
  const void* key = t.storage().unsafeGetStorageImpl();
  const int64_t end = now_ns();
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  auto it = s.awaited_storage.find(key);
  if (it == s.awaited_storage.end()) {
    return;
  }
  const auto [work, id] = it->second;
  s.awaited_storage.erase(it);
  auto found = s.awaited.find(work);
  if (found != s.awaited.end() && found->second.id == id) {
    forget(s, found);
  }
  complete_locked(s, id, end);  // also when its work was freed in that wait (the op's registry)
}

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

void set_group_slot(int32_t code, int64_t slot_at) {
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.groups.at(code).slot_at = slot_at;
}

void set_tag(int32_t code) { tag_now = code; }

void set_step(int64_t step) { state().step.store(step); }

namespace {
void unmap_live(LiveMap& m) {
  if (m.base != nullptr) {
    munmap(m.base, m.size);
  }
  m = LiveMap{};
}
}  // namespace

// Map the rank's live state file of ``size`` bytes (an empty path: stop writing it).
// ``collective_ns_at``: the running total of the time in collectives, which each completion
// raises.
bool set_live(const std::string& path, int64_t collective_at, int64_t done_at, int64_t left_at,
              int64_t stage_at, int64_t collective_ns_at, int64_t size_bytes) {
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
  const size_t size =
      static_cast<size_t>(std::max({stage_at + 32, collective_ns_at + 8, size_bytes}));
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

// Finished rows (all rows on ``final``, unfinished with duration -1), in issue order:
// (step, op, start_ns, dur_ns, nbytes, count, dtype, group, seq, tag, group-local peer).
std::vector<Row> drain(bool final) {
  auto& s = state();
  std::vector<Row> out;
  std::lock_guard<std::mutex> lock(s.mu);
#ifdef SCALESCOPE_DEVICE_TIMING
  resolve_devices(s, final);
#endif
  for (auto& r : s.records) {
    if (r.drained || (r.end < 0 && !final)) {
      continue;
    }
    out.emplace_back(r.step, r.op, r.start, r.end >= 0 ? r.end - r.start : -1, r.nbytes, r.count,
                     r.dtype, r.group, r.seq, r.tag, r.root);
    r.drained = true;
    r.span.reset();
  }
  sweep_awaited(s);
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

}  // namespace scalescope
