// The C API (duet/duet.h) over the C++ one. Every entry point runs its body through guard()
// (c_api_internal.h), which turns a Status into a duet_status plus this thread's last-error
// message and catches every exception, so none crosses into C.
#include <cstring>
#include <exception>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "c_api_internal.h"
#include "devices_report.h"
#include "duet/backends.h"
#include "duet/build_identity.h"
#include "duet/builtin_engine.h"
#include "duet/duet.h"
#include "duet/engine.h"
#include "duet/graph_file.h"
#include "duet/model_file.h"
#include "duet/onnx.h"
#include "duet/planner.h"
#include "duet/safetensors.h"

struct duet_plan {
  std::shared_ptr<duet::Registry> registry;  // the devices planned for, when real
  duet::Plan plan;
  struct Op {
    std::string name, op, device, precision, tier;
    double estimate_us = 0;
  };
  std::vector<Op> ops;
};

namespace duet::capi {

std::string& last_error() {
  thread_local std::string message;
  return message;
}

std::function<duet::Registry()>& machine_opener() {
  static auto* f = new std::function<duet::Registry()>();
  return *f;
}

std::shared_ptr<duet::Registry> machine() {
  static std::mutex m;
  static std::weak_ptr<duet::Registry> current;
  std::lock_guard<std::mutex> g(m);
  std::shared_ptr<duet::Registry> r = current.lock();
  if (!r) {
    const std::function<duet::Registry()>& open = machine_opener();
    r = std::make_shared<duet::Registry>(open ? open() : duet::open_registry());
    current = r;
  }
  return r;
}

}  // namespace duet::capi

namespace {

using namespace duet::capi;

const char* name_at(const duet::Graph& g, const std::vector<int>& ids, size_t i) {
  return i < ids.size() ? g.value(ids[i]).name.c_str() : nullptr;
}

}  // namespace

namespace duet::capi {

duet::Result<std::map<std::string, duet::HostTensor>> run_inputs(
    const char* fn, const char* const* input_names, const duet_tensor* const* inputs,
    size_t input_count, duet_tensor* const* outputs, size_t output_count, size_t graph_outputs) {
  if (input_count > 0) {
    DUET_REQUIRE(fn, input_names);
    DUET_REQUIRE(fn, inputs);
  }
  if (output_count != graph_outputs)
    return Status(Code::invalid_argument,
                  std::string(fn) + ": output_count " + std::to_string(output_count) +
                      ", but the graph has " + std::to_string(graph_outputs) + " outputs");
  if (output_count > 0) DUET_REQUIRE(fn, outputs);
  std::map<std::string, duet::HostTensor> in;
  for (size_t i = 0; i < input_count; ++i) {
    if (!input_names[i] || !inputs[i])
      return Status(Code::invalid_argument,
                    std::string(fn) + ": input name or tensor " + std::to_string(i) + " is NULL");
    if (!in.emplace(input_names[i], inputs[i]->t).second)
      return duet::Err(Code::invalid_argument)
          .tensor(input_names[i])
          .expected("each input given once")
          .got("twice");
  }
  return in;
}

Status hand_out_outputs(const char* fn, const std::map<std::string, duet::HostTensor>& result,
                        const std::vector<std::string>& names, duet_tensor** outputs) {
  // Wrap every output first, so that nothing is handed out when one is missing.
  std::vector<std::unique_ptr<duet_tensor>> wrapped;
  for (const std::string& name : names) {
    auto it = result.find(name);
    if (it == result.end())
      return Status(Code::internal,
                    std::string(fn) + ": the run returned no output '" + name + "'");
    auto t = std::make_unique<duet_tensor>();
    t->t = it->second.desc().is_contiguous() && it->second.desc().offset == 0
               ? it->second
               : it->second.contiguous();
    wrapped.push_back(std::move(t));
  }
  for (size_t i = 0; i < wrapped.size(); ++i) outputs[i] = wrapped[i].release();
  return {};
}

}  // namespace duet::capi

extern "C" {

const char* duet_last_error(void) {
  return last_error().c_str();
}

const char* duet_status_name(duet_status status) {
  switch (status) {
    case DUET_OK:
      return "ok";
    case DUET_ERROR_INVALID_ARGUMENT:
      return "invalid_argument";
    case DUET_ERROR_UNSUPPORTED:
      return "unsupported";
    case DUET_ERROR_OUT_OF_MEMORY:
      return "out_of_memory";
    case DUET_ERROR_NOT_FOUND:
      return "not_found";
    case DUET_ERROR_IO:
      return "io_error";
    case DUET_ERROR_PARSE:
      return "parse_error";
    case DUET_ERROR_DEVICE_LOST:
      return "device_lost";
    case DUET_ERROR_INTERNAL:
      return "internal";
    case DUET_STATUS_MAX_ENUM:
      break;
  }
  return "unknown";
}

void duet_string_free(char* s) {
  delete[] s;
}

const char* duet_version(void) {
  return DUET_VERSION_STRING;
}

int duet_version_number(void) {
  return DUET_VERSION_NUMBER;
}

const char* duet_build_identity(void) {
  try {
    static const std::string text = duet::build_identity().text();
    return text.c_str();
  } catch (...) {
    return "duet " DUET_VERSION_STRING;
  }
}

// ---- tensors ----------------------------------------------------------------------------

static_assert(DUET_Q4_Z == static_cast<int>(duet::DType::q4_z) &&
                  DUET_Q8_0 == static_cast<int>(duet::DType::q8_0) &&
                  DUET_Q6_K == static_cast<int>(duet::DType::q6_k),
              "duet_dtype numbers the dtypes as duet::DType");

duet_status duet_tensor_create(duet_dtype dtype, const int64_t* shape, int rank, const void* data,
                               duet_tensor** out) {
  return guard("duet_tensor_create", [&]() -> Status {
    DUET_REQUIRE("duet_tensor_create", out);
    *out = nullptr;
    if (static_cast<int>(dtype) < 0 || static_cast<int>(dtype) >= duet::kNumDTypes)
      return Status(Code::invalid_argument, "duet_tensor_create: dtype " +
                                                std::to_string(static_cast<int>(dtype)) +
                                                " is not a duet_dtype");
    if (rank < 0 || rank > duet::kMaxRank)
      return Status(Code::invalid_argument, "duet_tensor_create: rank " + std::to_string(rank) +
                                                " is outside 0.." + std::to_string(duet::kMaxRank));
    if (rank > 0) DUET_REQUIRE("duet_tensor_create", shape);
    const std::vector<int64_t> dims(shape, shape + rank);
    // Sizes whose byte count does not fit in 63 bits are refused before any arithmetic wraps.
    int64_t bytes = static_cast<int64_t>(duet::dtype_size(static_cast<duet::DType>(dtype)));
    for (int64_t d : dims)
      if (d > 0 && __builtin_mul_overflow(bytes, d, &bytes))
        return Status(Code::invalid_argument,
                      "duet_tensor_create: a tensor of that shape is too large to address");
    const duet::TensorDesc desc =
        duet::TensorDesc::contiguous(static_cast<duet::DType>(dtype), dims);
    DUET_TRY(duet::validate(desc).with_context("duet_tensor_create"));
    auto t = std::make_unique<duet_tensor>();
    DUET_ASSIGN_OR_RETURN(
        t->t, duet::HostTensor::with_storage(desc, static_cast<uint64_t>(desc.nbytes())));
    if (data)
      std::memcpy(t->t.storage(), data, static_cast<size_t>(desc.nbytes()));
    else
      std::memset(t->t.storage(), 0, static_cast<size_t>(desc.nbytes()));
    *out = t.release();
    return {};
  });
}

void duet_tensor_destroy(duet_tensor* t) {
  delete t;
}

duet_dtype duet_tensor_dtype(const duet_tensor* t) {
  return t ? static_cast<duet_dtype>(t->t.dtype()) : DUET_F32;
}

int duet_tensor_rank(const duet_tensor* t) {
  return t ? t->t.desc().rank : 0;
}

int64_t duet_tensor_dim(const duet_tensor* t, int i) {
  return t && i >= 0 && i < t->t.desc().rank ? t->t.desc().dim(i) : 0;
}

int64_t duet_tensor_numel(const duet_tensor* t) {
  return t ? t->t.numel() : 0;
}

size_t duet_tensor_nbytes(const duet_tensor* t) {
  return t ? static_cast<size_t>(t->t.desc().nbytes()) : 0;
}

const void* duet_tensor_data(const duet_tensor* t) {
  return t ? t->t.storage() : nullptr;
}

void* duet_tensor_mutable_data(duet_tensor* t) {
  return t ? t->t.storage() : nullptr;
}

duet_status duet_tensor_to_float(const duet_tensor* t, float* out, size_t count) {
  return guard("duet_tensor_to_float", [&]() -> Status {
    DUET_REQUIRE("duet_tensor_to_float", t);
    DUET_REQUIRE("duet_tensor_to_float", out);
    if (count < static_cast<size_t>(t->t.numel()))
      return Status(Code::invalid_argument,
                    "duet_tensor_to_float: count " + std::to_string(count) + " is less than the " +
                        std::to_string(t->t.numel()) + " elements of " + t->t.desc().str());
    const std::vector<double> v = t->t.to_doubles();
    for (size_t i = 0; i < v.size(); ++i) out[i] = static_cast<float>(v[i]);
    return {};
  });
}

duet_status duet_tensor_load(const char* safetensors_path, const char* name, duet_tensor** out) {
  return guard("duet_tensor_load", [&]() -> Status {
    DUET_REQUIRE("duet_tensor_load", out);
    *out = nullptr;
    DUET_REQUIRE("duet_tensor_load", safetensors_path);
    DUET_REQUIRE("duet_tensor_load", name);
    DUET_ASSIGN_OR_RETURN(duet::SafetensorsFile file, duet::read_safetensors(safetensors_path));
    if (!file.find(name))
      return duet::Err(Code::not_found)
          .tensor(name)
          .expected("a tensor of '" + std::string(safetensors_path) + "'")
          .got("none of that name");
    DUET_ASSIGN_OR_RETURN(duet::HostTensor t, file.tensor(name));
    auto h = std::make_unique<duet_tensor>();
    h->t = t.desc().is_contiguous() && t.desc().offset == 0 ? std::move(t) : t.contiguous();
    *out = h.release();
    return {};
  });
}

duet_status duet_tensors_save(const char* safetensors_path, const char* const* names,
                              const duet_tensor* const* tensors, size_t count) {
  return guard("duet_tensors_save", [&]() -> Status {
    DUET_REQUIRE("duet_tensors_save", safetensors_path);
    if (count > 0) {
      DUET_REQUIRE("duet_tensors_save", names);
      DUET_REQUIRE("duet_tensors_save", tensors);
    }
    std::vector<std::pair<std::string, duet::HostTensor>> list;
    for (size_t i = 0; i < count; ++i) {
      if (!names[i] || !tensors[i])
        return Status(Code::invalid_argument,
                      "duet_tensors_save: name or tensor " + std::to_string(i) + " is NULL");
      list.emplace_back(names[i], tensors[i]->t);
    }
    return duet::write_safetensors(safetensors_path, list);
  });
}

// ---- graphs -----------------------------------------------------------------------------

duet_status duet_graph_load(const char* path, duet_graph** out) {
  return guard("duet_graph_load", [&]() -> Status {
    DUET_REQUIRE("duet_graph_load", out);
    *out = nullptr;
    DUET_REQUIRE("duet_graph_load", path);
    DUET_ASSIGN_OR_RETURN(duet::Graph g, duet::load_model(path));
    *out = new duet_graph{std::move(g)};
    return {};
  });
}

duet_status duet_graph_load_onnx(const char* path, const char* dims, duet_graph** out) {
  return guard("duet_graph_load_onnx", [&]() -> Status {
    DUET_REQUIRE("duet_graph_load_onnx", out);
    *out = nullptr;
    DUET_REQUIRE("duet_graph_load_onnx", path);
    duet::OnnxOptions o;
    DUET_ASSIGN_OR_RETURN(o.dims, duet::parse_onnx_dims(dims ? dims : ""));
    DUET_ASSIGN_OR_RETURN(duet::Graph g, duet::import_onnx(path, o));
    *out = new duet_graph{std::move(g)};
    return {};
  });
}

duet_status duet_graph_parse(const char* json, const char* base_dir, duet_graph** out) {
  return guard("duet_graph_parse", [&]() -> Status {
    DUET_REQUIRE("duet_graph_parse", out);
    *out = nullptr;
    DUET_REQUIRE("duet_graph_parse", json);
    DUET_ASSIGN_OR_RETURN(duet::Graph g, duet::graph_from_json(json, base_dir ? base_dir : "."));
    *out = new duet_graph{std::move(g)};
    return {};
  });
}

void duet_graph_destroy(duet_graph* g) {
  delete g;
}

const char* duet_graph_name(const duet_graph* g) {
  return g ? g->g.name().c_str() : nullptr;
}

size_t duet_graph_input_count(const duet_graph* g) {
  return g ? g->g.inputs().size() : 0;
}

const char* duet_graph_input_name(const duet_graph* g, size_t i) {
  return g ? name_at(g->g, g->g.inputs(), i) : nullptr;
}

size_t duet_graph_output_count(const duet_graph* g) {
  return g ? g->g.outputs().size() : 0;
}

const char* duet_graph_output_name(const duet_graph* g, size_t i) {
  return g ? name_at(g->g, g->g.outputs(), i) : nullptr;
}

duet_status duet_graph_bind_constant(duet_graph* g, const char* name, const duet_tensor* data) {
  return guard("duet_graph_bind_constant", [&]() -> Status {
    DUET_REQUIRE("duet_graph_bind_constant", g);
    DUET_REQUIRE("duet_graph_bind_constant", name);
    DUET_REQUIRE("duet_graph_bind_constant", data);
    // A copy: the caller may change or free its tensor afterwards.
    return g->g.bind_constant(name, data->t.contiguous());
  });
}

// ---- devices ----------------------------------------------------------------------------

duet_status duet_devices_json(char** out) {
  return guard("duet_devices_json", [&]() -> Status {
    DUET_REQUIRE("duet_devices_json", out);
    *out = nullptr;
    *out = copy_string(duet::devices_json(*machine()).dump(2));
    return {};
  });
}

// ---- plans ------------------------------------------------------------------------------

duet_status duet_plan_create(const duet_graph* g, const char* profiles, const char* policy,
                             duet_plan** out) {
  return guard("duet_plan_create", [&]() -> Status {
    DUET_REQUIRE("duet_plan_create", out);
    *out = nullptr;
    DUET_REQUIRE("duet_plan_create", g);
    DUET_ASSIGN_OR_RETURN(duet::Policy p, policy_from(policy));
    auto h = std::make_unique<duet_plan>();
    std::vector<duet::PlanDevice> devices;
    const std::vector<std::string> names = split_commas(profiles);
    if (names.empty()) {
      h->registry = machine();
      devices = duet::plan_devices(h->registry->devices());
    } else {
      DUET_ASSIGN_OR_RETURN(devices, duet::profile_devices(names));
    }
    DUET_ASSIGN_OR_RETURN(h->plan, duet::make_plan(g->g, std::move(devices), p));
    for (const duet::PlanStep& s : h->plan.steps) {
      if (s.kind != duet::StepKind::kernel) continue;
      h->ops.push_back({s.name, std::string(duet::op_name(s.op.op.kind)),
                        h->plan.devices[static_cast<size_t>(s.device)].id,
                        std::string(duet::precision_name(s.op.choice.precision)),
                        std::string(duet::tier_name(s.op.choice.tier)), s.est_us});
    }
    *out = h.release();
    return {};
  });
}

void duet_plan_destroy(duet_plan* p) {
  delete p;
}

size_t duet_plan_op_count(const duet_plan* p) {
  return p ? p->ops.size() : 0;
}

duet_status duet_plan_op_info(const duet_plan* p, size_t i, duet_plan_op* out) {
  return guard("duet_plan_op_info", [&]() -> Status {
    DUET_REQUIRE("duet_plan_op_info", p);
    DUET_REQUIRE("duet_plan_op_info", out);
    if (i >= p->ops.size())
      return Status(Code::invalid_argument, "duet_plan_op_info: op " + std::to_string(i) +
                                                " of a plan with " + std::to_string(p->ops.size()) +
                                                " kernels");
    const duet_plan::Op& op = p->ops[i];
    *out = {op.name.c_str(),      op.op.c_str(),   op.device.c_str(),
            op.precision.c_str(), op.tier.c_str(), op.estimate_us};
    return {};
  });
}

duet_status duet_plan_explain(const duet_plan* p, char** out) {
  return guard("duet_plan_explain", [&]() -> Status {
    DUET_REQUIRE("duet_plan_explain", out);
    *out = nullptr;
    DUET_REQUIRE("duet_plan_explain", p);
    *out = copy_string(duet::explain(p->plan));
    return {};
  });
}

// ---- engines ----------------------------------------------------------------------------

duet_status duet_engine_create(const duet_graph* g, const char* policy, duet_engine** out) {
  return guard("duet_engine_create", [&]() -> Status {
    DUET_REQUIRE("duet_engine_create", out);
    *out = nullptr;
    DUET_REQUIRE("duet_engine_create", g);
    DUET_ASSIGN_OR_RETURN(duet::Policy p, policy_from(policy));
    auto h = std::make_unique<duet_engine>();
    std::shared_ptr<duet::Registry> reg = machine();
    // The engine keeps the registry (its devices) alive as long as it lives.
    DUET_ASSIGN_OR_RETURN(h->engine, duet::Engine::create(g->g, reg->devices(), std::move(p), reg));
    for (int id : g->g.outputs()) h->outputs.push_back(g->g.value(id).name);
    *out = h.release();
    return {};
  });
}

void duet_engine_destroy(duet_engine* e) {
  delete e;
}

size_t duet_engine_output_count(const duet_engine* e) {
  return e ? e->outputs.size() : 0;
}

const char* duet_engine_output_name(const duet_engine* e, size_t i) {
  return e && i < e->outputs.size() ? e->outputs[i].c_str() : nullptr;
}

duet_status duet_engine_run(duet_engine* e, const char* const* input_names,
                            const duet_tensor* const* inputs, size_t input_count,
                            duet_tensor** outputs, size_t output_count) {
  return guard("duet_engine_run", [&]() -> Status {
    DUET_REQUIRE("duet_engine_run", e);
    DUET_ASSIGN_OR_RETURN(auto in, run_inputs("duet_engine_run", input_names, inputs, input_count,
                                              outputs, output_count, e->outputs.size()));
    std::unique_lock<std::mutex> lock(e->m);
    DUET_ASSIGN_OR_RETURN(auto result, e->engine->run(in));
    lock.unlock();
    return hand_out_outputs("duet_engine_run", result, e->outputs, outputs);
  });
}

duet_status duet_engine_explain(duet_engine* e, char** out) {
  return guard("duet_engine_explain", [&]() -> Status {
    DUET_REQUIRE("duet_engine_explain", out);
    *out = nullptr;
    DUET_REQUIRE("duet_engine_explain", e);
    std::lock_guard<std::mutex> lock(e->m);
    *out = copy_string(e->engine->explain());
    return {};
  });
}

}  // extern "C"
