// What Python calls of the probe's C++ side (probe/native.py builds it once per torch;
// probe/native_rows.py and probe/dispatched.py use it).

#include <torch/extension.h>

#include "native_state.h"

namespace {

using SpecTuple = std::tuple<std::string, int32_t, std::string, bool, std::string, bool>;

std::vector<std::string> intercept_ops(const std::vector<SpecTuple>& specs) {
  std::vector<scalescope::OpSpec> out;
  for (const auto& [name, code, sized, times_group, peer, p2p] : specs) {
    out.push_back(scalescope::OpSpec{name, code, sized, times_group, peer, p2p});
  }
  return scalescope::intercept(out);
}

int32_t dtype_code(const at::Tensor& t) { return static_cast<int32_t>(t.scalar_type()); }

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  namespace s = scalescope;
  m.def("configure", &s::configure);
  m.def("add_group", &s::add_group);
  m.def("set_group_slot", &s::set_group_slot);
  m.def("has_group_hooks", &s::has_group_hooks);
  m.def("attach", &s::attach);
  m.def("detach", &s::detach);
  m.def("intercept", &intercept_ops);
  m.def("intercepted", &s::intercepted);
  m.def("release", &s::release);
  m.def("watch_group", &s::watch_group);
  m.def("unwatch_group", &s::unwatch_group);
  m.def("device_timing", &s::device_timing);
  m.def("set_tag", &s::set_tag);
  m.def("set_step", &s::set_step);
  m.def("set_live", &s::set_live);
  m.def("arm_running", &s::arm_running);
  m.def("drain", &s::drain);
  m.def("waited", &s::waited);
  m.def("intercept_waits", &s::intercept_waits);
  m.def("release_waits", &s::release_waits);
  m.def("take_errors", &s::take_errors);
  m.def("dtype_code", &dtype_code);
}
