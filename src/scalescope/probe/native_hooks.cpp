// The probe's process-group hooks in C++ (a torch with them, 2.14 and later): a collective's
// row at issue, its completion from its work, without entering Python (docs/probe.md, "Cost").
// Python (probe/native.py) defines SCALESCOPE_PG_HOOKS where torch has the hooks; elsewhere
// the probe intercepts the c10d ops at the dispatcher instead (native_dispatch.cpp).

#include "native_state.h"

#include <stdexcept>
#include <string>

namespace scalescope {

#ifdef SCALESCOPE_PG_HOOKS

namespace {

using c10d::HookOpName;

thread_local int64_t issued = -1;

Sized total(const std::vector<at::Tensor>& tensors, int64_t times) {
  Sized s;
  for (const auto& t : tensors) {
    s.add(t);
  }
  s.times(times);
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

bool point_to_point(HookOpName name) {
  return name == HookOpName::SEND || name == HookOpName::RECV;
}

void pre(int32_t group, int64_t group_size, const c10d::PreHookArgs& a) {
  issued = -1;
  if (unrecorded_now()) {
    return;
  }
  try {
    Issue in{group, static_cast<int32_t>(a.name), Sized{}, point_to_point(a.name) ? a.root : -1};
    if (sized(a, group_size, in.size)) {
      issued = begin_row(in);
      for (const auto* tensors : {&a.output_tensors, &a.input_tensors}) {
        if (issued >= 0 && !tensors->empty()) {
          remember_storage(tensors->front());
        }
      }
    }
  } catch (const std::exception& e) {
    note_error(std::string("a collective not recorded: ") + e.what());
  }
}

void post(const c10d::PostHookArgs& a) {
  const int64_t id = issued;
  issued = -1;
  end_row(id, a.work, point_to_point(a.name), a.async_op);
}

}  // namespace

bool has_group_hooks() { return true; }

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

#else

bool has_group_hooks() { return false; }

void attach(const c10::intrusive_ptr<c10d::ProcessGroup>&, int64_t, int32_t, int64_t) {
  throw std::runtime_error("this torch has no process-group hooks");
}

void detach(const c10::intrusive_ptr<c10d::ProcessGroup>&, int64_t) {}

#endif

}  // namespace scalescope
