// What reaches the disk, and when: this binary replaces fsync with a wrapper that records which
// file or folder each call syncs and can make it fail, so the tests can see that a checkpoint's
// files, its folder and the folder's parent are synced, that no checkpoint folder exists under
// its final name before it is complete, and that a failed sync leaks no file descriptor.
#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "base/error.h"
#include "devices/device.h"
#include "engine/safetensors.h"
#include "engine/trainer.h"
#include "ir/models/model.h"
#include "memory/allocator.h"

namespace {

// Called with the synced path; returning false makes that fsync fail with EIO.
std::function<bool(const std::string&)> on_fsync;

std::string path_of(int fd) {
  char buf[4096];
  ssize_t n = ::readlink(("/proc/self/fd/" + std::to_string(fd)).c_str(), buf, sizeof buf - 1);
  return n < 0 ? "" : std::string(buf, static_cast<size_t>(n));
}

}  // namespace

// Every fsync in this binary, the library's included, comes here (the executable's definition
// wins over libc's at link time).
extern "C" int fsync(int fd) {
  if (on_fsync && !on_fsync(path_of(fd))) {
    errno = EIO;
    return -1;
  }
  return static_cast<int>(::syscall(SYS_fsync, fd));
}

namespace disc::engine {
namespace {

namespace fs = std::filesystem;

class Durability : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        fs::canonical(fs::temp_directory_path()) / ("disc-durable-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    on_fsync = nullptr;
    fs::remove_all(dir_);
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  static size_t open_fds() {
    return static_cast<size_t>(
        std::distance(fs::directory_iterator("/proc/self/fd"), fs::directory_iterator()));
  }

  fs::path dir_;
};

Trainer small_trainer() {
  ir::models::MlpConfig c;
  c.in = 6, c.classes = 3, c.hidden = {5}, c.max_batch = 4;
  TrainerOptions o;
  o.threads = 1;
  return Trainer(ir::models::build_mlp(c), o);
}

TEST_F(Durability, SaveSyncsBothFilesTheFolderAndItsParent) {
  Trainer t = small_trainer();
  fs::create_directories(path("ck"));
  std::vector<std::string> synced;
  bool final_existed_early = false;
  const std::string final = path("ck/step-00000007");
  on_fsync = [&](const std::string& p) {
    synced.push_back(p);
    // Until the folder itself is synced (the last step before its rename), it must not be
    // visible under its final name.
    if (p != path("ck") && fs::exists(final)) final_existed_early = true;
    return true;
  };
  t.save(final, {{"epoch", "1"}});
  on_fsync = nullptr;
  auto synced_file = [&](const std::string& prefix) {
    for (const auto& p : synced) {
      if (fs::path(p).filename().string().rfind(prefix, 0) == 0) return true;
    }
    return false;
  };
  EXPECT_TRUE(synced_file("state.safetensors")) << ::testing::PrintToString(synced);
  EXPECT_TRUE(synced_file("trainer.json")) << ::testing::PrintToString(synced);
  ASSERT_FALSE(synced.empty());
  EXPECT_EQ(synced.back(), path("ck"))
      << "the parent must be synced after the rename: " << ::testing::PrintToString(synced);
  bool folder_synced = false;
  for (const auto& p : synced)
    folder_synced |= p != path("ck") &&
                     fs::path(p).filename().string().find("step-00000007") != std::string::npos;
  EXPECT_TRUE(folder_synced) << "the checkpoint folder itself was not synced: "
                             << ::testing::PrintToString(synced);
  EXPECT_FALSE(final_existed_early) << "a partial checkpoint folder existed under its final name";
  EXPECT_TRUE(fs::exists(final + "/trainer.json"));
  EXPECT_TRUE(fs::exists(final + "/state.safetensors"));
}

TEST_F(Durability, FailedSyncLeaksNoDescriptorAndLeavesNoPartialFiles) {
  auto dev = devices::make_cpu_device(1);
  memory::DeviceAllocator alloc(*dev);
  std::map<std::string, Tensor> tensors = {{"x", Tensor::from<float>({2}, {1, 2}, alloc)}};
  size_t fds = open_fds();
  on_fsync = [](const std::string&) { return false; };
  EXPECT_THROW(write_safetensors(path("t.safetensors"), tensors), IoError);
  EXPECT_EQ(open_fds(), fds) << "a file descriptor leaked";
  EXPECT_TRUE(fs::is_empty(dir_)) << "a temporary was left behind";

  Trainer t = small_trainer();
  fds = open_fds();
  for (const char* failing : {"state.safetensors", "trainer.json", "step-00000001", "ck"}) {
    on_fsync = [&](const std::string& p) {
      return fs::path(p).filename().string().find(failing) == std::string::npos;
    };
    EXPECT_THROW(t.save(path("ck/step-00000001")), IoError) << "fsync of " << failing << " failed";
    on_fsync = nullptr;
    EXPECT_EQ(open_fds(), fds) << "a file descriptor leaked when fsync of " << failing << " failed";
    for (const auto& e : fs::directory_iterator(path("ck"))) {
      std::string name = e.path().filename().string();
      if (std::string(failing) != "ck") {
        EXPECT_NE(name.substr(0, 1), ".") << "staging folder left: " << name;
      }
    }
    EXPECT_FALSE(std::string(failing) != "ck" && fs::exists(path("ck/step-00000001")))
        << "an unsynced checkpoint got its final name when fsync of " << failing << " failed";
    fs::remove_all(path("ck/step-00000001"));
  }
}

}  // namespace
}  // namespace disc::engine
