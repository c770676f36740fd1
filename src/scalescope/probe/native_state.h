// What the probe's C++ side shares between its two ways of seeing a collective: the
// process-group hooks (native_hooks.cpp, a torch with them) and the c10d ops intercepted at
// the dispatcher (native_dispatch.cpp, any torch). native_state.cpp keeps the rows, the live
// state and the completions; native_module.cpp is what Python calls (docs/probe.md, "Cost").

#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/intrusive_ptr.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

namespace scalescope {

int64_t now_ns();

// A collective's payload by the nccl-tests convention: its bytes, elements, the dtype of its
// first tensor, and whether that tensor is on a CUDA device.
struct Sized {
  int64_t nbytes = 0, count = 0;
  int32_t dtype = -1;
  bool cuda = false;
  int8_t device = -1;  // the CUDA device's index

  void add(const at::Tensor& t);
  void times(int64_t n);
};

// A collective at issue: the group's number (add_group), the op's code (configure's names),
// its size, and a send's or recv's group-local peer (-1: none).
struct Issue {
  int32_t group;
  int32_t op;
  Sized size;
  int64_t root;
};

// This thread's tag is one the probe leaves out (its own messages, DDP's checks).
bool unrecorded_now();

// Append the row (and its CUDA start event on a device); its id, or -1 when not recorded.
int64_t begin_row(const Issue& issue);

// The caller got the work: complete the row when the work does (a device row: when a CUDA
// event after it passes). ``p2p``: a send's or recv's work, polled rather than waited for.
// A work without a future completes when its caller's wait returns (``waited``) or, issued
// sync (``async_op`` false), when the thread issues its next collective. The probe never
// waits for a work itself: that is the caller's, and gloo's reduce-scatter writes its output
// in each ``wait``.
void end_row(int64_t id, const c10::intrusive_ptr<c10d::Work>& work, bool p2p, bool async_op);

// The caller's ``Work.wait`` of ``work`` returned (Python's, probe/completion.py).
void waited(const c10::intrusive_ptr<c10d::Work>& work);

// A tensor the collective being issued reads or writes (the first of a list): a functional
// collective's ``wait_tensor`` of it completes the collective's work (``waited_tensor``).
void remember_storage(const at::Tensor& t);

// ``wait_tensor(t)`` returned: the work without a future issued with ``t`` is complete.
void waited_tensor(const at::Tensor& t);

void note_error(const std::string& text);

// --- what native_module.cpp binds for Python ---

void configure(const std::vector<std::string>& op_names, const std::vector<int32_t>& unrecorded,
               const std::vector<int32_t>& setup);
int32_t add_group(const std::string& label);
void set_group_slot(int32_t code, int64_t slot_at);
void set_tag(int32_t code);
void set_step(int64_t step);
bool set_live(const std::string& path, int64_t collective_at, int64_t done_at, int64_t left_at,
              int64_t stage_at, int64_t collective_ns_at, int64_t size_bytes);
void arm_running(bool armed);

using Row = std::tuple<int64_t, int32_t, int64_t, int64_t, int64_t, int64_t, int32_t, int32_t,
                       int64_t, int32_t, int64_t>;
std::vector<Row> drain(bool final);
std::vector<std::string> take_errors();
bool device_timing();

// native_hooks.cpp: torch's process-group hooks (compiled where torch has them).
bool has_group_hooks();
void attach(const c10::intrusive_ptr<c10d::ProcessGroup>& pg, int64_t hook_id, int32_t group,
            int64_t group_size);
void detach(const c10::intrusive_ptr<c10d::ProcessGroup>& pg, int64_t hook_id);

// native_dispatch.cpp: the c10d ops' kernels wrapped at the dispatcher.
struct OpSpec {
  std::string name;   // the c10d op, "allreduce_"
  int32_t code;       // the probe's op (configure's names)
  std::string sized;  // the argument whose tensors are its bytes ("": none)
  bool times_group;   // gather, scatter: one rank's part times the group
  std::string peer;   // a send's or recv's peer argument ("": none)
  bool p2p;
};
std::vector<std::string> intercept(const std::vector<OpSpec>& specs);
std::vector<std::string> intercepted();
void release();

// ``_c10d_functional::wait_tensor`` intercepted at the dispatcher (native_dispatch.cpp) on
// every way, so that DTensor's and the functional collectives' waits, which C++ and Python
// make through that op, complete works without a future; why not, or "".
std::string intercept_waits();
void release_waits();
void watch_group(const c10::intrusive_ptr<c10d::ProcessGroup>& pg, int32_t group);
void unwatch_group(const c10::intrusive_ptr<c10d::ProcessGroup>& pg);

}  // namespace scalescope
