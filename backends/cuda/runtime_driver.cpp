// The Driver over the CUDA runtime (linked statically: it loads libcuda.so.1 itself at the first
// call, so the program starts without a driver) and cuBLASLt (loaded with dlopen at run time, so
// its absence only removes the cuBLAS choice). Built only when CUDA is.
#include "runtime_driver.h"

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>

#include "duet/internal/log.h"
#include "errors.h"

#if defined(_WIN32)
#error "the CUDA backend's dynamic loading is written for POSIX (dlopen) only"
#endif
#include <dlfcn.h>

namespace duet::cuda {

// The numbers errors.h spells out are CUDA's.
static_assert(cuda_error::memory_allocation == cudaErrorMemoryAllocation);
static_assert(cuda_error::insufficient_driver == cudaErrorInsufficientDriver);
static_assert(cuda_error::devices_unavailable == cudaErrorDevicesUnavailable);
static_assert(cuda_error::no_device == cudaErrorNoDevice);
static_assert(cuda_error::no_kernel_image == cudaErrorNoKernelImageForDevice);
static_assert(cuda_error::ecc_uncorrectable == cudaErrorECCUncorrectable);
static_assert(cuda_error::nvlink_uncorrectable == cudaErrorNvlinkUncorrectable);
static_assert(cuda_error::jit_compiler_not_found == cudaErrorJitCompilerNotFound);
static_assert(cuda_error::unsupported_ptx_version == cudaErrorUnsupportedPtxVersion);
static_assert(cuda_error::contained == cudaErrorContained);
static_assert(cuda_error::illegal_address == cudaErrorIllegalAddress);
static_assert(cuda_error::launch_out_of_resources == cudaErrorLaunchOutOfResources);
static_assert(cuda_error::launch_timeout == cudaErrorLaunchTimeout);
static_assert(cuda_error::context_is_destroyed == cudaErrorContextIsDestroyed);
static_assert(cuda_error::assert_failed == cudaErrorAssert);
static_assert(cuda_error::hardware_stack_error == cudaErrorHardwareStackError);
static_assert(cuda_error::illegal_instruction == cudaErrorIllegalInstruction);
static_assert(cuda_error::misaligned_address == cudaErrorMisalignedAddress);
static_assert(cuda_error::invalid_address_space == cudaErrorInvalidAddressSpace);
static_assert(cuda_error::invalid_pc == cudaErrorInvalidPc);
static_assert(cuda_error::launch_failure == cudaErrorLaunchFailure);
static_assert(cuda_error::system_driver_mismatch == cudaErrorSystemDriverMismatch);
static_assert(cuda_error::compat_not_supported == cudaErrorCompatNotSupportedOnDevice);
static_assert(cuda_error::external_device == cudaErrorExternalDevice);

namespace {

// A Status for a failed runtime call. Non-sticky errors are cleared from the runtime's
// last-error slot so that they do not surface again in an unrelated later check.
Status cuda_status(cudaError_t e, std::string_view what) {
  if (e == cudaSuccess) return {};
  const Code code = classify_cuda_error(static_cast<int>(e));
  if (code != Code::device_lost) (void)cudaGetLastError();
  return Status(
      code, std::string(what) + ": " + cudaGetErrorString(e) + " (" + cudaGetErrorName(e) + ")");
}

std::string read_first_line(const std::string& path) {
  std::ifstream f(path);
  std::string s;
  std::getline(f, s);
  return s;
}

// cuBLASLt entry points, resolved with dlsym from the library the backend found.
struct Lt {
  void* lib = nullptr;
  std::string description;  // "cuBLASLt 13.0.2 (libcublasLt.so.13)" or "unavailable: why"
  decltype(&cublasLtCreate) create = nullptr;
  decltype(&cublasLtGetVersion) get_version = nullptr;
  decltype(&cublasLtMatmulDescCreate) desc_create = nullptr;
  decltype(&cublasLtMatmulDescDestroy) desc_destroy = nullptr;
  decltype(&cublasLtMatmulDescSetAttribute) desc_set = nullptr;
  decltype(&cublasLtMatrixLayoutCreate) layout_create = nullptr;
  decltype(&cublasLtMatrixLayoutDestroy) layout_destroy = nullptr;
  decltype(&cublasLtMatrixLayoutSetAttribute) layout_set = nullptr;
  decltype(&cublasLtMatmulPreferenceCreate) pref_create = nullptr;
  decltype(&cublasLtMatmulPreferenceDestroy) pref_destroy = nullptr;
  decltype(&cublasLtMatmulPreferenceSetAttribute) pref_set = nullptr;
  decltype(&cublasLtMatmulAlgoGetHeuristic) heuristic = nullptr;
  decltype(&cublasLtMatmul) matmul = nullptr;

  bool ok() const { return lib != nullptr; }
};

template <class F>
bool resolve(void* lib, const char* name, F* out) {
  *out = reinterpret_cast<F>(dlsym(lib, name));
  return *out != nullptr;
}

Lt load_cublaslt() {
  Lt lt;
  const std::string soname = "libcublasLt.so." + std::to_string(CUDART_VERSION / 1000);
  std::string tried;
  for (const std::string& path : {soname, std::string(DUET_CUDA_LIBDIR) + "/" + soname}) {
    lt.lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lt.lib) break;
    tried += (tried.empty() ? "" : ", ") + path;
  }
  if (!lt.lib) {
    lt.description = "unavailable: " + soname + " not found (tried " + tried + ")";
    return lt;
  }
  const bool all = resolve(lt.lib, "cublasLtCreate", &lt.create) &&
                   resolve(lt.lib, "cublasLtGetVersion", &lt.get_version) &&
                   resolve(lt.lib, "cublasLtMatmulDescCreate", &lt.desc_create) &&
                   resolve(lt.lib, "cublasLtMatmulDescDestroy", &lt.desc_destroy) &&
                   resolve(lt.lib, "cublasLtMatmulDescSetAttribute", &lt.desc_set) &&
                   resolve(lt.lib, "cublasLtMatrixLayoutCreate", &lt.layout_create) &&
                   resolve(lt.lib, "cublasLtMatrixLayoutDestroy", &lt.layout_destroy) &&
                   resolve(lt.lib, "cublasLtMatrixLayoutSetAttribute", &lt.layout_set) &&
                   resolve(lt.lib, "cublasLtMatmulPreferenceCreate", &lt.pref_create) &&
                   resolve(lt.lib, "cublasLtMatmulPreferenceDestroy", &lt.pref_destroy) &&
                   resolve(lt.lib, "cublasLtMatmulPreferenceSetAttribute", &lt.pref_set) &&
                   resolve(lt.lib, "cublasLtMatmulAlgoGetHeuristic", &lt.heuristic) &&
                   resolve(lt.lib, "cublasLtMatmul", &lt.matmul);
  if (!all) {
    dlclose(lt.lib);
    lt = Lt{};
    lt.description = "unavailable: " + soname + " lacks a cuBLASLt entry point";
    return lt;
  }
  const size_t v = lt.get_version();
  lt.description = "cuBLASLt " + std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) +
                   "." + std::to_string(v % 100) + " (" + soname + ")";
  return lt;
}

cudaDataType_t data_type(DType t) {
  switch (t) {
    case DType::f16:
      return CUDA_R_16F;
    case DType::bf16:
      return CUDA_R_16BF;
    default:
      return CUDA_R_32F;
  }
}

uint32_t alignment(const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  uint32_t al = 256;
  while (al > 1 && a % al != 0) al /= 2;
  return al;
}

Status blas_status(cublasStatus_t s, std::string_view what) {
  if (s == CUBLAS_STATUS_SUCCESS) return {};
  Code code = Code::internal;
  if (s == CUBLAS_STATUS_ALLOC_FAILED) code = Code::out_of_memory;
  if (s == CUBLAS_STATUS_NOT_SUPPORTED || s == CUBLAS_STATUS_ARCH_MISMATCH)
    code = Code::unsupported;
  if (s == CUBLAS_STATUS_EXECUTION_FAILED) {
    // A kernel failed to launch or run; a sticky error shows in the runtime's error state.
    const cudaError_t e = cudaPeekAtLastError();
    if (classify_cuda_error(static_cast<int>(e)) == Code::device_lost)
      return cuda_status(e, std::string(what) + " (execution failed)");
  }
  return Status(code, std::string(what) + " returned cublasStatus " + std::to_string(s));
}

// Descriptors and the chosen algorithm for one GEMM shape, kept for reuse: the heuristic query
// costs far more than the GEMM for small shapes.
struct GemmPlan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
};

class RuntimeDriver final : public Driver {
 public:
  DriverStatus status() override {
    DriverStatus s;
    s.runtime_version = CUDART_VERSION;
    if (!libcuda_) libcuda_ = dlopen(kDriverLibrary, RTLD_NOW | RTLD_LOCAL);
    if (!libcuda_) return s;
    s.library_found = true;
    using GetVersion = int (*)(int*);  // CUresult cuDriverGetVersion(int*), no cuInit needed
    GetVersion get = nullptr;
    int v = 0;
    if (resolve(libcuda_, "cuDriverGetVersion", &get) && get(&v) == 0) s.driver_version = v;
    if (s.driver_version && s.driver_version < CUDART_VERSION / 1000 * 1000) return s;
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    if (e == cudaSuccess)
      s.device_count = n;
    else if (e != cudaErrorNoDevice)  // no device: count stays 0
      s.count_error = cuda_status(e, "cudaGetDeviceCount").message();
    (void)cudaGetLastError();
    return s;
  }

  Result<DeviceProps> properties(int ordinal) override {
    cudaDeviceProp p{};
    DUET_TRY(cuda_status(cudaGetDeviceProperties(&p, ordinal), "cudaGetDeviceProperties"));
    DeviceProps d;
    d.ordinal = ordinal;
    d.name = p.name;
    d.major = p.major;
    d.minor = p.minor;
    d.sm_count = p.multiProcessorCount;
    (void)cudaDeviceGetAttribute(&d.clock_khz, cudaDevAttrClockRate, ordinal);
    (void)cudaDeviceGetAttribute(&d.memory_clock_khz, cudaDevAttrMemoryClockRate, ordinal);
    d.memory_bus_bits = p.memoryBusWidth;
    d.total_memory = p.totalGlobalMem;
    d.shared_per_block = p.sharedMemPerBlock;
    d.shared_per_block_optin = p.sharedMemPerBlockOptin;
    d.shared_per_sm = p.sharedMemPerMultiprocessor;
    d.regs_per_block = p.regsPerBlock;
    d.regs_per_sm = p.regsPerMultiprocessor;
    d.warp_size = p.warpSize;
    d.max_threads_per_block = p.maxThreadsPerBlock;
    d.max_threads_per_sm = p.maxThreadsPerMultiProcessor;
    for (size_t i = 0; i < 3; ++i) {
      d.max_block[i] = p.maxThreadsDim[i];
      d.max_grid[i] = p.maxGridSize[i];
    }
    d.l2_bytes = p.l2CacheSize;
    d.integrated = p.integrated != 0;
    d.ecc = p.ECCEnabled != 0;
    d.pci_domain = p.pciDomainID;
    d.pci_bus = p.pciBusID;
    d.pci_device = p.pciDeviceID;
    if (!decode_pci_ids(p.gpuPciDeviceID, &d.pci_vendor_id, &d.pci_device_id)) {
      // Older drivers leave the field 0: read the id from sysfs.
      const std::string dir =
          "/sys/bus/pci/devices/" + pci_bus_id_string(d.pci_domain, d.pci_bus, d.pci_device);
      const std::string dev = read_first_line(dir + "/device");
      const std::string ven = read_first_line(dir + "/vendor");
      if (!dev.empty())
        d.pci_device_id = static_cast<uint16_t>(std::strtoul(dev.c_str(), nullptr, 16));
      if (!ven.empty())
        d.pci_vendor_id = static_cast<uint16_t>(std::strtoul(ven.c_str(), nullptr, 16));
    }
    std::array<uint8_t, 16> uuid{};
    for (size_t i = 0; i < 16; ++i) uuid[i] = static_cast<uint8_t>(p.uuid.bytes[i]);
    d.uuid = uuid;
    int rt = 0, drv = 0;
    (void)cudaRuntimeGetVersion(&rt);
    (void)cudaDriverGetVersion(&drv);
    d.runtime_version = rt;
    d.driver_version = drv;
    return d;
  }

  std::string blas_library() override {
    std::lock_guard<std::mutex> lock(mu_);
    if (!lt_loaded_) {
      lt_ = load_cublaslt();
      lt_loaded_ = true;
      log().info("cuda: {}", lt_.description);
    }
    return lt_.description;
  }

  Status use(int ordinal) override { return cuda_status(cudaSetDevice(ordinal), "cudaSetDevice"); }

  Result<MemoryInfo> memory_info() override {
    MemoryInfo m;
    size_t f = 0, t = 0;
    DUET_TRY(cuda_status(cudaMemGetInfo(&f, &t), "cudaMemGetInfo"));
    m.free = f;
    m.total = t;
    return m;
  }

  Result<void*> device_alloc(uint64_t bytes) override {
    void* p = nullptr;
    DUET_TRY(
        cuda_status(cudaMalloc(&p, bytes), "cudaMalloc of " + std::to_string(bytes) + " bytes"));
    return p;
  }
  void device_free(void* p) override { (void)cudaFree(p); }

  Result<void*> pinned_alloc(uint64_t bytes) override {
    void* p = nullptr;
    DUET_TRY(cuda_status(cudaHostAlloc(&p, bytes, cudaHostAllocDefault), "cudaHostAlloc"));
    return p;
  }
  void pinned_free(void* p) override { (void)cudaFreeHost(p); }

  Result<Stream> stream_create() override {
    cudaStream_t s = nullptr;
    DUET_TRY(cuda_status(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate"));
    return static_cast<Stream>(s);
  }
  void stream_destroy(Stream s) override { (void)cudaStreamDestroy(static_cast<cudaStream_t>(s)); }
  Status stream_sync(Stream s) override {
    return cuda_status(cudaStreamSynchronize(static_cast<cudaStream_t>(s)),
                       "cudaStreamSynchronize");
  }

  Result<Event> event_create() override {
    cudaEvent_t e = nullptr;
    DUET_TRY(cuda_status(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate"));
    return static_cast<Event>(e);
  }
  void event_destroy(Event e) override { (void)cudaEventDestroy(static_cast<cudaEvent_t>(e)); }
  Status event_record(Event e, Stream s) override {
    return cuda_status(cudaEventRecord(static_cast<cudaEvent_t>(e), static_cast<cudaStream_t>(s)),
                       "cudaEventRecord");
  }
  Status event_sync(Event e) override {
    return cuda_status(cudaEventSynchronize(static_cast<cudaEvent_t>(e)), "cudaEventSynchronize");
  }
  int current_device() override {
    int d = -1;
    return cudaGetDevice(&d) == cudaSuccess ? d : -1;
  }
  Result<bool> event_done(Event e) override {
    const cudaError_t r = cudaEventQuery(static_cast<cudaEvent_t>(e));
    if (r == cudaErrorNotReady) {
      (void)cudaGetLastError();  // not an error: the work is still running
      return false;
    }
    DUET_TRY(cuda_status(r, "cudaEventQuery"));
    return true;
  }
  Result<Event> timing_event_create() override {
    cudaEvent_t e = nullptr;
    DUET_TRY(cuda_status(cudaEventCreateWithFlags(&e, cudaEventDefault), "cudaEventCreate"));
    return static_cast<Event>(e);
  }
  Result<float> event_elapsed_ms(Event start, Event end) override {
    float ms = 0;
    DUET_TRY(cuda_status(
        cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(start), static_cast<cudaEvent_t>(end)),
        "cudaEventElapsedTime"));
    return ms;
  }

  // Graphs: captured from this thread's work on the stream only (other threads may allocate
  // meanwhile), instantiated at once.
  Status capture_begin(Stream s) override {
    return cuda_status(
        cudaStreamBeginCapture(static_cast<cudaStream_t>(s), cudaStreamCaptureModeThreadLocal),
        "cudaStreamBeginCapture");
  }
  Result<void*> capture_end(Stream s) override {
    cudaGraph_t graph = nullptr;
    DUET_TRY(cuda_status(cudaStreamEndCapture(static_cast<cudaStream_t>(s), &graph),
                         "cudaStreamEndCapture"));
    cudaGraphExec_t exec = nullptr;
    const Status made =
        cuda_status(cudaGraphInstantiateWithFlags(&exec, graph, 0), "cudaGraphInstantiate");
    (void)cudaGraphDestroy(graph);
    DUET_TRY(made);
    return static_cast<void*>(exec);
  }
  Status graph_launch(void* graph, Stream s) override {
    return cuda_status(
        cudaGraphLaunch(static_cast<cudaGraphExec_t>(graph), static_cast<cudaStream_t>(s)),
        "cudaGraphLaunch");
  }
  void graph_destroy(void* graph) override {
    (void)cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(graph));
  }

  Status copy_to_device(void* dst, const void* src, uint64_t bytes, Stream s) override {
    return cuda_status(
        cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, static_cast<cudaStream_t>(s)),
        "cudaMemcpyAsync to the device");
  }
  Status copy_to_host(void* dst, const void* src, uint64_t bytes, Stream s) override {
    return cuda_status(
        cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, static_cast<cudaStream_t>(s)),
        "cudaMemcpyAsync to the host");
  }

  Status launch(Tier tier, const OpDesc& op, std::span<const kernels::View> in,
                const kernels::View& out, const kernels::Launch& l) override {
#if DUET_HAVE_KERNELS_GPU
    Status s = kernels::gpu::launch(tier, op, in, out, l);
    if (!s.ok()) return s;
    // A launch error (bad configuration, no image) shows here; faults show at the next sync.
    return cuda_status(cudaPeekAtLastError(), "kernel launch");
#else
    (void)op, (void)in, (void)out, (void)l;
    return Status(Code::unsupported, "this build has no GPU kernels for the " +
                                         std::string(kernels::tier_name(tier)) +
                                         " tier (duet_kernels_gpu was not built)");
#endif
  }

  Status launch_group(Tier tier, std::span<const kernels::GroupMember> members,
                      const kernels::Launch& l, const kernels::GroupMember* norm,
                      const kernels::GroupMember* add) override {
#if DUET_HAVE_KERNELS_GPU
    Status s = kernels::gpu::launch_group(tier, members, l, norm, add);
    if (!s.ok()) return s;
    return cuda_status(cudaPeekAtLastError(), "kernel launch");
#else
    (void)members, (void)l, (void)norm, (void)add;
    return Status(Code::unsupported, "this build has no GPU kernels for the " +
                                         std::string(kernels::tier_name(tier)) +
                                         " tier (duet_kernels_gpu was not built)");
#endif
  }

  Status launch_rope_write(std::span<const kernels::FusedOp> ops,
                           const kernels::Launch& l) override {
#if DUET_HAVE_KERNELS_GPU
    Status s = kernels::gpu::launch_rope_write(ops, l);
    if (!s.ok()) return s;
    return cuda_status(cudaPeekAtLastError(), "kernel launch");
#else
    (void)ops, (void)l;
    return Status(Code::unsupported,
                  "this build has no GPU kernels for the generic tier (duet_kernels_gpu was not "
                  "built)");
#endif
  }

  Status gemm(const GemmCall& g, const void* a, const void* b, void* d, Stream s, void* workspace,
              uint64_t workspace_bytes) override {
    if (!lt_.ok()) return Status(Code::unsupported, "cuBLASLt " + blas_library());
    int dev = 0;
    DUET_TRY(cuda_status(cudaGetDevice(&dev), "cudaGetDevice"));
    cublasLtHandle_t h = nullptr;
    DUET_ASSIGN_OR_RETURN(h, handle(dev));
    const uint32_t al_a = alignment(a), al_b = alignment(b), al_d = alignment(d);
    char key[320];
    std::snprintf(key, sizeof key,
                  "%d|%lld,%lld,%lld,%lld|%d%d|%lld,%lld,%lld|%lld,%lld,%lld|%d%d%d|%u,%u,%u|%llu",
                  dev, static_cast<long long>(g.m), static_cast<long long>(g.n),
                  static_cast<long long>(g.k), static_cast<long long>(g.batch), g.trans_a,
                  g.trans_b, static_cast<long long>(g.lda), static_cast<long long>(g.ldb),
                  static_cast<long long>(g.ldd), static_cast<long long>(g.stride_a),
                  static_cast<long long>(g.stride_b), static_cast<long long>(g.stride_d),
                  static_cast<int>(g.a_type), static_cast<int>(g.b_type),
                  static_cast<int>(g.d_type), al_a, al_b, al_d,
                  static_cast<unsigned long long>(workspace_bytes));
    GemmPlan* plan = nullptr;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = plans_.find(key);
      if (it == plans_.end()) {
        GemmPlan p;
        Status st = make_plan(h, g, al_a, al_b, al_d, workspace_bytes, &p);
        if (!st.ok()) {
          destroy(p);
          return st;
        }
        if (plans_.size() >= 4096) {
          for (auto& [k, old] : plans_) destroy(old);
          plans_.clear();
        }
        it = plans_.emplace(key, p).first;
      }
      plan = &it->second;
    }
    const float alpha = 1.0f, beta = g.accumulate ? 1.0f : 0.0f;
    return blas_status(
        lt_.matmul(h, plan->desc, &alpha, a, plan->a, b, plan->b, &beta, d, plan->d, d, plan->d,
                   &plan->algo, workspace, workspace_bytes, static_cast<cudaStream_t>(s)),
        "cublasLtMatmul");
  }

 private:
  Result<cublasLtHandle_t> handle(int dev) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = handles_.find(dev);
    if (it != handles_.end()) return it->second;
    cublasLtHandle_t h = nullptr;
    DUET_TRY(blas_status(lt_.create(&h), "cublasLtCreate"));
    handles_[dev] = h;
    return h;
  }

  void destroy(GemmPlan& p) {
    if (p.a) lt_.layout_destroy(p.a);
    if (p.b) lt_.layout_destroy(p.b);
    if (p.d) lt_.layout_destroy(p.d);
    if (p.desc) lt_.desc_destroy(p.desc);
    p = GemmPlan{};
  }

  Status layout(cublasLtMatrixLayout_t* l, DType t, int64_t rows, int64_t cols, int64_t ld,
                int64_t batch, int64_t stride) {
    DUET_TRY(blas_status(lt_.layout_create(l, data_type(t), static_cast<uint64_t>(rows),
                                           static_cast<uint64_t>(cols), ld),
                         "cublasLtMatrixLayoutCreate"));
    if (batch > 1) {
      const auto count = static_cast<int32_t>(batch);
      DUET_TRY(
          blas_status(lt_.layout_set(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count),
                      "cublasLtMatrixLayoutSetAttribute"));
      DUET_TRY(blas_status(
          lt_.layout_set(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride),
          "cublasLtMatrixLayoutSetAttribute"));
    }
    return {};
  }

  Status make_plan(cublasLtHandle_t h, const GemmCall& g, uint32_t al_a, uint32_t al_b,
                   uint32_t al_d, uint64_t workspace_bytes, GemmPlan* p) {
    DUET_TRY(blas_status(lt_.desc_create(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F),
                         "cublasLtMatmulDescCreate"));
    const int32_t ta = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    const int32_t tb = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    DUET_TRY(blas_status(lt_.desc_set(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta),
                         "cublasLtMatmulDescSetAttribute"));
    DUET_TRY(blas_status(lt_.desc_set(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb),
                         "cublasLtMatmulDescSetAttribute"));
    DUET_TRY(layout(&p->a, g.a_type, g.trans_a ? g.k : g.m, g.trans_a ? g.m : g.k, g.lda, g.batch,
                    g.stride_a));
    DUET_TRY(layout(&p->b, g.b_type, g.trans_b ? g.n : g.k, g.trans_b ? g.k : g.n, g.ldb, g.batch,
                    g.stride_b));
    DUET_TRY(layout(&p->d, g.d_type, g.m, g.n, g.ldd, g.batch, g.stride_d));

    cublasLtMatmulPreference_t pref = nullptr;
    DUET_TRY(blas_status(lt_.pref_create(&pref), "cublasLtMatmulPreferenceCreate"));
    auto set = [&](cublasLtMatmulPreferenceAttributes_t attr, const void* v, size_t n) {
      return blas_status(lt_.pref_set(pref, attr, v, n), "cublasLtMatmulPreferenceSetAttribute");
    };
    Status st =
        set(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes, sizeof workspace_bytes);
    if (st.ok()) st = set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al_a, sizeof al_a);
    if (st.ok()) st = set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al_b, sizeof al_b);
    if (st.ok()) st = set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_d, sizeof al_d);
    if (st.ok()) st = set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al_d, sizeof al_d);
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    if (st.ok())
      st = blas_status(lt_.heuristic(h, p->desc, p->a, p->b, p->d, p->d, pref, 1, &result, &found),
                       "cublasLtMatmulAlgoGetHeuristic");
    lt_.pref_destroy(pref);
    DUET_TRY(st);
    if (found == 0)
      return Status(Code::unsupported, "cuBLASLt has no algorithm for this GEMM (m " +
                                           std::to_string(g.m) + ", n " + std::to_string(g.n) +
                                           ", k " + std::to_string(g.k) + ")");
    p->algo = result.algo;
    return {};
  }

  std::mutex mu_;
  void* libcuda_ = nullptr;
  bool lt_loaded_ = false;
  Lt lt_;
  std::map<int, cublasLtHandle_t> handles_;
  std::map<std::string, GemmPlan> plans_;
};

}  // namespace

std::shared_ptr<Driver> runtime_driver() {
  // Never destroyed: at exit the CUDA runtime and cuBLASLt tear themselves down in an order we
  // do not control, and calling into them afterwards can crash.
  static const std::shared_ptr<Driver> d(new RuntimeDriver, [](Driver*) {});
  return d;
}

}  // namespace duet::cuda
