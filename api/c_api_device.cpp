// The C API's device memory (duet/duet.h, "device memory"): a caller's CUDA memory used in place
// (Device::adopt), runs that read it and leave their outputs on the device (Engine::run with a
// DeviceIo), duet's stream for ordering, and outputs lent to the caller's stream
// (Device::lend).
#include <mutex>
#include <string>
#include <vector>

#include "c_api_internal.h"
#include "duet/duet.h"
#include "duet/engine.h"
#include "duet/executor.h"

struct duet_device_tensor {
  duet::DeviceTensor t;
  std::shared_ptr<duet::Registry> registry;  // the device lives as long as the handle
};

namespace {

using namespace duet::capi;
using duet::Code;
using duet::Status;

duet::Result<duet::Device*> find_device(const duet::Registry& reg, const char* fn, const char* id) {
  if (duet::Device* d = reg.find(id)) return d;
  std::string known;
  for (duet::Device* d : reg.devices()) known += (known.empty() ? "" : ", ") + d->id();
  return Status(Code::not_found, std::string(fn) + ": no device '" + id +
                                     "' is open on this machine (its devices: " + known + ")");
}

duet::Result<duet::DType> plain_dtype(const char* fn, duet_dtype dtype) {
  switch (dtype) {
    case DUET_F32:
      return duet::DType::f32;
    case DUET_F16:
      return duet::DType::f16;
    case DUET_BF16:
      return duet::DType::bf16;
    case DUET_I8:
      return duet::DType::i8;
    case DUET_I32:
      return duet::DType::i32;
    default:
      return Status(Code::invalid_argument,
                    std::string(fn) + ": dtype " + std::to_string(static_cast<int>(dtype)) +
                        " in device memory; duet takes DUET_F32, DUET_F16, DUET_BF16, DUET_I8 "
                        "or DUET_I32 there (block formats through host tensors)");
  }
}

}  // namespace

extern "C" {

duet_status duet_device_tensor_adopt(const char* device, void* address, size_t bytes,
                                     duet_dtype dtype, const int64_t* shape, int rank,
                                     duet_device_tensor** out) {
  static const char* fn = "duet_device_tensor_adopt";
  return guard(fn, [&]() -> Status {
    DUET_REQUIRE(fn, out);
    *out = nullptr;
    DUET_REQUIRE(fn, device);
    DUET_REQUIRE(fn, address);
    if (rank < 0 || rank > DUET_MAX_RANK)
      return Status(Code::invalid_argument, std::string(fn) + ": rank " + std::to_string(rank) +
                                                ", expected 0 to " + std::to_string(DUET_MAX_RANK));
    if (rank > 0) DUET_REQUIRE(fn, shape);
    DUET_ASSIGN_OR_RETURN(duet::DType dt, plain_dtype(fn, dtype));
    std::vector<int64_t> dims;
    uint64_t numel = 1;
    for (int i = 0; i < rank; ++i) {
      if (shape[i] <= 0 || shape[i] > (int64_t{1} << 40))
        return Status(Code::invalid_argument, std::string(fn) + ": dimension " + std::to_string(i) +
                                                  " has size " + std::to_string(shape[i]) +
                                                  ", expected 1 to 2^40");
      dims.push_back(shape[i]);
      numel *= static_cast<uint64_t>(shape[i]);
    }
    const uint64_t item = duet::dtype_size(dt), need = numel * item;
    if (numel > (uint64_t{1} << 50) || bytes < need)
      return Status(Code::invalid_argument,
                    std::string(fn) + ": " + std::to_string(bytes) + " bytes at " + device +
                        " address, but a dense " + std::string(duet::dtype_name(dt)) +
                        " tensor of that shape takes " + std::to_string(need));
    const auto at = reinterpret_cast<uintptr_t>(address);
    if (at % item != 0)
      return Status(Code::invalid_argument, std::string(fn) + ": address not aligned to its " +
                                                std::to_string(item) + "-byte elements");
    auto h = std::make_unique<duet_device_tensor>();
    h->registry = machine();
    DUET_ASSIGN_OR_RETURN(duet::Device * d, find_device(*h->registry, fn, device));
    duet::Result<std::shared_ptr<duet::Buffer>> b = duet::Status(Code::internal, "not adopted");
    {
      std::lock_guard<std::mutex> lock(duet::device_mutex(*d));
      b = d->adopt(at, need, nullptr);
    }
    if (!b.ok()) return b.status().with_context(fn);
    h->t = duet::DeviceTensor{d, std::move(*b), duet::TensorDesc::contiguous(dt, dims)};
    *out = h.release();
    return {};
  });
}

void duet_device_tensor_destroy(duet_device_tensor* t) {
  delete t;
}

void* duet_device_tensor_data(const duet_device_tensor* t) {
  return t ? reinterpret_cast<void*>(static_cast<uintptr_t>(t->t.buffer->device_address()))
           : nullptr;
}

const char* duet_device_tensor_device(const duet_device_tensor* t) {
  return t ? t->t.device->id().c_str() : nullptr;
}

duet_dtype duet_device_tensor_dtype(const duet_device_tensor* t) {
  if (!t) return DUET_F32;
  switch (t->t.desc.dtype) {
    case duet::DType::f16:
      return DUET_F16;
    case duet::DType::bf16:
      return DUET_BF16;
    case duet::DType::i8:
      return DUET_I8;
    case duet::DType::i32:
      return DUET_I32;
    default:
      return DUET_F32;
  }
}

int duet_device_tensor_rank(const duet_device_tensor* t) {
  return t ? t->t.desc.rank : 0;
}

int64_t duet_device_tensor_dim(const duet_device_tensor* t, int i) {
  return t && i >= 0 && i < t->t.desc.rank ? t->t.desc.dim(i) : 0;
}

size_t duet_device_tensor_nbytes(const duet_device_tensor* t) {
  return t ? static_cast<size_t>(t->t.desc.nbytes()) : 0;
}

duet_status duet_device_tensor_release_after(duet_device_tensor* t, uint64_t stream) {
  static const char* fn = "duet_device_tensor_release_after";
  return guard(fn, [&]() -> Status {
    DUET_REQUIRE(fn, t);
    std::lock_guard<std::mutex> lock(duet::device_mutex(*t->t.device));
    return t->t.device->lend(*t->t.buffer, stream).with_context(fn);
  });
}

duet_status duet_engine_device_stream(duet_engine* e, const char* device, uint64_t* out) {
  static const char* fn = "duet_engine_device_stream";
  return guard(fn, [&]() -> Status {
    DUET_REQUIRE(fn, out);
    *out = 0;
    DUET_REQUIRE(fn, e);
    DUET_REQUIRE(fn, device);
    std::shared_ptr<duet::Registry> reg = machine();
    DUET_ASSIGN_OR_RETURN(duet::Device * d, find_device(*reg, fn, device));
    duet::Result<uint64_t> q = uint64_t{0};
    {
      std::lock_guard<std::mutex> lock(duet::device_mutex(*d));
      q = d->native_queue();
    }
    if (!q.ok()) return q.status().with_context(fn);
    if (*q == 0)
      return Status(Code::unsupported, std::string(fn) + ": " + d->id() +
                                           " runs no stream another library can order work "
                                           "with (CUDA devices do)");
    *out = *q;
    return {};
  });
}

duet_status duet_engine_run_device(duet_engine* e, const char* const* input_names,
                                   const duet_tensor* const* inputs, size_t input_count,
                                   const char* const* device_input_names,
                                   const duet_device_tensor* const* device_inputs,
                                   size_t device_input_count, int keep_outputs_on_device,
                                   duet_tensor** host_outputs, duet_device_tensor** device_outputs,
                                   size_t output_count) {
  static const char* fn = "duet_engine_run_device";
  return guard(fn, [&]() -> Status {
    DUET_REQUIRE(fn, e);
    const std::vector<std::string>& names = e->outputs;
    DUET_ASSIGN_OR_RETURN(auto in, run_inputs(fn, input_names, inputs, input_count, host_outputs,
                                              output_count, names.size()));
    if (output_count > 0) DUET_REQUIRE(fn, device_outputs);
    if (device_input_count > 0) {
      DUET_REQUIRE(fn, device_input_names);
      DUET_REQUIRE(fn, device_inputs);
    }
    std::shared_ptr<duet::Registry> reg = machine();
    duet::DeviceIo io;
    for (size_t i = 0; i < device_input_count; ++i) {
      if (!device_input_names[i] || !device_inputs[i])
        return Status(Code::invalid_argument, std::string(fn) + ": device input name or tensor " +
                                                  std::to_string(i) + " is NULL");
      if (!io.inputs.emplace(device_input_names[i], device_inputs[i]->t).second)
        return duet::Err(Code::invalid_argument)
            .tensor(device_input_names[i])
            .expected("each input given once")
            .got("twice in device memory");
    }
    if (keep_outputs_on_device)
      for (duet::Device* d : reg->devices())
        if (d->caps().backend == duet::BackendKind::cuda) io.keep_outputs_on.push_back(d);
    std::unique_lock<std::mutex> lock(e->m);
    DUET_ASSIGN_OR_RETURN(auto result, e->engine->run(in, io));
    lock.unlock();
    // Wrap every output first, so that nothing is handed out when one is missing.
    std::vector<std::unique_ptr<duet_tensor>> host(names.size());
    std::vector<std::unique_ptr<duet_device_tensor>> dev(names.size());
    for (size_t i = 0; i < names.size(); ++i) {
      if (auto d = io.outputs.find(names[i]); d != io.outputs.end()) {
        dev[i] = std::make_unique<duet_device_tensor>();
        dev[i]->t = std::move(d->second);
        dev[i]->registry = reg;
        continue;
      }
      auto it = result.find(names[i]);
      if (it == result.end())
        return Status(Code::internal,
                      std::string(fn) + ": the run returned no output '" + names[i] + "'");
      host[i] = std::make_unique<duet_tensor>();
      host[i]->t = it->second.desc().is_contiguous() && it->second.desc().offset == 0
                       ? it->second
                       : it->second.contiguous();
    }
    for (size_t i = 0; i < names.size(); ++i) {
      host_outputs[i] = host[i].release();
      device_outputs[i] = dev[i].release();
    }
    return {};
  });
}

}  // extern "C"
