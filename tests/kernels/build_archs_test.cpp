// Which of a build's kernel images a device can load.
#include <gtest/gtest.h>

#include "duet/kernels/build_archs.h"

namespace duet::kernels {
namespace {

const BuildArchs kDefault = parse_build_archs("75;80", "80");  // the default preset

TEST(KernelImage, ExactCubin) {
  ImageCheck i = check_image(kDefault, 7, 5);
  EXPECT_EQ(i.match, ImageMatch::exact_cubin);
  EXPECT_EQ(i.arch, 75);
  EXPECT_EQ(i.text, "exact cubin sm_75");
}

TEST(KernelImage, CubinRunsOnTheSameMajorAtAHigherMinor) {
  for (int minor : {6, 7, 9}) {
    ImageCheck i = check_image(kDefault, 8, minor);
    EXPECT_EQ(i.match, ImageMatch::compatible_cubin) << minor;
    EXPECT_EQ(i.arch, 80);
  }
  ImageCheck newest = check_image(parse_build_archs("80;86", ""), 8, 9);
  EXPECT_EQ(newest.arch, 86) << "the newest compatible cubin wins";
}

TEST(KernelImage, CubinNeverRunsOnALowerMinorOrAnotherMajor) {
  const BuildArchs only86 = parse_build_archs("86", "");
  EXPECT_EQ(check_image(only86, 8, 0).match, ImageMatch::none);
  EXPECT_EQ(check_image(only86, 9, 0).match, ImageMatch::none);
  EXPECT_EQ(check_image(parse_build_archs("75", ""), 8, 6).match, ImageMatch::none);
}

TEST(KernelImage, PtxIsJitCompiledForNewerArchitectures) {
  ImageCheck h100 = check_image(kDefault, 9, 0);
  EXPECT_EQ(h100.match, ImageMatch::ptx_jit);
  EXPECT_EQ(h100.arch, 80);
  EXPECT_EQ(check_image(kDefault, 12, 0).match, ImageMatch::ptx_jit);
  EXPECT_EQ(check_image(parse_build_archs("75", "75"), 8, 6).match, ImageMatch::ptx_jit);
}

TEST(KernelImage, OlderDeviceThanEveryImageHasNoneAndSaysWhatToRebuild) {
  ImageCheck v100 = check_image(kDefault, 7, 0);
  EXPECT_FALSE(v100.ok());
  EXPECT_NE(v100.text.find("sm_70"), std::string::npos) << v100.text;
  EXPECT_NE(v100.text.find("cubins sm_75, sm_80; PTX compute_80"), std::string::npos) << v100.text;
  EXPECT_NE(v100.text.find("DUET_CUDA_ARCHS"), std::string::npos) << v100.text;
  EXPECT_NE(v100.text.find("CUDA 12"), std::string::npos) << "CUDA 13 cannot build sm_70";
}

TEST(KernelImage, ArchSpecificImagesRunOnExactlyTheirArchitecture) {
  const BuildArchs b = parse_build_archs("80;90a", "");
  EXPECT_EQ(check_image(b, 9, 0).match, ImageMatch::exact_cubin);
  EXPECT_EQ(check_image(b, 10, 0).match, ImageMatch::none);
  const BuildArchs ptx_a = parse_build_archs("80", "90a");
  EXPECT_EQ(check_image(ptx_a, 9, 0).match, ImageMatch::ptx_jit);
  EXPECT_EQ(check_image(ptx_a, 12, 0).match, ImageMatch::none);
}

TEST(KernelImage, ArchSpecificFeaturesNeedTheArchSpecificImage) {
  // An sm_90 cubin runs on an H100 but has no wgmma: only sm_90a code does.
  const ImageCheck plain = check_specific_image(parse_build_archs("80;90", "90"), 9, 0);
  EXPECT_FALSE(plain.ok());
  EXPECT_NE(plain.text.find("no sm_90a image"), std::string::npos) << plain.text;
  EXPECT_NE(plain.text.find("90a in DUET_CUDA_ARCHS"), std::string::npos) << plain.text;
  const ImageCheck a = check_specific_image(parse_build_archs("80;90a", ""), 9, 0);
  EXPECT_EQ(a.match, ImageMatch::exact_cubin);
  EXPECT_EQ(a.text, "exact cubin sm_90a");
  EXPECT_EQ(check_specific_image(parse_build_archs("80", "90a"), 9, 0).match, ImageMatch::ptx_jit);
  EXPECT_FALSE(check_specific_image(parse_build_archs("90a", ""), 10, 0).ok());
}

TEST(KernelImage, MixedBoxNeedsAnImageForEachDevice) {
  // RTX 2080 (sm_75) + RTX 3090 (sm_86): a build for sm_75 alone serves only the 2080.
  const BuildArchs turing_only = parse_build_archs("75", "");
  EXPECT_TRUE(check_image(turing_only, 7, 5).ok());
  EXPECT_FALSE(check_image(turing_only, 8, 6).ok());
  const BuildArchs both = parse_build_archs("75;86", "");
  EXPECT_EQ(check_image(both, 7, 5).match, ImageMatch::exact_cubin);
  EXPECT_EQ(check_image(both, 8, 6).match, ImageMatch::exact_cubin);
}

TEST(KernelImage, NoComputeCapabilityMeansNone) {
  EXPECT_FALSE(check_image(kDefault, 0, 0).ok());
}

TEST(KernelImage, ATierUsesOnlyTheImagesItIsBuiltFor) {
  // Flash kernels are compiled for sm_80 and newer only: an sm_86 device runs this build's
  // generic kernels through the compute_75 PTX, but there is no flash image it can load.
  const BuildArchs b = parse_build_archs("75", "75");
  EXPECT_EQ(check_image(b, 8, 6).match, ImageMatch::ptx_jit);
  const ImageCheck flash = check_image(b, 8, 6, 80);
  EXPECT_FALSE(flash.ok());
  EXPECT_NE(flash.text.find("built for sm_80 and newer"), std::string::npos) << flash.text;
  EXPECT_EQ(check_image(parse_build_archs("75;80", ""), 8, 6, 80).match,
            ImageMatch::compatible_cubin);
}

TEST(KernelImage, AnEmptyBuildSaysItHasNoKernels) {
  EXPECT_NE(check_image(BuildArchs{}, 8, 0).text.find("this build has no CUDA kernels"),
            std::string::npos);
}

TEST(BuildArchs, ParsesCMakeLists) {
  BuildArchs b = parse_build_archs("90a;75;80-real,86 86", "80");
  EXPECT_EQ(b.cubins, (std::vector<int>{75, 80, 86}));
  EXPECT_EQ(b.arch_specific, (std::vector<int>{90}));
  EXPECT_EQ(b.ptx, 80);
  EXPECT_FALSE(b.ptx_arch_specific);
  EXPECT_EQ(b.str(), "cubins sm_75, sm_80, sm_86, sm_90a; PTX compute_80");
  EXPECT_EQ(parse_build_archs("", "").str(), "cubins none; PTX none");
  EXPECT_EQ(parse_build_archs("100f;junk", "").cubins, (std::vector<int>{100}));
}

TEST(BuildArchs, ThisBuildCarriesKernels) {
  const BuildArchs b = this_build();
  EXPECT_FALSE(b.cubins.empty()) << b.str();
  EXPECT_NE(b.ptx, 0) << b.str();
}

}  // namespace
}  // namespace duet::kernels
