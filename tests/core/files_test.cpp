// The one way duet opens, maps and writes files (duet/internal/files.h): a fifo never hangs an
// open, a stream is read once within its cap, a file a model names stays inside the model's
// folder, a mapping is read-only and opens a file larger than memory, and an output is written
// through a temporary file no planted link can redirect (docs/security.md).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "duet/internal/files.h"

namespace duet {
namespace {

namespace fs = std::filesystem;

#define EXPECT_HAS(text, part) EXPECT_NE((text).find(part), std::string::npos) << (text)

// A folder of its own per test; a test that hangs ends on SIGALRM instead of stalling the suite.
class Files : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("duet-files-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    ::alarm(60);
  }
  void TearDown() override {
    ::alarm(0);
    fs::remove_all(dir_);
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::string write(const std::string& name, const std::string& text) const {
    fs::create_directories(fs::path(path(name)).parent_path());
    std::ofstream(path(name), std::ios::binary) << text;
    return path(name);
  }
  static std::string slurp(const std::string& p) {
    std::ifstream f(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), {});
  }
  fs::path dir_;
};

TEST_F(Files, AFifoIsRefusedAtOnceUnlessAStreamIsAsked) {
  const std::string fifo = path("model.fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  FileRules rules;
  rules.kind = "profile";
  auto f = open_file(fifo, rules);  // no writer: a blocking open would wait forever
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), Code::invalid_argument);
  EXPECT_HAS(f.status().message(), "profile '" + fifo + "': expected a regular file, got a fifo");
  // Asked for, a stream with no writer is read to its end: nothing.
  auto text = read_whole_file(fifo, 1024, "graph file", true);
  ASSERT_TRUE(text.ok()) << text.status().message();
  EXPECT_EQ(*text, "");
  // A folder and a device are named as such.
  EXPECT_HAS(read_whole_file(dir_.string(), 1024, "npy file").status().message(),
             "expected a file, got a folder");
  EXPECT_HAS(read_whole_file("/dev/zero", 1024, "npy file").status().message(),
             "expected a regular file, got a character device");
}

TEST_F(Files, AStreamIsReadOnceWithinItsCap) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  std::thread writer([w = fds[1]] {
    const std::string spaces(1 << 16, ' ');
    // Until the reader gives up (EPIPE), like `yes ' '`.
    while (::write(w, spaces.data(), spaces.size()) > 0) {
    }
    ::close(w);
  });
  ::signal(SIGPIPE, SIG_IGN);
  auto text =
      read_whole_file("/proc/self/fd/" + std::to_string(fds[0]), 1 << 20, "graph file", true);
  ::close(fds[0]);
  writer.join();
  ASSERT_FALSE(text.ok());
  EXPECT_HAS(text.status().message(),
             "expected at most 1.00 MiB (the most read), got more (a stream that did not end)");
}

TEST_F(Files, ARegularFileLargerThanItsCapIsRefusedFromItsSize) {
  const std::string big = path("big.json");
  { std::ofstream(big) << ""; }
  fs::resize_file(big, uint64_t{1} << 40);  // sparse: costs nothing
  auto text = read_whole_file(big, kGraphFileMaxBytes, "graph file", true);
  ASSERT_FALSE(text.ok());
  EXPECT_HAS(text.status().message(), "got 1099511627776 bytes");
}

TEST_F(Files, AFileAModelNamesLiesInsideTheModelsFolderWithOneLink) {
  write("model/w.bin", "weights");
  write("secret", "not the model's");
  write("elsewhere/x.bin", "not the model's either");
  fs::create_symlink("w.bin", path("model/alias.bin"));
  fs::create_symlink("../secret", path("model/link.bin"));
  fs::create_directory_symlink("../elsewhere", path("model/sub"));
  fs::create_hard_link(path("secret"), path("model/hard.bin"));
  write("model/model.onnx", "");
  const ModelFolder folder = ModelFolder::of_model_file(path("model/model.onnx"));
  FileRules rules;
  rules.kind = "external data file";
  rules.inside = &folder;
  EXPECT_TRUE(open_file(path("model/w.bin"), rules).ok());
  EXPECT_TRUE(open_file(path("model/alias.bin"), rules).ok());  // a link that stays inside
  for (const char* outside : {"model/link.bin", "model/sub/x.bin"}) {
    auto f = open_file(path(outside), rules);
    ASSERT_FALSE(f.ok()) << outside;
    EXPECT_HAS(f.status().message(), "expected a file inside the model's folder");
    EXPECT_HAS(f.status().message(), "(symbolic links followed)");
  }
  auto hard = open_file(path("model/hard.bin"), rules);
  ASSERT_FALSE(hard.ok());
  EXPECT_HAS(hard.status().message(), "got 2 hard links");
}

TEST_F(Files, ADownloadCacheSnapshotMayNameFilesBesideTheBlobItLinksTo) {
  // The layout of a Hugging Face cache: a snapshot's files are links into blobs/.
  write("blobs/aaa", "model");
  write("blobs/bbb", "data");
  fs::create_directories(path("snapshots/rev"));
  fs::create_symlink("../../blobs/aaa", path("snapshots/rev/model.onnx"));
  fs::create_symlink("../../blobs/bbb", path("snapshots/rev/model.onnx_data"));
  const ModelFolder folder = ModelFolder::of_model_file(path("snapshots/rev/model.onnx"));
  FileRules rules;
  rules.inside = &folder;
  EXPECT_TRUE(open_file(path("snapshots/rev/model.onnx_data"), rules).ok());
}

// The permissions of the mapping that holds `p`, from /proc/self/maps ("r--s").
std::string mapping_permissions(const void* p) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  const auto at = reinterpret_cast<uintptr_t>(p);
  while (std::getline(maps, line)) {
    uintptr_t lo = 0, hi = 0;
    char perms[5] = {};
    if (std::sscanf(line.c_str(), "%lx-%lx %4s", &lo, &hi, perms) == 3 && lo <= at && at < hi)
      return perms;
  }
  return "";
}

TEST_F(Files, AMappingIsReadOnlyAndAFileLargerThanMemoryOpens) {
  const std::string big = path("big.bin");
  { std::ofstream(big) << "x"; }
  const uint64_t size = host_memory_bytes() + (uint64_t{8} << 30);
  fs::resize_file(big, size);  // sparse
  FileRules rules;
  auto f = open_file(big, rules);
  ASSERT_TRUE(f.ok()) << f.status().message();
  auto map = map_file(*f);
  ASSERT_TRUE(map.ok()) << map.status().message();
  const std::span<const std::byte> bytes = (*map)->bytes();
  ASSERT_EQ(bytes.size(), size);
  EXPECT_EQ(bytes[0], std::byte{'x'});
  EXPECT_EQ(bytes[size - 1], std::byte{0});  // a page read on demand
  EXPECT_EQ(mapping_permissions(bytes.data()), "r--s");
}

TEST_F(Files, AnOutputIsNeverWrittenThroughAPlantedLink) {
  const std::string victim = write("victim", "precious");
  const std::string out = path("out.json");
  // Every name the old writer would have used, planted as links to the victim.
  fs::create_symlink(victim, out + ".partial-" + std::to_string(::getpid()));
  fs::create_symlink(victim, path(".out.json.partial-0"));
  ASSERT_TRUE(write_file_atomically(out, "result").ok());
  EXPECT_EQ(slurp(victim), "precious");
  EXPECT_EQ(slurp(out), "result");
  int entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir_)) ++entries;
  EXPECT_EQ(entries, 4) << "no temporary file left";
}

TEST_F(Files, AReplacedFileKeepsItsPermissions) {
  const std::string out = write("out.json", "old");
  fs::permissions(out, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
  ASSERT_TRUE(write_file_atomically(out, "new").ok());
  EXPECT_EQ(slurp(out), "new");
  EXPECT_EQ(fs::status(out).permissions() & fs::perms::mask,
            fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
}

TEST_F(Files, ALinkIsFollowedAlsoWhenItNamesNoFileYetAndStaysALink) {
  fs::create_directories(path("real"));
  fs::create_symlink("real/new.json", path("out.json"));  // dangling
  ASSERT_TRUE(check_output_target(path("out.json"), "--json").ok());
  ASSERT_TRUE(write_file_atomically(path("out.json"), "result").ok());
  EXPECT_TRUE(fs::is_symlink(path("out.json")));
  EXPECT_EQ(slurp(path("real/new.json")), "result");
  // A loop of links is refused.
  fs::create_symlink("b", path("a"));
  fs::create_symlink("a", path("b"));
  EXPECT_HAS(check_output_target(path("a"), "--json").message(),
             "expected a chain of symbolic links that ends");
}

}  // namespace
}  // namespace duet
