// duet convert: tensors between .safetensors files and NumPy .npy files (one array per file, or a
// folder of them), bytes copied, never rounded. duet inputs: an inputs file for a graph from its
// input declarations, random or constant, so a user can run their own data without Python.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <set>

#include <nlohmann/json.hpp>

#include "check/inputs.h"
#include "duet/commands.h"
#include "duet/common.h"
#include "duet/internal/files.h"
#include "duet/npy.h"
#include "duet/safetensors.h"

namespace duet::cli {

namespace fs = std::filesystem;

// Named for the command, so that the sources compile together in a unity build.
namespace convert_command {
namespace {

struct Named {
  std::string name;
  RawArray array;
  std::string from;  // the file it came from
};

bool ends_with(std::string_view s, std::string_view tail) {
  return s.size() >= tail.size() && s.substr(s.size() - tail.size()) == tail;
}

// A tensor name as a file name ("a/b" is "a%2Fb.npy") and back.
std::string file_name_of(const std::string& name) {
  return check::npy_file_name(name);
}
std::string name_of_file(const fs::path& p) {
  return check::npy_tensor_name(p.filename().string());
}

// The .npy files of a folder, sorted.
std::vector<fs::path> npy_files_in(const std::string& folder) {
  std::vector<fs::path> found;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(folder, ec))
    if (e.path().extension() == ".npy") found.push_back(e.path());
  std::sort(found.begin(), found.end());
  return found;
}

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

// Every tensor of a .safetensors file as raw bytes (any dtype of the format).
Result<std::vector<Named>> read_safetensors_raw(const std::string& path) {
  DUET_ASSIGN_OR_RETURN(SafetensorsFile f, read_safetensors(path));
  std::vector<Named> out;
  for (const SafetensorsEntry& e : f.tensors) {
    Named n{e.name, {e.dtype, e.shape, {}}, path};
    n.array.data.assign(f.data.begin() + static_cast<ptrdiff_t>(e.begin),
                        f.data.begin() + static_cast<ptrdiff_t>(e.end));
    out.push_back(std::move(n));
  }
  return out;
}

// A .safetensors file of raw arrays, in the order given (8-byte aligned header, as the format
// asks).
std::string encode_safetensors_raw(const std::vector<Named>& tensors,
                                   const std::map<std::string, std::string>& metadata) {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t pos = 0;
  for (const Named& t : tensors) {
    header[t.name] = {{"dtype", t.array.dtype},
                      {"shape", t.array.shape},
                      {"data_offsets", {pos, pos + t.array.data.size()}}};
    pos += t.array.data.size();
  }
  std::string text = header.dump();
  while (text.size() % 8 != 0) text += ' ';
  std::string out(8, '\0');
  const uint64_t n = text.size();
  std::memcpy(out.data(), &n, 8);
  out += text;
  for (const Named& t : tensors)
    out.append(reinterpret_cast<const char*>(t.array.data.data()), t.array.data.size());
  return out;
}

// bf16 has no NumPy type: widened to f32, which holds every bf16 value exactly.
RawArray widen_bf16(const RawArray& a) {
  RawArray w{"F32", a.shape, std::vector<std::byte>(a.data.size() * 2)};
  for (size_t i = 0; i < a.data.size() / 2; ++i) {
    uint16_t h;
    std::memcpy(&h, a.data.data() + 2 * i, 2);
    const uint32_t f = static_cast<uint32_t>(h) << 16;
    std::memcpy(w.data.data() + 4 * i, &f, 4);
  }
  return w;
}

enum class Form { safetensors, npy, folder };

Form form_of(const std::string& path) {
  if (ends_with(path, ".safetensors")) return Form::safetensors;
  if (ends_with(path, ".npy")) return Form::npy;
  return Form::folder;
}

// Writes `tensors` to `out` in its form; prints one line per tensor. Targets are checked before
// anything is written.
int write_tensors(const CLI::App& cmd, std::vector<Named> tensors, const std::string& out,
                  const std::map<std::string, std::string>& metadata) {
  const Form form = form_of(out);
  if (form == Form::npy && tensors.size() != 1) {
    std::string names;
    for (const Named& t : tensors) names += (names.empty() ? "" : ", ") + t.name;
    return fail(cmd,
                "'" + out + "' is one .npy file, and there are " + std::to_string(tensors.size()) +
                    " tensors (" + names + "): choose one with --tensor, or give a folder",
                2);
  }
  std::vector<std::string> notes;
  if (form != Form::safetensors)
    for (Named& t : tensors) {
      if (t.array.dtype == "BF16") {
        t.array = widen_bf16(t.array);
        notes.push_back("tensor '" + t.name +
                        "' is bf16, which NumPy has no type for: written as float32 (exact)");
      } else if (npy_descr(t.array.dtype).empty()) {
        return fail(cmd,
                    "tensor '" + t.name + "' of '" + t.from + "' is " + t.array.dtype +
                        ", which NumPy has no type for (it can stay in .safetensors)",
                    2);
      }
    }
  std::vector<std::pair<std::string, std::string>> files;  // path, bytes
  if (form == Form::safetensors) {
    files.push_back({out, encode_safetensors_raw(tensors, metadata)});
  } else if (form == Form::npy) {
    auto bytes = encode_npy(tensors[0].array);
    if (!bytes.ok()) return fail(cmd, bytes.status().message(), 2);
    files.push_back({out, std::move(*bytes)});
  } else {
    std::error_code ec;
    if (fs::exists(out, ec) && !fs::is_directory(out, ec))
      return fail(cmd, "'" + out + "' is neither a folder nor a .safetensors or .npy file name", 2);
    fs::path folder = fs::absolute(fs::path(out)).lexically_normal();
    if (!folder.has_filename()) folder = folder.parent_path();  // "out/"
    const fs::path parent = folder.parent_path();
    if (!fs::exists(out, ec) && !fs::is_directory(parent, ec))
      return fail(
          cmd, "cannot create the folder '" + out + "': '" + parent.string() + "' does not exist",
          2);
    for (const Named& t : tensors) {
      auto bytes = encode_npy(t.array);
      if (!bytes.ok()) return fail(cmd, bytes.status().message(), 2);
      files.push_back({(fs::path(out) / file_name_of(t.name)).string(), std::move(*bytes)});
    }
  }
  if (form == Form::folder) {
    std::error_code ec;
    fs::create_directory(out, ec);
    if (ec) return fail(cmd, "cannot create the folder '" + out + "': " + ec.message());
  }
  for (const auto& [path, _] : files)
    if (Status s = check_output_target(path, "output"); !s.ok()) return fail(cmd, s.message(), 2);
  for (size_t i = 0; i < files.size(); ++i) {
    if (Status s = write_file_atomically(files[i].first, files[i].second); !s.ok())
      return fail(cmd, s.message());
    if (form == Form::safetensors && i == 0)
      for (const Named& t : tensors)
        std::printf("%s %s%s -> %s\n", t.name.c_str(), t.array.dtype.c_str(),
                    shape_str(t.array.shape).c_str(), out.c_str());
    else if (form != Form::safetensors)
      std::printf("%s %s%s -> %s\n", tensors[i].name.c_str(), tensors[i].array.dtype.c_str(),
                  shape_str(tensors[i].array.shape).c_str(), files[i].first.c_str());
  }
  for (const std::string& n : notes) std::printf("note: %s\n", n.c_str());
  return 0;
}

struct ConvertOptions {
  std::vector<std::string> paths;  // inputs..., output
  std::vector<std::string> tensors;
};

int convert(const CLI::App& cmd, const ConvertOptions& o) {
  if (o.paths.size() < 2) return fail(cmd, "give at least one input and the output", 2);
  const std::string out = o.paths.back();
  std::vector<Named> all;
  for (size_t i = 0; i + 1 < o.paths.size(); ++i) {
    std::string arg = o.paths[i], name;
    // NAME=FILE.npy names the tensor of a .npy file.
    if (const size_t eq = arg.find('=');
        eq != std::string::npos && ends_with(arg, ".npy") && !fs::exists(arg)) {
      name = arg.substr(0, eq);
      arg = arg.substr(eq + 1);
    }
    std::error_code ec;
    if (ends_with(arg, ".safetensors")) {
      auto got = read_safetensors_raw(arg);
      if (!got.ok()) return fail(cmd, got.status().message(), exit_status_for(got.status()));
      for (Named& n : *got) all.push_back(std::move(n));
    } else if (fs::is_directory(arg, ec)) {
      const std::vector<fs::path> found = npy_files_in(arg);
      if (found.empty()) return fail(cmd, "folder '" + arg + "' holds no .npy files", 2);
      for (const fs::path& p : found) {
        auto a = read_npy(p.string());
        if (!a.ok()) return fail(cmd, a.status().message(), 2);
        all.push_back({name_of_file(p), std::move(*a), p.string()});
      }
    } else if (ends_with(arg, ".npy")) {
      auto a = read_npy(arg);
      if (!a.ok()) return fail(cmd, a.status().message(), 2);
      all.push_back({name.empty() ? name_of_file(arg) : name, std::move(*a), arg});
    } else {
      return fail(cmd,
                  "'" + arg +
                      "': expected a .safetensors file, a .npy file, NAME=FILE.npy or a folder "
                      "of .npy files",
                  2);
    }
  }
  std::set<std::string> seen;
  for (const Named& t : all)
    if (!seen.insert(t.name).second)
      return fail(cmd, "tensor '" + t.name + "' is given twice (last from '" + t.from + "')", 2);
  if (!o.tensors.empty()) {
    std::vector<Named> chosen;
    for (const std::string& want : split_list(o.tensors)) {
      auto it =
          std::find_if(all.begin(), all.end(), [&](const Named& t) { return t.name == want; });
      if (it == all.end()) {
        std::string names;
        for (const Named& t : all) names += (names.empty() ? "" : ", ") + t.name;
        return fail(cmd, "--tensor: no tensor '" + want + "' (there are: " + names + ")", 2);
      }
      chosen.push_back(*it);
    }
    all = std::move(chosen);
  }
  return write_tensors(cmd, std::move(all), out, {{"producer", "duet convert"}});
}

struct InputsOptions {
  ModelArgs model;
  std::string out;
  uint64_t seed = 0;
  const CLI::Option* fill_given = nullptr;
  double fill_value = 0;
};

int make_inputs(const CLI::App& cmd, const InputsOptions& o) {
  if (form_of(o.out) == Form::npy)
    return fail(cmd, "'" + o.out + "': give a .safetensors file or a folder (for .npy files)", 2);
  std::vector<std::string> notes;
  auto graph = load_graph_file(o.model, false, nullptr, &notes);
  if (!graph.ok()) return fail(cmd, graph.status().message(), exit_status_for(graph.status()));
  for (const std::string& n : notes) std::printf("import: %s\n", n.c_str());
  if (graph->inputs().empty()) return fail(cmd, "graph '" + graph->name() + "' has no inputs", 2);
  auto inputs = check::random_graph_inputs(*graph, o.seed);
  if (!inputs.ok()) return fail(cmd, inputs.status().message(), 2);
  std::vector<Named> tensors;
  for (int id : graph->inputs()) {
    const GraphValue& v = graph->value(id);
    HostTensor& t = inputs->at(v.name);
    if (o.fill_given->count()) {
      if (!is_float(t.dtype()) && o.fill_value != std::floor(o.fill_value))
        return fail(cmd,
                    "--fill " + std::to_string(o.fill_value) + ": input '" + v.name + "' is " +
                        std::string(dtype_name(t.dtype())) + ", which holds whole numbers only",
                    2);
      std::vector<double> x(static_cast<size_t>(t.numel()), o.fill_value);
      t.from_doubles(x);
    }
    RawArray a{std::string(safetensors_dtype_name(t.dtype())),
               {t.desc().dims().begin(), t.desc().dims().end()},
               {}};
    const auto* p = t.data<std::byte>();
    a.data.assign(p, p + t.desc().nbytes());
    tensors.push_back({v.name, std::move(a), o.model.path});
  }
  return write_tensors(cmd, std::move(tensors), o.out,
                       {{"producer", "duet inputs"}, {"graph", graph->name()}});
}

}  // namespace
}  // namespace convert_command

Result<std::map<std::string, HostTensor>> read_inputs(const std::string& path,
                                                      check::InputsSource& source) {
  using namespace convert_command;
  source = check::InputsSource{path, false, {}};
  std::error_code ec;
  source.folder = fs::is_directory(path, ec);
  if (!source.folder && !ends_with(path, ".npy")) return check::read_inputs_file(path);
  // The arrays gathered into one safetensors index, so that they are checked and converted as the
  // tensors of an inputs file are.
  SafetensorsFile f;
  auto data = std::make_shared<std::vector<std::byte>>();
  for (const fs::path& p : source.folder ? npy_files_in(path) : std::vector<fs::path>{path}) {
    const std::string name = name_of_file(p), file = p.filename().string();
    if (auto [at, added] = source.files.emplace(name, file); !added)
      return Status(Code::invalid_argument, source.what() + ": files '" + at->second + "' and '" +
                                                file + "' both hold tensor '" + name + "'");
    DUET_ASSIGN_OR_RETURN(RawArray a, read_npy(p.string()));
    f.tensors.push_back({name, a.dtype, a.shape, data->size(), data->size() + a.data.size()});
    data->insert(data->end(), a.data.begin(), a.data.end());
  }
  f.data = *data;
  f.storage = data;
  return check::inputs_from(f, source);
}

Command add_convert(CLI::App& app) {
  using namespace convert_command;
  auto* sub = app.add_subcommand(
      "convert",
      "Convert tensors between .safetensors and NumPy .npy files: INPUT... OUTPUT, where an "
      "input is a .safetensors file, a .npy file (named by its file name, or NAME=FILE.npy) or a "
      "folder of .npy files, and the output a .safetensors file, a .npy file (one tensor) or a "
      "folder (one .npy file per tensor)");
  auto o = std::make_shared<ConvertOptions>();
  sub->add_option("paths", o->paths, "Inputs, then the output")->required();
  sub->add_option("--tensor", o->tensors, "Only these tensors, by name (repeatable, or a,b)")
      ->allow_extra_args(false);
  auto run = std::make_shared<std::function<int()>>([sub, o] { return convert(*sub, *o); });
  return {sub, run};
}

Command add_inputs(CLI::App& app) {
  using namespace convert_command;
  auto* sub = app.add_subcommand(
      "inputs",
      "Write an inputs file for a model from its input declarations: random values (the ones "
      "`duet run` draws, or another --seed) or one constant; OUTPUT is a .safetensors file or a "
      "folder of .npy files");
  auto o = std::make_shared<InputsOptions>();
  sub->add_option("graph", o->model.path, "Model file: duet-graph JSON or ONNX")->required();
  sub->add_option("output", o->out, "A .safetensors file, or a folder for .npy files")->required();
  add_dim_option(*sub, o->model);
  sub->add_option("--seed", o->seed,
                  "Random values from this seed (0: the values `duet run` draws without --inputs)")
      ->capture_default_str();
  o->fill_given = sub->add_option("--fill", o->fill_value,
                                  "Every element this value instead (rounded to the dtype)");
  auto run = std::make_shared<std::function<int()>>([sub, o] { return make_inputs(*sub, *o); });
  return {sub, run};
}

}  // namespace duet::cli
