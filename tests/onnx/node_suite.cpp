// ONNX's own node test suite (Debian's libonnx-testdata: 932 tests, each a model.onnx with
// test_data_set_*/input_N.pb and output_N.pb) as an outside conformance test. Every test whose
// model the importer maps runs on the devices of one kind (cpu, vulkan, cuda-emu: the CUDA
// kernels on the host emulator with the A100's capability profile, cuda: real GPUs), once per
// kernel tier a device can use for the test's ops, against the test's own expected outputs with
// ONNX's tolerances. A checked-in list gives each test's expected status; a test that passes,
// fails or is refused other than listed fails the run, so the list cannot rot.
//
//   duet_onnx_node_suite --kind cpu --expect tests/onnx/node_expectations.txt [--update]
//
// List lines: "<test> pass", "<test> unsupported <why>", or "<test> fails[<kind>,...] <why>"
// (passes on the other kinds). --update rewrites the statuses of the kinds that ran.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "check/graph_check.h"
#include "duet/backends.h"
#include "duet/engine.h"
#include "duet/onnx.h"
#include "duet/planner.h"
#include "duet/profiles.h"
#if DUET_TEST_EMULATED_CUDA
#include "emulated.h"
#endif

namespace duet {
namespace {

namespace fs = std::filesystem;

struct DataSet {
  std::vector<std::pair<std::string, HostTensor>> inputs, outputs;
};

struct Options {
  std::string kind, data_dir, expect_path, only;
  bool update = false, verbose = false;
};

// What a test did on one device kind: "pass", "unsupported", or "fail" (with the reason).
struct Outcome {
  std::string status, reason;
  int runs = 0;  // device x tier runs made
};

// One line of the list.
struct Expectation {
  std::string status;           // pass, unsupported, fails
  std::set<std::string> kinds;  // fails: the kinds it fails on
  std::string reason;
};

// A message on one line, without the `prefix` (a path or test name) it may start with.
std::string one_line(std::string s, const std::string& prefix = {}) {
  if (!prefix.empty())
    for (size_t at; (at = s.find(prefix + ": ")) != std::string::npos;)
      s.erase(at, prefix.size() + 2);
  for (char& c : s)
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  return s;
}

Result<DataSet> read_data_set(const fs::path& dir) {
  DataSet d;
  for (const char* what : {"input", "output"}) {
    for (int i = 0;; ++i) {
      const fs::path p = dir / (std::string(what) + "_" + std::to_string(i) + ".pb");
      if (!fs::exists(p)) break;
      std::string name;
      auto t = read_onnx_tensor(p.string(), &name);
      if (!t.ok())
        return Status(t.status().code(), std::string(what) + " " + std::to_string(i) + ": " +
                                             one_line(t.status().message(), p.string()));
      (what[0] == 'i' ? d.inputs : d.outputs).emplace_back(name, std::move(*t));
    }
  }
  return d;
}

// ONNX's backend-test tolerances (numpy assert_allclose, rtol 1e-3, atol 1e-7), widened for
// 16-bit outputs to two units in their last place; integers exactly.
std::string compare(const std::string& name, const HostTensor& got, const HostTensor& want) {
  if (!got.desc().same_shape(want.desc()))
    return "output '" + name + "': shape " + got.desc().shape_str() + ", expected " +
           want.desc().shape_str();
  double rtol = 1e-3, atol = 1e-7;
  if (want.dtype() == DType::f16) rtol = 2.0 * std::ldexp(1.0, -11) * 2.0;
  if (want.dtype() == DType::bf16) rtol = 2.0 * std::ldexp(1.0, -8) * 2.0;
  if (is_integer(want.dtype())) rtol = atol = 0;
  const std::vector<double> g = got.to_doubles(), w = want.to_doubles();
  int64_t bad = 0, worst = -1;
  double worst_err = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    bool ok;
    if (std::isnan(w[i]))
      ok = std::isnan(g[i]);
    else if (std::isinf(w[i]))
      ok = g[i] == w[i];
    else
      ok = std::fabs(g[i] - w[i]) <= atol + rtol * std::fabs(w[i]);
    if (!ok) {
      ++bad;
      const double e = std::isfinite(g[i] - w[i]) ? std::fabs(g[i] - w[i]) : INFINITY;
      if (worst < 0 || e > worst_err) worst = static_cast<int64_t>(i), worst_err = e;
    }
  }
  if (bad == 0) return {};
  char b[200];
  std::snprintf(b, sizeof b, "%lld of %zu elements off (worst [%lld]: %.7g, expected %.7g)",
                static_cast<long long>(bad), g.size(), static_cast<long long>(worst),
                g[static_cast<size_t>(worst)], w[static_cast<size_t>(worst)]);
  return "output '" + name + "': " + b;
}

// The importer's view of a test: input shapes from the data; where it refuses, integer inputs
// (the shapes, axes and indices that node tests feed as inputs) frozen into constants, and
// where it still refuses, small float vectors and scalars as well (Resize's scales).
struct Imported {
  Graph graph;
  std::set<std::string> frozen;
};

Result<Imported> import_test(const fs::path& dir, const std::string& name, const DataSet& d) {
  std::string bytes;
  {
    std::ifstream f(dir / "model.onnx", std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(f), {});
  }
  OnnxOptions o;
  for (const auto& [in, t] : d.inputs)
    o.input_shapes[in] = {t.desc().dims().begin(), t.desc().dims().end()};
  const std::span<const std::byte> model(reinterpret_cast<const std::byte*>(bytes.data()),
                                         bytes.size());
  auto g = import_onnx(model, dir.string(), name, o);
  if (g.ok()) return Imported{std::move(*g), {}};
  OnnxOptions frozen = o;
  Imported im;
  for (const auto& [in, t] : d.inputs)
    if (is_integer(t.dtype())) {
      frozen.frozen_inputs[in] = t;
      frozen.input_shapes.erase(in);
      im.frozen.insert(in);
    }
  if (!im.frozen.empty()) {
    auto g2 = import_onnx(model, dir.string(), name, frozen);
    if (g2.ok()) {
      im.graph = std::move(*g2);
      return im;
    }
  }
  // Then small float vectors and scalars too (Resize's scales, Pad's constant_value: parameters
  // a real model holds as constants).
  bool more = false;
  for (const auto& [in, t] : d.inputs)
    if (!is_integer(t.dtype()) && t.desc().dims().size() <= 1 && t.numel() <= 8) {
      frozen.frozen_inputs[in] = t;
      frozen.input_shapes.erase(in);
      im.frozen.insert(in);
      more = true;
    }
  if (!more) return g.status();
  auto g3 = import_onnx(model, dir.string(), name, frozen);
  if (!g3.ok()) return g.status();  // the first refusal is the one that explains
  im.graph = std::move(*g3);
  return im;
}

// Runs one plan: the outputs compared with the data set. "" when all agree.
std::string run_once(Engine& e, const Imported& im, const DataSet& d) {
  std::map<std::string, HostTensor> inputs;
  for (const auto& [name, t] : d.inputs)
    if (!im.frozen.count(name)) inputs[name] = t;
  auto out = e.run(inputs);
  if (!out.ok()) return "run: " + out.status().message();
  const auto& outs = im.graph.outputs();
  for (size_t i = 0; i < d.outputs.size(); ++i) {
    std::string name = d.outputs[i].first;
    if (!out->count(name) && i < outs.size()) name = im.graph.value(outs[i]).name;
    auto it = out->find(name);
    if (it == out->end()) return "no output '" + name + "'";
    if (std::string why = compare(name, it->second, d.outputs[i].second); !why.empty()) return why;
  }
  return {};
}

// Every device of the kind, and every tier reachable by denying the ones used before.
Outcome run_test(const std::vector<Device*>& devices, const Imported& im,
                 const std::vector<DataSet>& sets) {
  Outcome o;
  for (Device* dev : devices) {
    std::string deny;
    for (int round = 0; round < 8; ++round) {
      Policy policy;
      if (!deny.empty()) {
        auto p = parse_policy("deny=" + deny);
        if (!p.ok()) return {"fail", "policy " + deny + ": " + p.status().message(), o.runs};
        policy = *p;
      }
      auto e = Engine::create(im.graph, {dev}, policy);
      // Tiers are denied for the whole graph: where one op's replaceable tier was the only one
      // another op could use (two matmuls of different shapes), that op cannot be placed; the
      // tiers reachable by denial have then all run.
      if (!e.ok() && round > 0 &&
          e.status().message().find("cannot be placed") != std::string::npos)
        break;
      if (!e.ok()) return {"fail", dev->id() + ": " + one_line(e.status().message()), o.runs};
      const std::string tiers = deny.empty() ? "" : " (deny=" + deny + ")";
      for (const DataSet& d : sets) {
        ++o.runs;
        if (std::string why = run_once(**e, im, d); !why.empty())
          return {"fail", dev->id() + tiers + ": " + one_line(why), o.runs};
      }
      const std::vector<Tier> more = check::replaceable_tiers((*e)->plan(), dev->id());
      if (more.empty()) break;
      for (Tier t : more)
        deny += (deny.empty() ? "" : ",") + dev->id() + "." + std::string(tier_name(t));
    }
  }
  return {"pass", "", o.runs};
}

std::map<std::string, Expectation> read_expectations(const std::string& path) {
  std::map<std::string, Expectation> out;
  std::ifstream f(path);
  std::string line;
  while (std::getline(f, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream s(line);
    std::string name, status;
    s >> name >> status;
    Expectation e;
    if (status.rfind("fails[", 0) == 0 && status.back() == ']') {
      std::stringstream kinds(status.substr(6, status.size() - 7));
      for (std::string k; std::getline(kinds, k, ',');) e.kinds.insert(k);
      status = "fails";
    }
    e.status = status;
    std::getline(s >> std::ws, e.reason);
    out[name] = e;
  }
  return out;
}

void write_expectations(const std::string& path, const std::map<std::string, Expectation>& all) {
  std::ofstream f(path);
  f << "# The expected status of every ONNX node test (tests/onnx/node_suite.cpp): pass,\n"
       "# unsupported (the importer refuses the model, with why), or fails[kinds] (fails on those\n"
       "# device kinds, passes on the others). Regenerate with --update after a deliberate change\n"
       "# and read the diff.\n";
  for (const auto& [name, e] : all) {
    f << name << " ";
    if (e.status == "fails") {
      std::string k;
      for (const std::string& x : e.kinds) k += (k.empty() ? "" : ",") + x;
      f << "fails[" << k << "]";
    } else {
      f << e.status;
    }
    if (!e.reason.empty()) f << " " << e.reason;
    f << "\n";
  }
}

// The expectation for one kind, as "status" or "status: reason".
std::string expected_for(const Expectation& e, const std::string& kind) {
  if (e.status == "fails") return e.kinds.count(kind) ? "fail: " + e.reason : "pass";
  if (e.status == "unsupported") return "unsupported: " + e.reason;
  return e.status;
}

std::string actual(const Outcome& o) {
  return o.reason.empty() ? o.status : o.status + ": " + o.reason;
}

int run(const Options& opt) {
  if (!fs::is_directory(opt.data_dir)) {
    std::printf("SKIP: no ONNX node tests at %s (Debian's libonnx-testdata; tools/setup.sh)\n",
                opt.data_dir.c_str());
    return 77;
  }
  Registry reg = open_registry();
  std::vector<std::unique_ptr<Device>> owned;
  std::vector<Device*> devices;
  if (opt.kind == "cuda-emu") {
#if DUET_TEST_EMULATED_CUDA
    owned.push_back(cuda::testing::open_emulated("a100"));
    for (auto& d : owned) devices.push_back(d.get());
#endif
  } else {
    const std::map<std::string, BackendKind> kinds = {
        {"cpu", BackendKind::cpu}, {"vulkan", BackendKind::vulkan}, {"cuda", BackendKind::cuda}};
    if (!kinds.count(opt.kind)) {
      std::fprintf(stderr, "--kind: cpu, vulkan, cuda-emu or cuda, not '%s'\n", opt.kind.c_str());
      return 2;
    }
    for (Device* d : reg.devices())
      if (d->caps().backend == kinds.at(opt.kind)) devices.push_back(d);
  }
  if (devices.empty()) {
    std::printf("SKIP: no %s device on this machine\n", opt.kind.c_str());
    return 77;
  }
  std::string names;
  for (Device* d : devices)
    names += (names.empty() ? "" : ", ") + d->id() + " (" + d->caps().name + ")";
  std::printf("ONNX node tests from %s on %s\n", opt.data_dir.c_str(), names.c_str());

  std::vector<std::string> tests;
  for (const auto& e : fs::directory_iterator(opt.data_dir))
    if (fs::exists(e.path() / "model.onnx")) tests.push_back(e.path().filename().string());
  std::sort(tests.begin(), tests.end());

  std::map<std::string, Expectation> expect = read_expectations(opt.expect_path);
  std::map<std::string, Expectation> updated = expect;
  int imported = 0, passed = 0, failed = 0, unexpected = 0, runs = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (const std::string& name : tests) {
    if (!opt.only.empty() && name != opt.only) continue;
    const fs::path dir = fs::path(opt.data_dir) / name;
    Outcome o;
    std::vector<DataSet> sets;
    for (const auto& e : fs::directory_iterator(dir))
      if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0) {
        auto d = read_data_set(e.path());
        if (!d.ok()) {
          o = {"unsupported", "test data " + one_line(d.status().message()), 0};
          break;
        }
        sets.push_back(std::move(*d));
      }
    if (o.status.empty() && sets.empty()) o = {"unsupported", "no test data", 0};
    if (!o.status.empty()) {
      // Data duet cannot hold (sequences, bool, double...): the model's own refusal, when it
      // has one, says more.
      auto im = import_test(dir, name, DataSet{});
      if (!im.ok()) o.reason = one_line(im.status().message(), name);
    }
    if (o.status.empty()) {
      auto im = import_test(dir, name, sets[0]);
      if (!im.ok()) {
        o = {"unsupported", one_line(im.status().message(), name), 0};
      } else {
        ++imported;
        o = run_test(devices, *im, sets);
        runs += o.runs;
        (o.status == "pass" ? passed : failed)++;
      }
    }
    Expectation& u = updated[name];
    if (o.status == "unsupported") {
      u = {"unsupported", {}, o.reason};
    } else {
      if (u.status != "fails") u.kinds.clear();
      if (o.status == "fail")
        u.kinds.insert(opt.kind);
      else
        u.kinds.erase(opt.kind);
      u.status = u.kinds.empty() ? "pass" : "fails";
      u.reason = u.kinds.empty() ? "" : (o.status == "fail" ? o.reason : u.reason);
    }
    const std::string want =
        expect.count(name) ? expected_for(expect.at(name), opt.kind) : "(not listed)";
    const std::string got = actual(o);
    const bool same = want == got || (o.status == "fail" && want.rfind("fail", 0) == 0);
    if (!same) {
      ++unexpected;
      std::printf("UNEXPECTED %s on %s\n  listed: %s\n  now:    %s\n", name.c_str(),
                  opt.kind.c_str(), want.c_str(), got.c_str());
    } else if (opt.verbose) {
      std::printf("%-50s %s\n", name.c_str(), got.c_str());
    }
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf(
      "%s: %zu node tests, %d imported, %d pass, %d fail (%d device x tier runs); %d "
      "differ from the list; %.1f s\n",
      opt.kind.c_str(), tests.size(), imported, passed, failed, runs, unexpected, secs);
  if (opt.update) {
    write_expectations(opt.expect_path, updated);
    std::printf("wrote %s\n", opt.expect_path.c_str());
    return 0;
  }
  if (unexpected)
    std::printf("a change on purpose? rerun with --update and read the diff of %s\n",
                opt.expect_path.c_str());
  return unexpected ? 1 : 0;
}

}  // namespace
}  // namespace duet

int main(int argc, char** argv) {
  duet::Options o;
  o.data_dir = DUET_ONNX_NODE_TESTS;
  o.expect_path = DUET_ONNX_EXPECTATIONS;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--kind") {
      o.kind = value();
    } else if (a == "--data") {
      o.data_dir = value();
    } else if (a == "--expect") {
      o.expect_path = value();
    } else if (a == "--only") {
      o.only = value();
    } else if (a == "--update") {
      o.update = true;
    } else if (a == "-v" || a == "--verbose") {
      o.verbose = true;
    } else {
      std::fprintf(stderr,
                   "usage: %s --kind cpu|vulkan|cuda-emu|cuda [--data DIR] [--expect FILE] "
                   "[--only TEST] [--update] [-v]\n",
                   argv[0]);
      return 2;
    }
  }
  return duet::run(o);
}
