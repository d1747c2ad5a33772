#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "check/check.h"
#include "duet/backends.h"
#include "duet/check_model.h"
#include "duet/commands.h"
#include "duet/common.h"
#include "duet/internal/files.h"
#include "duet/internal/text.h"
#include "reference/reference.h"

namespace duet::cli {

// Named for the command, so that the sources compile together in a unity build.
namespace check_command {
namespace {

struct Options {
  std::vector<std::string> devices, ops, dtypes;
  std::string json_path;
  bool full = false;
  bool verbose = false;
  // A model instead of the op cases.
  ModelArgs model;
  std::string inputs_path, policy;
  const CLI::Option* policy_given = nullptr;
};

struct Row {
  std::string case_name, op, dtype, device, tier, precision, message;
  bool passed = false, skipped = false;
  check::Metrics m;
  check::Tolerance tol;
  double seconds = 0;
};

void progress(size_t done, size_t total, bool tty) {
  if (!tty || total == 0) return;
  const int width = 40;
  const int filled = static_cast<int>(width * done / total);
  std::fprintf(stderr, "\r[%s%s] %zu/%zu", std::string(static_cast<size_t>(filled), '#').c_str(),
               std::string(static_cast<size_t>(width - filled), '.').c_str(), done, total);
  if (done == total) std::fprintf(stderr, "\r%*s\r", width + 24, "");
}

nlohmann::json row_json(const Row& r) {
  return {{"case", r.case_name},      {"op", r.op},
          {"dtype", r.dtype},         {"device", r.device},
          {"tier", r.tier},           {"precision", r.precision},
          {"passed", r.passed},       {"skipped", r.skipped},
          {"message", r.message},     {"nmse", r.m.nmse},
          {"max_abs", r.m.max_abs},   {"max_rel", r.m.max_rel},
          {"tolerance", r.tol.str()}, {"seconds", r.seconds}};
}

// The matrix: ops by device and kernel tier, "passed/run" per cell ("-": the tier has no kernel
// for the op, "skip": it refused every case). Devices head groups of tier columns; tiers that ran
// no case on a device are listed below with the reason instead of taking a column.
void print_matrix(const std::vector<Row>& rows, const std::vector<Device*>& devices) {
  struct Column {
    std::string device, tier;
    size_t width = 0;
  };
  struct Cell {
    int passed = 0, run = 0, skipped = 0;
  };
  std::vector<Column> cols;
  std::vector<std::string> ops;
  std::map<std::pair<std::string, size_t>, Cell> cells;  // (op, column)
  std::vector<std::string> not_run;
  for (Device* d : devices) {
    std::vector<std::string> tiers;
    for (const Row& r : rows)
      if (r.device == d->id() && std::find(tiers.begin(), tiers.end(), r.tier) == tiers.end())
        tiers.push_back(r.tier);
    for (const std::string& t : tiers) {
      const Row* reason = nullptr;
      bool ran = false;
      for (const Row& r : rows)
        if (r.device == d->id() && r.tier == t) {
          ran = ran || !r.skipped;
          if (r.skipped && !reason) reason = &r;
        }
      if (ran)
        cols.push_back({d->id(), t, t.size()});
      else
        not_run.push_back(d->id() + "/" + t + ": " + (reason ? reason->message : "no case"));
    }
  }
  for (const Row& r : rows) {
    if (std::find(ops.begin(), ops.end(), r.op) == ops.end()) ops.push_back(r.op);
    for (size_t c = 0; c < cols.size(); ++c) {
      if (cols[c].device != r.device || cols[c].tier != r.tier) continue;
      Cell& cell = cells[{r.op, c}];
      if (r.skipped) {
        ++cell.skipped;
      } else {
        ++cell.run;
        cell.passed += r.passed;
      }
    }
  }
  auto text = [&](const std::string& op, size_t c) -> std::string {
    auto it = cells.find({op, c});
    if (it == cells.end()) return "-";
    const Cell& k = it->second;
    if (k.run == 0) return "skip";
    std::string s = std::to_string(k.passed) + "/" + std::to_string(k.run);
    return k.passed == k.run ? s : "FAIL " + s;
  };
  size_t op_width = 2;
  for (const std::string& op : ops) op_width = std::max(op_width, op.size());
  for (size_t c = 0; c < cols.size(); ++c)
    for (const std::string& op : ops) cols[c].width = std::max(cols[c].width, text(op, c).size());
  // A device's name must fit over its columns: widen its last column when it does not.
  for (size_t c = 0; c < cols.size();) {
    size_t end = c, span = 0;
    while (end < cols.size() && cols[end].device == cols[c].device) span += cols[end++].width + 2;
    if (span < cols[c].device.size() + 2) cols[end - 1].width += cols[c].device.size() + 2 - span;
    c = end;
  }
  auto pad = [](const std::string& s, size_t w) { return s + std::string(w - s.size(), ' '); };
  std::string line = pad("", op_width);
  for (size_t c = 0; c < cols.size(); ++c) {
    std::string label = c == 0 || cols[c - 1].device != cols[c].device ? cols[c].device : "";
    size_t span = cols[c].width;
    // The device label runs over the following columns of the same device.
    if (!label.empty()) {
      for (size_t k = c + 1; k < cols.size() && cols[k].device == cols[c].device; ++k)
        span += cols[k].width + 2;
      line += "  " + pad(label, span);
    }
  }
  auto print = [](std::string l) {
    while (!l.empty() && l.back() == ' ') l.pop_back();
    std::printf("%s\n", l.c_str());
  };
  print(line);
  line = pad("op", op_width);
  for (const Column& c : cols) line += "  " + pad(c.tier, c.width);
  print(line);
  for (const std::string& op : ops) {
    line = pad(op, op_width);
    for (size_t c = 0; c < cols.size(); ++c) line += "  " + pad(text(op, c), cols[c].width);
    print(line);
  }
  for (const std::string& n : not_run) std::printf("not run: %s\n", n.c_str());
}

int run_check(const CLI::App& cmd, const Options& o) {
  if (Status s = check_output_target(o.json_path, "--json"); !s.ok())
    return fail(cmd, s.message(), 2);
  if (!o.model.path.empty()) {
    if (!o.ops.empty() || !o.dtypes.empty() || o.full)
      return fail(cmd,
                  "--op, --dtype and --full choose op cases; with a model, every op of the "
                  "model is checked",
                  2);
    ModelCheckOptions m;
    m.model = o.model;
    m.inputs_path = o.inputs_path;
    m.json_path = o.json_path;
    m.policy = o.policy;
    m.policy_given = o.policy_given->count() > 0;
    m.devices = o.devices;
    return check_model(cmd, m);
  }
  if (!o.inputs_path.empty() || !o.model.dims.empty() || o.policy_given->count())
    return fail(cmd, "--inputs, --dim and --policy apply to a model (duet check MODEL)", 2);
  if (Status s = validate_ops(o.ops); !s.ok()) return fail(cmd, s.message(), 2);
  if (Status s = validate_dtypes(o.dtypes); !s.ok()) return fail(cmd, s.message(), 2);
  Registry reg = open_registry();
  auto picked = select_devices(reg, o.devices);
  if (!picked.ok()) return fail(cmd, picked.status().message(), 2);
  const std::vector<Device*>& devices = *picked;

  std::vector<check::Case> cases;
  std::set<std::string> op_dtypes;  // the dtypes of the selected ops' cases, for the error below
  for (check::Case& c : check::cases(o.full)) {
    if (!selected(o.ops, op_name(c.kind))) continue;
    op_dtypes.insert(std::string(dtype_name(c.inputs[0].dtype)));
    if (dtypes_selected(o.dtypes, c.inputs)) cases.push_back(std::move(c));
  }
  if (cases.empty()) {
    std::string known;
    for (const std::string& t : op_dtypes) known += (known.empty() ? "" : ", ") + t;
    return fail(
        cmd, "no case of the ops chosen has the dtypes chosen (their cases' dtypes: " + known + ")",
        2);
  }
  const bool tty = isatty(fileno(stderr));
  std::vector<Row> rows;
  size_t done = 0;
  for (const check::Case& c : cases) {
    progress(done++, cases.size(), tty);
    auto op = check::case_op(c);
    if (!op.ok()) return fail(cmd, "case " + c.name + ": " + op.status().message(), 70);
    std::vector<HostTensor> inputs = check::case_inputs(c);
    auto ref = reference::evaluate(*op, inputs);
    if (!ref.ok())
      return fail(cmd, "case " + c.name + ": reference failed: " + ref.status().message(), 70);
    for (Device* d : devices) {
      for (const KernelChoice& k : d->choices(*op)) {
        if (k.tier == Tier::reference) continue;  // that is what everything is compared with
        Row r{c.name,
              std::string(op_name(c.kind)),
              std::string(dtype_name(c.inputs[0].dtype)),
              d->id(),
              std::string(tier_name(k.tier)),
              std::string(precision_name(k.precision)),
              {},
              false,
              false,
              {},
              {},
              0};
        if (!k.ok) {
          r.skipped = true;
          r.message = k.reason;
        } else {
          check::Outcome out = check::run_case(*d, k, *op, inputs, *ref);
          r.passed = out.passed;
          r.skipped = out.skipped;
          r.message = out.message;
          r.m = out.metrics;
          r.tol = out.tol;
          r.seconds = out.seconds;
        }
        rows.push_back(std::move(r));
      }
    }
  }
  progress(done, cases.size(), tty);

  int failed = 0, passed = 0;
  for (const Row& r : rows)
    if (!r.skipped) r.passed ? ++passed : ++failed;
  print_matrix(rows, devices);
  for (const Row& r : rows)
    if (!r.skipped && !r.passed)
      std::printf("FAIL %s on %s/%s (%s): %s\n", r.case_name.c_str(), r.device.c_str(),
                  r.tier.c_str(), r.precision.c_str(), r.message.c_str());
  if (o.verbose)
    for (const Row& r : rows)
      if (r.skipped)
        std::printf("skip %s on %s/%s: %s\n", r.case_name.c_str(), r.device.c_str(), r.tier.c_str(),
                    r.message.c_str());
  std::printf("%d passed, %d failed, %s, %s\n", passed, failed,
              counted(int64_t(cases.size()), "case").c_str(),
              counted(int64_t(devices.size()), "device").c_str());

  if (!o.json_path.empty()) {
    nlohmann::json j;
    j["passed"] = passed;
    j["failed"] = failed;
    j["cases"] = nlohmann::json::array();
    for (const Row& r : rows) j["cases"].push_back(row_json(r));
    if (Status st = write_file_atomically(o.json_path, j.dump(2) + "\n"); !st.ok())
      return fail(cmd, st.message());
  }
  return failed == 0 ? 0 : 1;
}

}  // namespace
}  // namespace check_command

Command add_check(CLI::App& app) {
  using namespace check_command;
  auto* sub = app.add_subcommand(
      "check",
      "Run every op on every device and kernel tier and compare with the float64 CPU reference; "
      "with a MODEL, run that model on every device and tier and compare every op's value");
  auto o = std::make_shared<Options>();
  sub->add_option("model", o->model.path,
                  "A model to check op by op (duet-graph JSON or ONNX) instead of the op cases");
  sub->add_option("--inputs", o->inputs_path,
                  "With a model: its inputs by name, a .safetensors file or a folder of .npy "
                  "files (default: random)");
  add_dim_option(*sub, o->model);
  o->policy_given = sub->add_option("--policy", o->policy,
                                    "With a model: overrides, e.g. 'precision=f16' (default: "
                                    "$DUET_POLICY)");
  sub->add_option("--device", o->devices, "Device id to check (repeatable; default: all)");
  sub->add_option("--op", o->ops, "Op to check (repeatable; default: all)");
  sub->add_option("--dtype", o->dtypes, "Input dtype to check (repeatable; default: all)");
  sub->add_option("--json", o->json_path, "Write every case's result to this JSON file");
  sub->add_flag("--full", o->full, "Larger shapes, every head dim, more GQA ratios");
  sub->add_flag("-v,--verbose", o->verbose, "Also list skipped cases and why");
  auto run = std::make_shared<std::function<int()>>([sub, o] { return run_check(*sub, *o); });
  return {sub, run};
}

}  // namespace duet::cli
