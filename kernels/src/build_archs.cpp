// Kernel-image matching: which of a build's cubins or PTX a device of a given compute capability
// can load. The rules mirror the CUDA runtime's: a cubin runs on its own major version at an
// equal or higher minor; sm_XYa cubins (arch-specific features) run on exactly X.Y; PTX is
// JIT-compiled by the driver for any equal or newer architecture.
#include "duet/kernels/build_archs.h"

#include <algorithm>
#include <charconv>

// Defined by kernels/CMakeLists.txt from DUET_CUDA_ARCHS and DUET_CUDA_PTX_ARCH.
#ifndef DUET_CUDA_BUILD_CUBINS
#error "DUET_CUDA_BUILD_CUBINS must be defined by kernels/CMakeLists.txt"
#endif

namespace duet::kernels {

namespace {

std::string sm(int arch, bool specific = false) {
  return "sm_" + std::to_string(arch) + (specific ? "a" : "");
}

std::string join_archs(const std::vector<int>& v, std::string_view prefix, const char* suffix) {
  std::string s;
  for (int a : v) s += (s.empty() ? "" : ", ") + std::string(prefix) + std::to_string(a) + suffix;
  return s;
}

// "86" -> 86, "90a" -> 90 with *specific, "90-real" -> 90; anything else -> 0.
int parse_arch(std::string_view s, bool* specific) {
  *specific = false;
  if (const auto dash = s.find('-'); dash != std::string_view::npos) s = s.substr(0, dash);
  if (!s.empty() && (s.back() == 'a' || s.back() == 'f')) {
    *specific = s.back() == 'a';  // family ('f') cubins follow the ordinary minor-version rule
    s.remove_suffix(1);
  }
  int v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v < 10) return 0;
  return v;
}

}  // namespace

BuildArchs parse_build_archs(std::string_view cubins, std::string_view ptx) {
  BuildArchs b;
  while (!cubins.empty()) {
    const auto semi = cubins.find_first_of(";, ");
    std::string_view item = cubins.substr(0, semi);
    cubins = semi == std::string_view::npos ? std::string_view{} : cubins.substr(semi + 1);
    bool specific = false;
    if (int a = parse_arch(item, &specific)) (specific ? b.arch_specific : b.cubins).push_back(a);
  }
  for (auto* v : {&b.cubins, &b.arch_specific}) {
    std::sort(v->begin(), v->end());
    v->erase(std::unique(v->begin(), v->end()), v->end());
  }
  b.ptx = parse_arch(ptx, &b.ptx_arch_specific);
  return b;
}

const BuildArchs& this_build() {
  static const BuildArchs archs = parse_build_archs(DUET_CUDA_BUILD_CUBINS, DUET_CUDA_BUILD_PTX);
  return archs;
}

const BuildArchs& default_build() {
  static const BuildArchs archs =
      parse_build_archs(DUET_CUDA_DEFAULT_CUBINS, DUET_CUDA_DEFAULT_PTX);
  return archs;
}

std::string BuildArchs::str() const {
  const BuildArchs& a = *this;
  std::string s = "cubins ";
  std::string c = join_archs(a.cubins, "sm_", "");
  const std::string spec = join_archs(a.arch_specific, "sm_", "a");
  if (!spec.empty()) c += (c.empty() ? "" : ", ") + spec;
  s += c.empty() ? "none" : c;
  s += "; PTX ";
  s += a.ptx ? "compute_" + std::to_string(a.ptx) + (a.ptx_arch_specific ? "a" : "") : "none";
  return s;
}

std::string_view image_match_name(ImageMatch m) {
  switch (m) {
    case ImageMatch::exact_cubin:
      return "exact cubin";
    case ImageMatch::compatible_cubin:
      return "compatible cubin";
    case ImageMatch::ptx_jit:
      return "PTX JIT";
    case ImageMatch::none:
      return "none";
  }
  return "?";
}

ImageCheck check_image(const BuildArchs& archs, int cc_major, int cc_minor, int min_arch) {
  const int dev = cc_major * 10 + cc_minor;
  ImageCheck r;
  if (cc_major <= 0) {
    r.text = "none: the device record has no compute capability";
    return r;
  }
  if (archs.empty()) {
    r.text = "none: this build has no CUDA kernels (no CUDA toolkit at configure time)";
    return r;
  }
  auto usable = [min_arch](int a) { return a >= min_arch; };
  const bool exact =
      usable(dev) && (std::count(archs.cubins.begin(), archs.cubins.end(), dev) > 0 ||
                      std::count(archs.arch_specific.begin(), archs.arch_specific.end(), dev) > 0);
  if (exact) {
    r.match = ImageMatch::exact_cubin;
    r.arch = dev;
    r.text = "exact cubin " + sm(dev);
    return r;
  }
  int best = 0;  // newest cubin of the same major version at a lower minor
  for (int a : archs.cubins)
    if (usable(a) && a / 10 == cc_major && a < dev) best = std::max(best, a);
  if (best) {
    r.match = ImageMatch::compatible_cubin;
    r.arch = best;
    r.text = "compatible cubin " + sm(best) + " runs on " + sm(dev);
    return r;
  }
  const bool ptx_fits = archs.ptx && usable(archs.ptx) &&
                        (archs.ptx_arch_specific ? archs.ptx == dev : archs.ptx <= dev);
  if (ptx_fits) {
    r.match = ImageMatch::ptx_jit;
    r.arch = archs.ptx;
    r.text = "PTX compute_" + std::to_string(archs.ptx) + " JIT-compiled for " + sm(dev) +
             " by the driver (slow first launch; a cubin for " + sm(dev) + " avoids it)";
    return r;
  }
  r.text = "none: no kernel image for " + sm(dev) + " in this build (" + archs.str() + ")";
  if (min_arch > 0)
    r.text += ", whose kernels of this tier are built for " + sm(min_arch) + " and newer";
  r.text += "; rebuild with " + std::to_string(dev) + " in DUET_CUDA_ARCHS";
  if (dev < 75) r.text += " (CUDA 13 toolkits build sm_75 and newer only: use a CUDA 12 toolkit)";
  return r;
}

ImageCheck check_specific_image(const BuildArchs& archs, int cc_major, int cc_minor) {
  const int dev = cc_major * 10 + cc_minor;
  ImageCheck r;
  if (cc_major <= 0) {
    r.text = "none: the device record has no compute capability";
    return r;
  }
  if (std::count(archs.arch_specific.begin(), archs.arch_specific.end(), dev) > 0) {
    r.match = ImageMatch::exact_cubin;
    r.arch = dev;
    r.text = "exact cubin " + sm(dev, true);
    return r;
  }
  if (archs.ptx == dev && archs.ptx_arch_specific) {
    r.match = ImageMatch::ptx_jit;
    r.arch = dev;
    r.text = "PTX compute_" + std::to_string(dev) + "a JIT-compiled for " + sm(dev) +
             " by the driver (slow first launch; a cubin for " + sm(dev, true) + " avoids it)";
    return r;
  }
  r.text = "none: no " + sm(dev, true) + " image in this build (" + archs.str() +
           "), and only it has the architecture-specific instructions; rebuild with " +
           std::to_string(dev) + "a in DUET_CUDA_ARCHS";
  return r;
}

}  // namespace duet::kernels
