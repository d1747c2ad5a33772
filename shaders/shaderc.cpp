// Build tool: compiles the variants of one compute shader to SPIR-V in one process, checks each
// module with SPIRV-Tools' validator and writes it as a C++ header of words. glslang is used as a
// library (Debian's glslang-dev), so its built-in symbol tables are made once per process instead
// of once per variant, which is most of what a glslangValidator run costs.
//
//   duet_shaderc LIST
//
// LIST is a text file written by shaders/CMakeLists.txt:
//   out DIR                            where each variant's NAME.h is written
//   include DIR                        an include directory (repeatable; the shader's own first)
//   source FILE                        the .comp file every variant compiles
//   variant NAME COOPMAT DEFINE...     one module: COOPMAT 0 or 1, defines NAME or NAME=VALUE
//
// The modules are what `glslangValidator --target-env vulkan1.1 -V -DDEFINE...` makes: GLSL for
// Vulkan 1.1 (SPIR-V 1.3), the default resource limits, no optimisation, entry point main.
// Cooperative-matrix variants are finished by spirv_coopmat.h (the module the device gets) and
// validated through their SPV_NV_cooperative_matrix twin.
#include <glslang/Public/ResourceLimits.h>
#include <glslang/Public/ShaderLang.h>
#include <glslang/SPIRV/GlslangToSpv.h>
#include <spirv-tools/libspirv.hpp>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "spirv_coopmat.h"

namespace {

namespace fs = std::filesystem;

struct Variant {
  std::string name;
  bool coopmat = false;
  std::vector<std::string> defines;
};

struct List {
  fs::path out;
  std::vector<fs::path> includes;
  fs::path source;
  std::vector<Variant> variants;
};

bool fail(const std::string& m) {
  std::fprintf(stderr, "duet_shaderc: %s\n", m.c_str());
  return false;
}

bool read_text(const fs::path& p, std::string& text) {
  std::ifstream f(p, std::ios::binary);
  if (!f) return false;
  std::ostringstream s;
  s << f.rdbuf();
  text = s.str();
  return true;
}

bool read_list(const char* path, List& l) {
  std::ifstream f(path);
  if (!f) return fail(std::string("cannot read ") + path);
  std::string line;
  while (std::getline(f, line)) {
    std::istringstream s(line);
    std::string key;
    if (!(s >> key)) continue;
    if (key == "out") {
      std::string d;
      s >> d;
      l.out = d;
    } else if (key == "include") {
      std::string d;
      s >> d;
      l.includes.emplace_back(d);
    } else if (key == "source") {
      std::string d;
      s >> d;
      l.source = d;
    } else if (key == "variant") {
      Variant v;
      int coopmat = 0;
      s >> v.name >> coopmat;
      v.coopmat = coopmat != 0;
      for (std::string d; s >> d;) v.defines.push_back(d);
      if (v.name.empty()) return fail(std::string(path) + ": a variant without a name");
      l.variants.push_back(std::move(v));
    } else {
      return fail(std::string(path) + ": unknown line '" + line + "'");
    }
  }
  if (l.out.empty() || l.source.empty()) return fail(std::string(path) + ": no out or source");
  return true;
}

// #include "x": the including file's folder first, then the include directories, as
// glslangValidator's -I does. Every file read is kept until the shader is compiled.
class Includer : public glslang::TShader::Includer {
 public:
  explicit Includer(const std::vector<fs::path>& dirs) : dirs_(dirs) {}

  IncludeResult* includeLocal(const char* name, const char* includer, size_t) override {
    std::vector<fs::path> tries;
    if (includer && *includer) tries.push_back(fs::path(includer).parent_path() / name);
    for (const fs::path& d : dirs_) tries.push_back(d / name);
    return open(tries);
  }
  IncludeResult* includeSystem(const char* name, const char*, size_t) override {
    std::vector<fs::path> tries;
    for (const fs::path& d : dirs_) tries.push_back(d / name);
    return open(tries);
  }
  void releaseInclude(IncludeResult* r) override { delete r; }

 private:
  IncludeResult* open(const std::vector<fs::path>& tries) {
    for (const fs::path& p : tries) {
      auto text = std::make_unique<std::string>();
      if (!read_text(p, *text)) continue;
      texts_.push_back(std::move(text));
      const std::string& t = *texts_.back();
      return new IncludeResult(p.string(), t.data(), t.size(), nullptr);
    }
    return nullptr;
  }

  std::vector<fs::path> dirs_;
  std::vector<std::unique_ptr<std::string>> texts_;
};

bool compile(const List& l, const std::string& text, const Variant& v,
             std::vector<uint32_t>& spirv) {
  std::string preamble;
  for (const std::string& d : v.defines) {
    const size_t eq = d.find('=');
    preamble +=
        "#define " + (eq == std::string::npos ? d : d.substr(0, eq) + " " + d.substr(eq + 1));
    preamble += "\n";
  }
  glslang::TShader shader(EShLangCompute);
  const char* texts[] = {text.c_str()};
  const std::string source_name = l.source.string();
  const char* names[] = {source_name.c_str()};
  shader.setStringsWithLengthsAndNames(texts, nullptr, names, 1);
  shader.setPreamble(preamble.c_str());
  shader.setEntryPoint("main");
  shader.setEnvInput(glslang::EShSourceGlsl, EShLangCompute, glslang::EShClientVulkan, 100);
  shader.setEnvClient(glslang::EShClientVulkan, glslang::EShTargetVulkan_1_1);
  shader.setEnvTarget(glslang::EShTargetSpv, glslang::EShTargetSpv_1_3);
  const auto messages = static_cast<EShMessages>(EShMsgSpvRules | EShMsgVulkanRules);
  Includer includer(l.includes);
  if (!shader.parse(GetDefaultResources(), 100, false, messages, includer))
    return fail("shader " + v.name + ": " + shader.getInfoLog());
  glslang::TProgram program;
  program.addShader(&shader);
  if (!program.link(messages)) return fail("shader " + v.name + ": " + program.getInfoLog());
  spv::SpvBuildLogger logger;
  glslang::SpvOptions options;
  glslang::GlslangToSpv(*program.getIntermediate(EShLangCompute), spirv, &logger, &options);
  const std::string messages_text = logger.getAllMessages();
  if (!messages_text.empty())
    std::fprintf(stderr, "shader %s: %s", v.name.c_str(), messages_text.c_str());
  return !spirv.empty() || fail("shader " + v.name + ": no module");
}

bool validate(const std::string& name, const std::vector<uint32_t>& words) {
  spvtools::SpirvTools tools(SPV_ENV_VULKAN_1_1);
  std::string errors;
  tools.SetMessageConsumer(
      [&](spv_message_level_t, const char*, const spv_position_t& at, const char* message) {
        errors += "  word " + std::to_string(at.index) + ": " + message + "\n";
      });
  return tools.Validate(words) || fail("shader " + name + ": spirv-val:\n" + errors);
}

std::string header_text(const std::string& name, const std::vector<uint32_t>& words) {
  std::string s = "// Generated by shaders/shaderc.cpp.\n#pragma once\n#include <cstdint>\n";
  s += "const uint32_t spv_" + name + "[] = {\n";
  char b[16];
  for (size_t k = 0; k < words.size(); ++k) {
    std::snprintf(b, sizeof b, "0x%08x,", words[k]);
    s += b;
    if ((k + 1) % 8 == 0) s += "\n";
  }
  return s + "\n};\n";
}

// Written under a name of its own, then renamed: a build stopped midway leaves no half header.
bool write_header(const fs::path& p, const std::string& text) {
  const fs::path tmp = p.string() + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary);
    f << text;
    if (!f.good()) return fail("cannot write " + tmp.string());
  }
  std::error_code ec;
  fs::rename(tmp, p, ec);
  return !ec || fail("cannot write " + p.string() + ": " + ec.message());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: duet_shaderc LIST\n");
    return 2;
  }
  List l;
  if (!read_list(argv[1], l)) return 1;
  std::string text;
  if (!read_text(l.source, text)) return fail("cannot read " + l.source.string()), 1;
  glslang::InitializeProcess();
  int rc = 0;
  for (const Variant& v : l.variants) {
    std::vector<uint32_t> words;
    if (!compile(l, text, v, words)) {
      rc = 1;
      continue;
    }
    if (v.coopmat) {
      std::vector<uint32_t> twin;
      if (!duet::shaders::finish_coopmat(words, twin)) {
        fail("shader " + v.name + ": its cooperative matrices could not be finished");
        rc = 1;
        continue;
      }
      if (!validate(v.name + " (its SPV_NV_cooperative_matrix twin)", twin)) {
        rc = 1;
        continue;
      }
    } else if (!validate(v.name, words)) {
      rc = 1;
      continue;
    }
    if (!write_header(l.out / (v.name + ".h"), header_text(v.name, words))) rc = 1;
  }
  glslang::FinalizeProcess();
  return rc;
}
