// duet ops: the op set for people writing graphs. Everything it prints comes from the code: each
// op's row of facts (core/src/ops/: inputs, attributes, semantics, an example graph), the dtypes
// `duet check` covers, and the tiers each backend's rules offer on the shipped device profiles
// (for a default build: CUDA's tiers as a default CUDA 13 build has them, whatever this one has).
// `duet ops --markdown` is docs/ops.md (a test fails when they differ).
#include <cstdio>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

#include "check/check.h"
#include "duet/backends.h"
#include "duet/commands.h"
#include "duet/profiles.h"

namespace duet::cli {

// Named for the command, so that the sources compile together in a unity build.
namespace ops_command {
namespace {

struct Options {
  bool markdown = false;
  std::string example;
};

// What a backend offers for an op kind at one tier: the precisions usable on some profile, the
// profiles where it is usable, and why it is refused where it never is.
struct TierUse {
  std::set<Precision> precisions;
  std::set<std::string> profiles;
  std::string refusal;
};
using TierKey = std::pair<BackendKind, Tier>;

struct Profile {
  std::string name;
  DeviceCaps caps;
};

std::vector<Profile> shipped_profiles() {
  std::vector<Profile> out;
  for (const std::string& n : profile_names()) {
    auto caps = load_profile(n);
    if (!caps.ok()) continue;
    default_build_rules(caps->backend).annotate_profile(*caps);
    out.push_back({n, std::move(*caps)});
  }
  return out;
}

// The index of the op's input spec that input i of an op instance fills: attention's 4th input
// is kv_len when it is a run-time scalar; concat repeats its one spec.
size_t spec_index(const OpDesc& op, size_t i) {
  const size_t n = op_inputs(op.kind).size();
  if (static_cast<int>(i) == scalar_input(op)) return n - 1;
  return std::min(i, n - 1);
}

// Everything about one op kind that is found by looking at the check cases.
struct Coverage {
  std::vector<std::set<DType>> dtypes;  // per input spec
  std::map<TierKey, TierUse> tiers;
};

std::map<OpKind, Coverage> coverage(const std::vector<Profile>& profiles) {
  std::map<OpKind, Coverage> out;
  for (const check::Case& c : check::cases(true)) {
    auto op = check::case_op(c);
    if (!op.ok()) continue;
    Coverage& cov = out[c.kind];
    cov.dtypes.resize(op_inputs(c.kind).size());
    for (size_t i = 0; i < op->inputs.size(); ++i)
      cov.dtypes[spec_index(*op, i)].insert(op->inputs[i].dtype);
    if (is_view(c.kind)) continue;
    for (const Profile& p : profiles) {
      for (const KernelChoice& k : default_build_rules(p.caps.backend).choices(p.caps, *op)) {
        TierUse& use = cov.tiers[{p.caps.backend, k.tier}];
        if (k.ok) {
          use.precisions.insert(k.precision);
          use.profiles.insert(p.name);
        } else if (use.refusal.empty()) {
          use.refusal = p.name + ": " + k.reason;
        }
      }
    }
  }
  return out;
}

template <class Set, class F>
std::string join(const Set& items, F&& name) {
  std::string s;
  for (const auto& x : items) s += (s.empty() ? "" : ", ") + std::string(name(x));
  return s;
}

std::string cell(std::string_view text) {
  std::string s;
  for (char ch : text) s += ch == '|' ? std::string("\\|") : std::string(1, ch);
  return s;
}

std::string class_name(OpClass c) {
  switch (c) {
    case OpClass::elementwise:
      return "element-wise";
    case OpClass::rows:
      return "rows";
    case OpClass::contraction:
      return "contraction";
    case OpClass::data_movement:
      return "data movement";
    case OpClass::view:
      break;
  }
  return "view";
}

std::string signature(OpKind k) {
  std::string s = std::string(op_name(k)) + "(";
  const auto specs = op_inputs(k);
  for (size_t i = 0; i < specs.size(); ++i)
    s += (i ? ", " : "") + std::string(specs[i].name) + (specs[i].optional ? "?" : "");
  return s + (op_is_variadic(k) ? ", ...)" : ")");
}

void markdown_op(std::ostream& o, OpKind k, const Coverage& cov, size_t n_profiles) {
  const OpDoc& d = op_doc(k);
  const auto specs = op_inputs(k);
  o << "## " << op_name(k) << "\n\n`" << signature(k) << "`: " << d.summary << " ("
    << class_name(op_class(k)) << ")\n\n";
  o << "| input | dtypes | shape and meaning |\n| --- | --- | --- |\n";
  for (size_t i = 0; i < specs.size(); ++i) {
    std::string dt = i < cov.dtypes.size() && !cov.dtypes[i].empty()
                         ? join(cov.dtypes[i], [](DType t) { return dtype_name(t); })
                     : is_view(k) ? "any"
                                  : "-";
    o << "| `" << specs[i].name << "`" << (specs[i].optional ? " (optional)" : "")
      << (op_is_variadic(k) ? " (repeated)" : "") << " | " << dt << " | "
      << cell(i < d.inputs.size() ? d.inputs[i] : "") << " |\n";
  }
  o << "\nOutput: " << d.output << ".\n\n";
  if (d.attrs.empty()) {
    o << "Attributes: none.\n\n";
  } else {
    o << "| attribute | type | default | allowed | meaning |\n| --- | --- | --- | --- | --- |\n";
    for (const OpAttrDoc& a : d.attrs)
      o << "| `" << a.name << "` | " << a.type << " | `" << a.default_value << "` | "
        << cell(a.allowed) << " | " << cell(a.meaning) << " |\n";
    o << "\n";
  }
  o << "Semantics: " << d.semantics << "\n\n";
  o << "Example (`duet ops --example " << op_name(k) << " > " << op_name(k) << ".json && duet run "
    << op_name(k) << ".json`):\n\n```json\n"
    << d.example << "```\n\n";
  if (is_view(k)) {
    o << "Backends: none needed. A view runs no kernel: its value is the input's storage under "
         "the view's descriptor, on whichever device holds it.\n\n";
    return;
  }
  o << "| backend | tier | precisions | usable on (of " << n_profiles
    << " profiles) |\n| --- | --- | --- | --- |\n";
  for (const auto& [key, use] : cov.tiers) {
    o << "| " << backend_name(key.first) << " | " << tier_name(key.second) << " | ";
    if (use.profiles.empty()) {
      o << "- | none (" << cell(use.refusal) << ") |\n";
      continue;
    }
    o << join(use.precisions, [](Precision p) { return precision_name(p); }) << " | "
      << join(use.profiles, [](const std::string& s) { return s; }) << " |\n";
  }
  o << "\n";
}

void markdown(std::ostream& o) {
  const std::vector<Profile> profiles = shipped_profiles();
  const auto cov = coverage(profiles);
  o << "<!-- Generated by `duet ops --markdown` from the rows of facts in core/src/ops/, the "
       "cases of tools/check/ and the backends' rules: do not edit. After changing them, run "
       "`build/tools/duet ops --markdown > docs/ops.md` (a test compares the two). -->\n\n";
  o << "# The ops\n\n"
       "Every op a graph can use ([planner.md](planner.md#graph-files) describes the graph file "
       "format; `duet ops` lists them). The float64 reference on the CPU "
       "(`backends/cpu/reference/`) is the definition of each op: every kernel of every backend "
       "is checked against it by `duet check`, with tolerances set by the op's class and the "
       "precision the kernel computed in ([cli.md](cli.md#duet-check)). Kernels accumulate in "
       "f32 and round the output once to its dtype.\n\n"
       "For each op: its inputs in order (the dtypes are those `duet check` runs it with, "
       "`duet check --op NAME`); its output; its attributes (the `attrs` object of a node, each "
       "field by its name, omitted when at its default); its semantics; an example graph that "
       "`duet run` runs as it is (a test runs every one); and the kernel tiers each backend's "
       "rules offer for it, asked about the "
    << profiles.size()
    << " device profiles of `profiles/` ([profiles.md](profiles.md)) and every case of "
       "`duet check --full`: the precisions a tier computes in, and the profiles it is usable "
       "on for at least one case (`duet plan GRAPH --profile NAME --explain` says why for your "
       "shapes), or why it is refused on every one. CUDA profiles are asked about a default "
       "CUDA 13 build (cubins for sm_75, sm_80, sm_90a and sm_120, PTX of sm_80), whatever the "
       "build that prints this page carries: a CUDA tier is listed on a profile where that build "
       "has a kernel image for its architecture (none for sm_61 and sm_70).\n\n"
       "Run-time scalars (rope's `pos`, attention's `kv_len`, write_slice's `pos`) are i32 "
       "tensors of one element, read by the kernels when they run: give them as graph inputs "
       "and change them per run without planning again.\n\n";
  o << "| op | class | summary |\n| --- | --- | --- |\n";
  for (int i = 0; i < kNumOpKinds; ++i) {
    const auto k = static_cast<OpKind>(i);
    o << "| [`" << signature(k) << "`](#" << op_name(k) << ") | " << class_name(op_class(k))
      << " | " << op_doc(k).summary << " |\n";
  }
  o << "\n";
  for (int i = 0; i < kNumOpKinds; ++i) {
    const auto k = static_cast<OpKind>(i);
    auto it = cov.find(k);
    markdown_op(o, k, it == cov.end() ? Coverage{} : it->second, profiles.size());
  }
}

int run_ops(const CLI::App& cmd, const Options& o) {
  if (!o.example.empty()) {
    auto k = parse_op(o.example);
    if (!k) {
      std::string names;
      for (int i = 0; i < kNumOpKinds; ++i)
        names += (i ? ", " : "") + std::string(op_name(static_cast<OpKind>(i)));
      return fail(cmd, "'" + o.example + "': not an op (" + names + ")", 2);
    }
    std::cout << op_doc(*k).example;
    return 0;
  }
  if (o.markdown) {
    markdown(std::cout);
    return 0;
  }
  for (int i = 0; i < kNumOpKinds; ++i) {
    const auto k = static_cast<OpKind>(i);
    std::printf("%-40s %s\n", signature(k).c_str(), std::string(op_doc(k).summary).c_str());
  }
  return 0;
}

}  // namespace
}  // namespace ops_command

Command add_ops(CLI::App& app) {
  using namespace ops_command;
  auto* sub = app.add_subcommand(
      "ops",
      "List the ops a graph can use; --markdown prints the op reference (docs/ops.md), --example "
      "OP a graph file that runs the op");
  auto o = std::make_shared<Options>();
  sub->add_flag("--markdown", o->markdown,
                "Print the op reference: inputs, attributes, semantics, an example, and the "
                "kernel tiers of every backend");
  sub->add_option("--example", o->example, "Print a duet-graph JSON file that runs this op");
  auto run = std::make_shared<std::function<int()>>([sub, o] { return run_ops(*sub, *o); });
  return {sub, run};
}

}  // namespace duet::cli
