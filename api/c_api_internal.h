// What the C API's files share: turning a Status or an exception into a duet_status with this
// thread's last-error message (guard), strings handed to C, and this machine's registry.
#pragma once

#include <cstring>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "duet/backends.h"
#include "duet/duet.h"
#include "duet/engine.h"
#include "duet/graph.h"
#include "duet/host_tensor.h"
#include "duet/policy.h"
#include "duet/registry.h"
#include "duet/status.h"

struct duet_tensor {
  duet::HostTensor t;  // always dense, offset 0
};

struct duet_graph {
  duet::Graph g;
};

struct duet_engine {
  std::unique_ptr<duet::Engine> engine;
  std::vector<std::string> outputs;
  // Runs take turns anyway (they share the engine's buffers); holding this also keeps explain
  // from reading a plan that a run with new shapes is replacing.
  std::mutex m;
};

namespace duet::capi {

using duet::Code;
using duet::Status;

// This thread's last error message (duet_last_error).
std::string& last_error();

inline duet_status to_c(Code c) {
  switch (c) {
    case Code::ok:
      return DUET_OK;
    case Code::invalid_argument:
      return DUET_ERROR_INVALID_ARGUMENT;
    case Code::unsupported:
      return DUET_ERROR_UNSUPPORTED;
    case Code::out_of_memory:
      return DUET_ERROR_OUT_OF_MEMORY;
    case Code::not_found:
      return DUET_ERROR_NOT_FOUND;
    case Code::io_error:
      return DUET_ERROR_IO;
    case Code::parse_error:
      return DUET_ERROR_PARSE;
    case Code::device_lost:
      return DUET_ERROR_DEVICE_LOST;
    case Code::internal:
      return DUET_ERROR_INTERNAL;
  }
  return DUET_ERROR_INTERNAL;
}

inline duet_status fail(duet_status s, std::string message) {
  try {
    last_error() = std::move(message);
  } catch (...) {
    last_error().clear();  // out of memory while reporting: the status still says so
  }
  return s;
}

inline duet_status report(const Status& s) {
  return s.ok() ? DUET_OK : fail(to_c(s.code()), s.message());
}

// Runs `body` (returning a Status), converting errors and exceptions.
template <class F>
duet_status guard(const char* fn, F&& body) noexcept {
  try {
    return report(body());
  } catch (const std::bad_alloc&) {
    return fail(DUET_ERROR_OUT_OF_MEMORY, std::string(fn) + ": out of host memory");
  } catch (const std::exception& e) {
    return fail(DUET_ERROR_INTERNAL, std::string(fn) + ": internal error: " + e.what());
  } catch (...) {
    return fail(DUET_ERROR_INTERNAL, std::string(fn) + ": internal error (unknown exception)");
  }
}

inline Status null_argument(const char* fn, const char* arg) {
  return Status(Code::invalid_argument, std::string(fn) + ": " + arg + " is NULL");
}

#define DUET_REQUIRE(fn, ptr) \
  if (!(ptr)) return ::duet::capi::null_argument(fn, #ptr)

inline char* copy_string(const std::string& s) {
  char* out = new char[s.size() + 1];
  std::memcpy(out, s.c_str(), s.size() + 1);
  return out;
}

inline duet::Result<duet::Policy> policy_from(const char* text) {
  if (!text) return duet::policy_from_env();
  return duet::parse_policy(text, {}, "policy");
}

inline std::vector<std::string> split_commas(const char* text) {
  std::vector<std::string> out;
  std::string cur;
  for (const char* p = text; p && *p; ++p) {
    if (*p == ',') {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else {
      cur += *p;
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

// A run's inputs by name for `fn` (duet_engine_run, duet_dist_run): the arrays given where their
// counts say so, no NULL name or tensor, each name once, and `output_count` equal to the graph's
// `graph_outputs`.
duet::Result<std::map<std::string, duet::HostTensor>> run_inputs(
    const char* fn, const char* const* input_names, const duet_tensor* const* inputs,
    size_t input_count, duet_tensor* const* outputs, size_t output_count, size_t graph_outputs);

// Hands a run's outputs to `outputs` in the graph's order (`names`), dense: all of them, or none
// when one is missing.
Status hand_out_outputs(const char* fn, const std::map<std::string, duet::HostTensor>& result,
                        const std::vector<std::string>& names, duet_tensor** outputs);

// This machine's devices, opened when the first engine or plan needs them and closed when the
// last handle using them is destroyed. Not a process-lifetime object: destroying Vulkan devices
// during exit, after drivers loaded with dlopen may have been finalized, is not safe.
std::shared_ptr<duet::Registry> machine();
// How machine() opens the registry: duet::open_registry(), unless a test of the C API set another
// (tests/api/c_device_test.cpp: an emulated CUDA card) before the first handle opened it.
std::function<duet::Registry()>& machine_opener();

}  // namespace duet::capi
