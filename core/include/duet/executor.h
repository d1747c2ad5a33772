// The executor: runs a plan on real devices. It obeys the plan: steps in dependency order, one
// thread per device so independent work on different devices overlaps, copies between devices
// through host memory, views resolved by aliasing (a view's tensor is its root's buffer under the
// view's descriptor), buffers allocated once from the memory plan and reused by every run.
//
// Thread safety: an Executor may be shared by threads; run() calls on one Executor are
// serialised (they share its buffers). Executors (and Engines) sharing a Device may run at the
// same time: every call into a Device is made under that device's lock, so a device is used by
// one thread at a time as the Device contract requires.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "duet/device.h"
#include "duet/export.h"
#include "duet/graph.h"
#include "duet/host_tensor.h"
#include "duet/plan.h"

namespace duet {

// The lock every executor holds while it calls into `d` (one per Device in the process): a program
// that calls into a device an engine uses (Device::native_queue, read) holds it too.
DUET_API std::mutex& device_mutex(const Device& d);

// The time one step of a run took, measured when asked for (run_timed).
struct DUET_API StepTime {
  int step = -1;       // index into Plan::steps
  double seconds = 0;  // from the step's start until its device finished it
};

// One kernel of a profiled run (run_profiled), timed by its device on the device's own clock
// (Device::begin_kernel_timing) in the submissions a plain run makes.
struct DUET_API StepProfile {
  int step = -1;              // index into Plan::steps (a kernel step)
  int device = -1;            // index into Plan::devices
  double device_seconds = 0;  // the kernel on its device (KernelSpan::seconds)
  double start = 0, end = 0;  // on its device's clock: seconds from the device's first timestamp
  // The host's time in Device::execute for the step: recording its dispatches on a GPU, the
  // kernel itself on the CPU.
  double host_seconds = 0;
};

struct DUET_API RunProfile {
  std::vector<StepProfile> steps;  // every kernel step that ran, in plan order
  double wall_seconds = 0;         // the whole run, from the call until the outputs are returned
  double kernel_seconds() const;   // the sum of the steps' device_seconds
  double host_seconds() const;     // the sum of the steps' host_seconds
};

// A tensor in a device's memory: the device, the buffer (which keeps the memory alive) and the
// tensor in it (offset and strides in elements).
struct DUET_API DeviceTensor {
  Device* device = nullptr;
  std::shared_ptr<Buffer> buffer;
  TensorDesc desc;
};

// What a run takes and gives in device memory, beside its host tensors (Executor::run).
struct DUET_API DeviceIo {
  // Inputs already in device memory, by name: dense at offset 0 of their buffer, on the device
  // the plan uploads that input to (and only there); read in place, with no copy. One on another
  // device, or one the plan reads on the host or on several devices, is an error naming the
  // input and the devices.
  std::map<std::string, DeviceTensor> inputs;
  // Outputs a kernel writes on one of these devices stay there: returned in `outputs`, each in a
  // new buffer of its own that the kernel wrote (no copy), not among the host outputs.
  std::vector<const Device*> keep_outputs_on;
  std::map<std::string, DeviceTensor> outputs;  // filled by the run
};

class DUET_API Executor {
 public:
  virtual ~Executor() = default;

  // Binds `plan` (made for `graph`) to devices whose ids match the plan's, allocates the memory
  // plan, uploads the constants and runs the load-time steps. Every constant needs its data.
  // `previous`, an executor of the same graph at other shapes (an engine re-planning), hands over
  // its states (their contents, moved when the new plan puts them on another device) and the
  // constants both plans keep on the same device in the same form (not uploaded again).
  static Result<std::unique_ptr<Executor>> create(const Graph& graph, Plan plan,
                                                  std::span<Device* const> devices,
                                                  Executor* previous = nullptr);

  virtual const Plan& plan() const = 0;
  // One run. Inputs by name, each of the planned dtype and shape (any strides); every output
  // comes back dense, by name. On error no output is returned.
  virtual Result<std::map<std::string, HostTensor>> run(
      const std::map<std::string, HostTensor>& inputs) = 0;
  // run() with inputs and outputs in device memory (DeviceIo). The work a plain run replays
  // (recordings) runs step by step instead: recordings name the executor's own buffers. Every
  // device has finished the run when it returns, so the outputs are ready for any queue, and has
  // no work left that reads the inputs, also when the run failed.
  virtual Result<std::map<std::string, HostTensor>> run(
      const std::map<std::string, HostTensor>& inputs, DeviceIo& device) = 0;
  // run(), also timing every step that runs: each kernel and transfer waits for its device to
  // finish it before the device's next step starts, so a timed run is slower than run(). `times`
  // gets one entry per step that ran, in plan order.
  virtual Result<std::map<std::string, HostTensor>> run_timed(
      const std::map<std::string, HostTensor>& inputs, std::vector<StepTime>& times) = 0;
  // run(), with every kernel timed by its device (device timestamps on GPUs) in the same batches
  // and submissions as run(), so that the wall time minus the kernels' time is what the run
  // costs beyond its kernels. An error of Code::unsupported, before anything runs, where a
  // device with kernels to run cannot time them (the reason named). A device must not be used by
  // another executor during a profiled run (the count of timed kernels would not match: error).
  virtual Result<std::map<std::string, HostTensor>> run_profiled(
      const std::map<std::string, HostTensor>& inputs, RunProfile& profile) = 0;

  // What plain runs replay (Device::begin_recording): per device, how many of its kernels run
  // from how many recordings ("cuda:0: 1164 of 1166 kernels in 2 recordings"), "" when none.
  // The second plain run records, the later ones replay; timed and profiled runs go step by
  // step.
  virtual std::string recording_summary() const { return {}; }

  // States by name: read back (dense), overwritten (a tensor of the state's dtype and shape), or
  // all set to zero. Each waits for the runs before it.
  virtual Result<HostTensor> read_state(std::string_view name) = 0;
  virtual Status write_state(std::string_view name, const HostTensor& value) = 0;
  virtual Status reset_states() = 0;
};

}  // namespace duet
