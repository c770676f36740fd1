// The c10d ops intercepted at the dispatcher, in C++: what the probe sees on a torch without
// process-group hooks (2.11), at the cost of its C++ hooks (docs/probe.md, "Cost").
//
// Every collective a process group runs goes through the dispatcher: ProcessGroup::allreduce
// calls the op c10d::allreduce_, whose CPU and CUDA kernels (torch's Ops.cpp) call the
// backend. The probe registers a kernel for each c10d op under BackendSelect, a key every
// call carries (it is in the thread's default included set, which autograd's and inference
// mode's guards leave alone) and that no c10d op uses. That kernel appends the row, then
// redispatches below BackendSelect to torch's own kernel, and completes the row from the work
// it returns, as the hooks do. No torch kernel is replaced, so releasing the library restores
// torch's dispatch exactly.
//
// The hot ops get unboxed kernels with this torch's C++ signature (those of ProcessGroup.hpp
// in torch 2.14); where a torch's signature differs, registering one fails, and the op gets
// the boxed kernel, which reads its arguments by name from the op's schema.

#include "native_state.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <torch/library.h>

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace scalescope {
namespace {

const c10::DispatchKeySet kBelow(c10::DispatchKeySet::FULL_AFTER, c10::DispatchKey::BackendSelect);

struct Slot {
  std::optional<c10::OperatorHandle> handle;
  int32_t code = -1;
  int sized = -1, peer = -1, group = -1, async_op = -1;  // argument indices (-1: none)
  bool times_group = false, p2p = false, returns_work = false;
  size_t nargs = 0;
};

// The watched process groups, read on every collective without a lock: a slot's group is
// published after its number, and a group let go leaves a null slot for the next one.
constexpr size_t kGroups = 256;

struct Watched {
  std::array<std::atomic<const void*>, kGroups> pg{};
  std::array<int32_t, kGroups> group{};
  std::atomic<size_t> used{0};
};

struct Interception {
  std::mutex mu;  // writers of ``watched``
  Watched watched;
  std::unique_ptr<torch::Library> library;
  std::vector<std::string> kernels;                        // "op (unboxed|boxed)"
  std::vector<c10::intrusive_ptr<c10::OperatorKernel>> kept;  // never freed: a call in flight
};

Interception& interception() {
  static Interception* i = new Interception();
  return *i;
}

int32_t group_of(const void* pg) {
  const Watched& w = interception().watched;
  const size_t used = w.used.load(std::memory_order_acquire);
  for (size_t i = 0; i < used; ++i) {
    if (w.pg[i].load(std::memory_order_acquire) == pg) {
      return w.group[i];
    }
  }
  return -1;
}

using PG = c10::intrusive_ptr<c10d::ProcessGroup>;
using WorkPtr = c10::intrusive_ptr<c10d::Work>;

// --- the unboxed kernels: each argument read by its type, at the slot's indices ---

struct Seen {
  const c10d::ProcessGroup* pg = nullptr;
  Sized size;
  int64_t root = -1;
  bool async_op = true;  // an op without the flag: never completed by the next one's issue
};

void see(const Slot& s, size_t i, const PG& v, Seen& out) {
  if (static_cast<int>(i) == s.group) {
    out.pg = v.get();
  }
}
void see(const Slot& s, size_t i, const at::Tensor& v, Seen& out) {
  remember_storage(v);
  if (static_cast<int>(i) == s.sized) {
    out.size.add(v);
  }
}
void see(const Slot& s, size_t i, const at::TensorList& v, Seen& out) {
  if (!v.empty()) {
    remember_storage(v[0]);
  }
  if (static_cast<int>(i) == s.sized) {
    for (const auto& t : v) {
      out.size.add(t);
    }
  }
}
void see(const Slot& s, size_t i, const std::vector<std::vector<at::Tensor>>& v, Seen& out) {
  if (static_cast<int>(i) == s.sized) {
    for (const auto& list : v) {
      for (const auto& t : list) {
        out.size.add(t);
      }
    }
  }
}
void see(const Slot& s, size_t i, int64_t v, Seen& out) {
  if (static_cast<int>(i) == s.peer) {
    out.root = v;
  }
}
// The hot ops' only bool argument is ``asyncOp``.
void see(const Slot&, size_t, bool v, Seen& out) { out.async_op = v; }
template <class T>
void see(const Slot&, size_t, const T&, Seen&) {}

int64_t issue(const Slot& s, Seen& seen) {
  if (seen.pg == nullptr) {
    return -1;
  }
  const int32_t group = group_of(seen.pg);
  if (group < 0) {
    return -1;
  }
  if (s.times_group) {
    seen.size.times(seen.pg->getSize());
  }
  return begin_row(Issue{group, s.code, seen.size, seen.root});
}

template <class... Args>
int64_t issue_unboxed(const Slot& s, Seen& seen, const Args&... args) {
  if (unrecorded_now()) {
    return -1;
  }
  try {
    size_t i = 0;
    (see(s, i++, args, seen), ...);
    return issue(s, seen);
  } catch (const std::exception& e) {
    note_error(std::string("a collective not recorded: ") + e.what());
    return -1;
  }
}

const WorkPtr& work_of(const WorkPtr& w) { return w; }
template <class T>
const WorkPtr& work_of(const std::tuple<T, WorkPtr>& r) {
  return std::get<1>(r);
}

constexpr size_t kFast = 16;
std::array<Slot, kFast> fast_slots;

template <size_t K, class Sig>
struct Fast;

template <size_t K, class Ret, class... Args>
struct Fast<K, Ret(Args...)> {
  static Ret kernel(c10::DispatchKeySet ks, Args... args) {
    static const auto op = fast_slots[K].handle->template typed<Ret(Args...)>();
    const Slot& s = fast_slots[K];
    Seen seen;
    const int64_t id = issue_unboxed(s, seen, args...);
    Ret out = op.redispatch(ks & kBelow, std::forward<Args>(args)...);
    end_row(id, work_of(out), s.p2p, seen.async_op);
    return out;
  }

  static torch::CppFunction function() {
    return torch::CppFunction::makeFromUnboxedFunction(TORCH_FN(kernel));
  }
};

using TL = at::TensorList;
using TLL = std::vector<std::vector<at::Tensor>>;
using RO = c10::intrusive_ptr<c10d::ReduceOp>;
using ListWork = std::tuple<std::vector<at::Tensor>, WorkPtr>;
using ListsWork = std::tuple<TLL, WorkPtr>;
using TensorWork = std::tuple<at::Tensor, WorkPtr>;

// torch 2.14's C++ signatures of the hot ops (ProcessGroup.hpp's typed<> calls).
struct FastOp {
  const char* name;
  torch::CppFunction (*function)();
};
const FastOp kFastOps[] = {
    {"allreduce_",
     Fast<0, ListWork(TL, const PG&, const RO&, const std::optional<at::Tensor>&, bool,
                      int64_t)>::function},
    {"broadcast_", Fast<1, ListWork(TL, const PG&, int64_t, int64_t, bool, int64_t)>::function},
    {"_allgather_base_",
     Fast<2, TensorWork(at::Tensor&, at::Tensor&, const PG&, bool, int64_t)>::function},
    {"_reduce_scatter_base_",
     Fast<3, TensorWork(at::Tensor&, at::Tensor&, const PG&, const RO&, bool, int64_t)>::function},
    {"allgather_", Fast<4, ListsWork(const TLL&, TL, const PG&, bool, int64_t)>::function},
    {"reduce_scatter_",
     Fast<5, ListWork(const TL&, const TLL&, const PG&, const RO&, bool, int64_t)>::function},
    {"allreduce_coalesced_", Fast<6, WorkPtr(TL, const PG&, const RO&, bool, int64_t)>::function},
    {"allgather_into_tensor_coalesced_", Fast<7, WorkPtr(TL, TL, const PG&, bool)>::function},
    {"reduce_scatter_tensor_coalesced_",
     Fast<8, WorkPtr(TL, TL, const PG&, const RO&, bool, int64_t)>::function},
    {"alltoall_base_",
     Fast<9, WorkPtr(at::Tensor&, at::Tensor&, const PG&, std::vector<int64_t>,
                     std::vector<int64_t>, bool, int64_t)>::function},
    {"send", Fast<10, WorkPtr(TL, const PG&, int64_t, int64_t)>::function},
    {"recv_", Fast<11, WorkPtr(TL, const PG&, int64_t, int64_t)>::function},
    {"barrier",
     Fast<12, WorkPtr(at::Tensor, const PG&, const std::vector<int64_t>&, bool, int64_t)>::function},
    {"reduce_",
     Fast<13, WorkPtr(TL, const PG&, const RO&, int64_t, int64_t, bool, int64_t)>::function},
};
static_assert(sizeof(kFastOps) / sizeof(kFastOps[0]) <= kFast, "a slot for each fast op");

// --- the boxed kernel: arguments read from the stack ---

void remember_boxed(c10::ArrayRef<c10::IValue> args) {
  for (const auto& v : args) {
    if (v.isTensor()) {
      remember_storage(v.toTensor());
    } else if (v.isTensorList() && !v.toTensorList().empty()) {
      remember_storage(v.toTensorList().get(0));
    }
  }
}

void see_boxed(const c10::IValue& v, Sized& out) {
  if (v.isTensor()) {
    out.add(v.toTensor());
  } else if (v.isTensorList()) {
    for (const at::Tensor t : v.toTensorList()) {
      out.add(t);
    }
  } else if (v.isList()) {
    for (const auto& inner : v.toListRef()) {
      see_boxed(inner, out);
    }
  }
}

class Boxed final : public c10::OperatorKernel {
 public:
  explicit Boxed(Slot slot) : s_(std::move(slot)) {}

  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack) {
    Seen seen;
    const int64_t id =
        unrecorded_now() ? -1 : issue_boxed(torch::jit::last(*stack, s_.nargs), seen);
    op.redispatchBoxed(ks & kBelow, stack);
    if (id < 0) {
      return;
    }
    WorkPtr work;
    try {
      work = s_.returns_work ? stack->back().toCustomClass<c10d::Work>() : WorkPtr();
    } catch (const std::exception& e) {  // the row stays incomplete
      note_error(std::string("a collective has no completion: ") + e.what());
      return;
    }
    end_row(id, work, s_.p2p, seen.async_op);
  }

 private:
  int64_t issue_boxed(c10::ArrayRef<c10::IValue> args, Seen& seen) {
    try {
      const auto pg = args[s_.group].toCustomClass<c10d::ProcessGroup>();
      seen.pg = pg.get();
      if (s_.sized >= 0) {
        see_boxed(args[s_.sized], seen.size);
      }
      if (s_.peer >= 0) {
        seen.root = args[s_.peer].toInt();
      }
      if (s_.async_op >= 0 && args[s_.async_op].isBool()) {
        seen.async_op = args[s_.async_op].toBool();
      }
      remember_boxed(args);
      return issue(s_, seen);
    } catch (const std::exception& e) {
      note_error(std::string("a collective not recorded: ") + e.what());
      return -1;
    }
  }

  Slot s_;
};

int index_of(const c10::FunctionSchema& schema, const std::string& name) {
  const auto& args = schema.arguments();
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].name() == name) {
      return static_cast<int>(i);
    }
  }
  return -1;
}

int group_index(const c10::FunctionSchema& schema) {
  const auto& args = schema.arguments();
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].type()->str().find("c10d.ProcessGroup") != std::string::npos) {
      return static_cast<int>(i);
    }
  }
  return -1;
}

// The slot of one op of this torch; a problem when its schema lacks what the spec names.
std::optional<std::string> slot_for(const OpSpec& spec, const c10::OperatorHandle& op,
                                    Slot& slot) {
  const auto& schema = op.schema();
  slot.handle = op;
  slot.code = spec.code;
  slot.times_group = spec.times_group;
  slot.p2p = spec.p2p;
  slot.nargs = schema.arguments().size();
  slot.group = group_index(schema);
  slot.sized = spec.sized.empty() ? -1 : index_of(schema, spec.sized);
  slot.peer = spec.peer.empty() ? -1 : index_of(schema, spec.peer);
  slot.async_op = index_of(schema, "async_op");
  const auto& returns = schema.returns();
  slot.returns_work =
      !returns.empty() && returns.back().type()->str().find("c10d.Work") != std::string::npos;
  if (slot.group < 0 || (!spec.sized.empty() && slot.sized < 0) ||
      (!spec.peer.empty() && slot.peer < 0)) {
    return spec.name + ": its schema has not the arguments the probe reads (" + schema.name() +
           ")";
  }
  return std::nullopt;
}

const FastOp* fast_op(const std::string& name, size_t& k) {
  for (k = 0; k < sizeof(kFastOps) / sizeof(kFastOps[0]); ++k) {
    if (name == kFastOps[k].name) {
      return &kFastOps[k];
    }
  }
  return nullptr;
}

std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

// Register one op's kernel (unboxed where this torch's signature is 2.14's); why not, or "".
std::string register_op(Interception& in, const OpSpec& spec, const c10::OperatorHandle& op) {
  Slot slot;
  if (auto problem = slot_for(spec, op, slot)) {
    return *problem;
  }
  size_t k = 0;
  if (const FastOp* fast = fast_op(spec.name, k)) {
    fast_slots[k] = slot;
    try {
      in.library->impl(spec.name.c_str(), fast->function());
      in.kernels.push_back(spec.name + " (unboxed)");
      return "";
    } catch (const std::exception&) {  // this torch's C++ signature differs: boxed
    }
  }
  auto functor = std::make_unique<Boxed>(slot);
  Boxed* raw = functor.get();
  auto function = torch::CppFunction::makeFromBoxedFunctor(std::move(functor));
  in.kept.push_back(c10::intrusive_ptr<c10::OperatorKernel>::reclaim_copy(raw));
  try {
    in.library->impl(spec.name.c_str(), std::move(function));
  } catch (const std::exception& e) {
    return spec.name + ": " + first_line(e.what());
  }
  in.kernels.push_back(spec.name + " (boxed)");
  return "";
}

// --- ``_c10d_functional::wait_tensor``: the wait of a functional collective's output ---

struct WaitInterception {
  std::unique_ptr<torch::Library> library;
  std::optional<c10::OperatorHandle> handle;
};

WaitInterception& wait_interception() {
  static WaitInterception* w = new WaitInterception();
  return *w;
}

at::Tensor wait_kernel(c10::DispatchKeySet ks, const at::Tensor& t) {
  static const auto op = wait_interception().handle->typed<at::Tensor(const at::Tensor&)>();
  at::Tensor out = op.redispatch(ks & kBelow, t);
  waited_tensor(t);
  return out;
}

}  // namespace

std::string intercept_waits() {
  release_waits();
  auto op = c10::Dispatcher::singleton().findSchema({"_c10d_functional::wait_tensor", ""});
  if (!op) {
    return "";  // a torch without functional collectives
  }
  auto& w = wait_interception();
  w.handle = *op;
  try {
    w.library = std::make_unique<torch::Library>(torch::Library::IMPL, "_c10d_functional",
                                                 c10::DispatchKey::BackendSelect, __FILE__,
                                                 __LINE__);
    w.library->impl("wait_tensor", torch::CppFunction::makeFromUnboxedFunction(TORCH_FN(wait_kernel)));
  } catch (const std::exception& e) {
    w.library.reset();
    return "wait_tensor not intercepted: " + first_line(e.what());
  }
  return "";
}

void release_waits() { wait_interception().library.reset(); }

// Register the probe's kernel for each op of ``specs`` this torch has; the problems (an op
// not intercepted, and why). Intercepting again first releases the previous kernels.
std::vector<std::string> intercept(const std::vector<OpSpec>& specs) {
  release();
  auto& in = interception();
  std::vector<std::string> problems;
  try {
    in.library = std::make_unique<torch::Library>(
        torch::Library::IMPL, "c10d", c10::DispatchKey::BackendSelect, __FILE__, __LINE__);
  } catch (const std::exception& e) {
    return {"the c10d ops cannot be intercepted: " + first_line(e.what())};
  }
  for (const auto& spec : specs) {
    auto op = c10::Dispatcher::singleton().findSchema({"c10d::" + spec.name, ""});
    if (!op) {
      continue;  // an op this torch does not have
    }
    std::string problem = register_op(in, spec, *op);
    if (!problem.empty()) {
      problems.push_back(problem);
    }
  }
  return problems;
}

std::vector<std::string> intercepted() { return interception().kernels; }

void release() {
  auto& in = interception();
  in.library.reset();  // torch's dispatch as it was
  in.kernels.clear();
  std::lock_guard<std::mutex> lock(in.mu);
  for (auto& slot : in.watched.pg) {
    slot.store(nullptr, std::memory_order_release);
  }
}

void watch_group(const c10::intrusive_ptr<c10d::ProcessGroup>& pg, int32_t group) {
  auto& in = interception();
  std::lock_guard<std::mutex> lock(in.mu);
  Watched& w = in.watched;
  const size_t used = w.used.load(std::memory_order_relaxed);
  size_t i = 0;
  while (i < used && w.pg[i].load(std::memory_order_relaxed) != nullptr &&
         w.pg[i].load(std::memory_order_relaxed) != pg.get()) {
    ++i;
  }
  if (i == kGroups) {
    throw std::runtime_error("more than 256 process groups watched at once");
  }
  w.pg[i].store(nullptr, std::memory_order_release);
  w.group[i] = group;
  w.pg[i].store(pg.get(), std::memory_order_release);
  if (i == used) {
    w.used.store(used + 1, std::memory_order_release);
  }
}

void unwatch_group(const c10::intrusive_ptr<c10d::ProcessGroup>& pg) {
  auto& in = interception();
  std::lock_guard<std::mutex> lock(in.mu);
  for (auto& slot : in.watched.pg) {
    if (slot.load(std::memory_order_relaxed) == pg.get()) {
      slot.store(nullptr, std::memory_order_release);
    }
  }
}

}  // namespace scalescope
