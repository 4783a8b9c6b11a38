// checkpoint.dir belongs to one run: a fresh run refuses a folder that holds another run's
// checkpoints, pruning deletes only folders named as disc-train names them, and --resume skips
// a newest checkpoint that cannot be read (with a warning that names it) for the one before.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>

#include "cli_test_util.h"
#include "devices/device.h"
#include "engine/safetensors.h"
#include "memory/allocator.h"
#include "reporting.h"

namespace disc::apps {
namespace {

namespace fs = std::filesystem;
using testing::kTinyCheckpointed;
using testing::losses;
using testing::run_with_config;
using testing::Scratch;

std::vector<std::string> names_in(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

TEST(CheckpointDir, FreshRunRefusesAFolderWithAnotherRunsCheckpoints) {
  Scratch s;
  s.write("run.yaml", kTinyCheckpointed);
  auto first =
      testing::run_command(run_with_config(s, "train.steps=4 checkpoint.dir=" + s.path("ck")));
  ASSERT_EQ(first.code, 0) << first.out;
  auto before = names_in(s.path("ck"));
  ASSERT_EQ(before, (std::vector<std::string>{".lock", "step-00000002", "step-00000004"}));
  auto ck_time = fs::last_write_time(s.path("ck/step-00000004/trainer.json"));

  auto second =
      testing::run_command(run_with_config(s, "train.steps=6 checkpoint.dir=" + s.path("ck") +
                                                  " logging.metrics=" + s.path("m2.jsonl")));
  EXPECT_EQ(second.code, 2) << second.out;
  EXPECT_EQ(std::count(second.out.begin(), second.out.end(), '\n'), 1) << second.out;
  EXPECT_NE(second.out.find("already holds checkpoints"), std::string::npos) << second.out;
  EXPECT_NE(second.out.find("pass --resume"), std::string::npos) << second.out;
  EXPECT_NE(second.out.find("choose another checkpoint.dir"), std::string::npos) << second.out;
  EXPECT_NE(second.out.find("delete the folder"), std::string::npos) << second.out;
  EXPECT_FALSE(fs::exists(s.path("m2.jsonl"))) << "the refused run wrote metrics";
  EXPECT_EQ(names_in(s.path("ck")), before);
  EXPECT_EQ(fs::last_write_time(s.path("ck/step-00000004/trainer.json")), ck_time);
}

TEST(CheckpointDir, PruningTouchesOnlyTheFoldersDiscTrainNames) {
  Scratch s;
  s.write("run.yaml", kTinyCheckpointed);
  // The user's own folders, named so that a prefix match or a string comparison with
  // step-00000002 would take them for old checkpoints.
  for (const char* mine : {"step-000-mine", "step-0000000", "step-00000001-backup", "step-notes"}) {
    fs::create_directories(s.path(std::string("ck/") + mine));
    s.write(std::string("ck/") + mine + "/keep.txt", "mine");
  }
  // A pruned checkpoint is renamed away before it is deleted; a kill -9 mid-delete leaves this,
  // which the next prune removes (it left a step-N/ with trainer.json and no state).
  fs::create_directories(s.path("ck/.step-00000001.deleting"));
  s.write("ck/.step-00000001.deleting/trainer.json", "{}");
  auto r = testing::run_command(
      run_with_config(s, "train.steps=6 checkpoint.keep=1 checkpoint.dir=" + s.path("ck")));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(names_in(s.path("ck")),
            (std::vector<std::string>{".lock", "step-000-mine", "step-0000000",
                                      "step-00000001-backup", "step-00000006", "step-notes"}));
}

struct Damage {
  const char* name;
  const char* file;     // in the newest checkpoint
  const char* content;  // nullptr: delete the file; "truncate": cut it short
  const char* reason;   // in the warning
};
void PrintTo(const Damage& x, std::ostream* os) {
  *os << x.name;
}  // test names, not bytes

class ResumeFallback : public ::testing::TestWithParam<Damage> {};

TEST_P(ResumeFallback, SkipsAnUnreadableNewestCheckpointWithAWarning) {
  const Damage& d = GetParam();
  Scratch s;
  s.write("run.yaml", kTinyCheckpointed);
  auto whole = testing::run_command(
      run_with_config(s, "train.steps=6 logging.metrics=" + s.path("whole.jsonl")));
  ASSERT_EQ(whole.code, 0) << whole.out;
  auto part = testing::run_command(run_with_config(
      s, "train.steps=4 checkpoint.dir=" + s.path("ck") + " logging.metrics=" + s.path("m.jsonl")));
  ASSERT_EQ(part.code, 0) << part.out;

  std::string damaged = s.path("ck/step-00000004/") + d.file;
  if (d.content == nullptr) {
    fs::remove(damaged);
  } else if (std::string(d.content) == "truncate") {
    fs::resize_file(damaged, fs::file_size(damaged) / 2);
  } else if (std::string(d.content) == "drop a tensor") {
    auto cpu = devices::make_cpu_device(1);
    memory::DeviceAllocator host(*cpu);
    auto tensors = engine::read_safetensors(damaged, host).tensors;
    tensors.erase(tensors.begin());
    engine::write_safetensors(damaged, tensors, {});
  } else {
    s.write(std::string("ck/step-00000004/") + d.file, d.content);
  }
  auto resumed = testing::run_command(
      run_with_config(s, "--resume train.steps=6 checkpoint.dir=" + s.path("ck") +
                             " logging.metrics=" + s.path("m.jsonl")));
  ASSERT_EQ(resumed.code, 0) << resumed.out;
  EXPECT_NE(resumed.out.find("skipping checkpoint " + s.path("ck/step-00000004")),
            std::string::npos)
      << resumed.out;
  EXPECT_NE(resumed.out.find(d.reason), std::string::npos) << resumed.out;
  EXPECT_NE(resumed.out.find("resumed from " + s.path("ck/step-00000002") + " at step 2"),
            std::string::npos)
      << resumed.out;
  EXPECT_EQ(losses(s.path("m.jsonl")), losses(s.path("whole.jsonl")));
}

INSTANTIATE_TEST_SUITE_P(
    Damages, ResumeFallback,
    ::testing::Values(
        Damage{"no_trainer_json", "trainer.json", nullptr, "trainer.json is missing"},
        Damage{"trainer_json_not_json", "trainer.json", "{\"step\": 4, \"ext",
               "trainer.json is corrupt"},
        Damage{"cursor_not_a_number", "trainer.json",
               R"({"step": 4, "extra": {"epoch": "x", "position": "0"}})", "data cursor `epoch`"},
        Damage{"state_truncated", "state.safetensors", "truncate", "state.safetensors"},
        // These were refused outright although an intact older checkpoint was there.
        Damage{"state_lacks_a_tensor", "state.safetensors", "drop a tensor", " lacks `"},
        Damage{"cursor_past_the_data", "trainer.json",
               R"({"step": 4, "extra": {"epoch": "0", "position": "999999"}})",
               "cannot seek to epoch 0, position 999999"}),
    [](const auto& info) { return std::string(info.param.name); });

// Another run's checkpoint is refused, not skipped, naming the key that changed (a changed
// model.hidden was refused by a tensor's shape).
TEST(CheckpointDir, ResumeWithAChangedModelNamesTheKey) {
  Scratch s;
  s.write("run.yaml", kTinyCheckpointed);
  ASSERT_EQ(
      testing::run_command(run_with_config(s, "train.steps=2 checkpoint.dir=" + s.path("ck"))).code,
      0);
  auto r = testing::run_command(
      run_with_config(s, "--resume train.steps=4 model.hidden=48 checkpoint.dir=" + s.path("ck")));
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("model.hidden"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("skipping"), std::string::npos) << r.out;
}

TEST(CheckpointDir, ResumeWithNothingReadableSaysWhatItSkipped) {
  Scratch s;
  s.write("run.yaml", kTinyCheckpointed);
  ASSERT_EQ(
      testing::run_command(run_with_config(s, "train.steps=2 checkpoint.dir=" + s.path("ck"))).code,
      0);
  s.write("ck/step-00000002/trainer.json", "garbage");
  auto r = testing::run_command(
      run_with_config(s, "--resume train.steps=4 checkpoint.dir=" + s.path("ck")));
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("disc-train: no complete checkpoint in " + s.path("ck") +
                       " to resume from (skipped unreadable step-00000002)"),
            std::string::npos)
      << r.out;
}

TEST(Metrics, ResumeRewritesTheFileAtomically) {
  Scratch s;
  std::string lines;
  for (int step = 1; step <= 5; ++step)
    lines += "{\"step\": " + std::to_string(step) + ", \"loss\": 1.0}\n";
  lines += "{\"step\": \"six\"}\nnot json\n";
  std::string path = s.write("m.jsonl", lines);
  // A second name for the file as it was: a rewrite in place would change what it shows too.
  fs::create_hard_link(path, s.path("before.jsonl"));
  {
    MetricsFile m(path, 3);
  }
  std::ifstream now(path), old(s.path("before.jsonl"));
  std::string now_text((std::istreambuf_iterator<char>(now)), {}),
      old_text((std::istreambuf_iterator<char>(old)), {});
  EXPECT_EQ(
      now_text,
      "{\"step\": 1, \"loss\": 1.0}\n{\"step\": 2, \"loss\": 1.0}\n{\"step\": 3, \"loss\": 1.0}\n");
  EXPECT_EQ(old_text, lines) << "the metrics file was truncated in place";
  EXPECT_EQ(names_in(s.path("")), (std::vector<std::string>{"before.jsonl", "m.jsonl"}))
      << "a temporary was left behind";
}

}  // namespace
}  // namespace disc::apps
