// Every kind of bad input to disc-train: one clear line on stderr, exit code 2, nothing written.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "base/version.h"
#include "cli_test_util.h"

namespace disc::apps {
namespace {

using testing::Scratch;

struct BadInput {
  const char* name;
  const char* config;     // YAML ("" for none), written as run.yaml
  const char* overrides;  // appended to the command
  const char* message;    // must appear in the one line
};
void PrintTo(const BadInput& x, std::ostream* os) {
  *os << x.name;
}  // test names, not bytes

class CliErrors : public ::testing::TestWithParam<BadInput> {};

TEST_P(CliErrors, OneLineExitTwoNothingWritten) {
  Scratch s;
  const BadInput& b = GetParam();
  std::string cmd = std::string(DISC_TRAIN) + " run";
  if (*b.config) cmd += " --config " + s.write("run.yaml", b.config);
  size_t before = s.entries();
  cmd += std::string(" ") + b.overrides + " logging.metrics=" + s.path("out/m.jsonl") +
         " checkpoint.dir=" + s.path("out/ck") + " logging.trace=" + s.path("out/t.json");
  auto r = testing::run_command(cmd);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
  EXPECT_EQ(r.out.rfind("disc-train: ", 0), 0u) << r.out;
  EXPECT_NE(r.out.find(b.message), std::string::npos) << r.out;
  EXPECT_EQ(s.entries(), before) << "something was written";
}

INSTANTIATE_TEST_SUITE_P(
    BadInputs, CliErrors,
    ::testing::Values(
        BadInput{"missing_config", "", "--config /nonexistent/run.yaml",
                 "cannot open config file /nonexistent/run.yaml"},
        BadInput{"malformed_yaml", "train:\n  steps: [1, 2\n", "", "run.yaml:3:1: malformed YAML"},
        BadInput{"unknown_key", "train:\n  step: 5\n", "",
                 "run.yaml:2:3: unknown key `train.step` (did you mean `train.steps`?)"},
        BadInput{"unknown_section", "trian:\n  steps: 5\n", "", "unknown key `trian`"},
        BadInput{"wrong_type", "train:\n  steps: many\n", "",
                 "train.steps must be an integer, not `many`"},
        BadInput{"out_of_range", "train:\n  steps: 0\n", "", "train.steps must be in [1, "},
        BadInput{"accumulate_zero", "", "train.accumulate=0", "train.accumulate must be in [1, "},
        BadInput{"two_passes_without_clipping", "", "optimizer.clip_passes=2 optimizer.clip_norm=0",
                 "clipping in two passes needs clipping"},
        BadInput{"two_passes_accumulating", "", "optimizer.clip_passes=2 train.accumulate=2",
                 "clipping in two passes saves nothing with gradient accumulation"},
        BadInput{"bad_choice", "optimizer:\n  name: adam\n", "",
                 "must be one of adamw, sgd, not `adam` (did you mean `adamw`?)"},
        BadInput{"section_not_map", "model: llama\n", "",
                 "`model` is a section and must hold keys"},
        BadInput{
            "bad_override_key", "", "train.stepz=3",
            "override `train.stepz=3`: unknown key `train.stepz` (did you mean `train.steps`?)"},
        BadInput{"bad_bytes", "", "memory.cap=lots",
                 "memory.cap must be a byte size such as 2GiB or 512MiB, not `lots`"},
        BadInput{"override_without_value", "", "train.steps", "write overrides as key=value"},
        BadInput{"missing_dataset", "data:\n  source: jsonl\n  path: /nonexistent/data.jsonl\n", "",
                 "/nonexistent/data.jsonl"},
        BadInput{"no_dataset_path", "data:\n  source: json\n", "", "data.path is empty"},
        BadInput{"heads_kv_mismatch", "model:\n  heads: 4\n  kv_heads: 3\n", "",
                 "must be a multiple of model.kv_heads"},
        BadInput{"batch_over_bound", "data:\n  batch_size: 500\n", "", "exceeds model.max_batch"},
        BadInput{"resume_without_checkpoint", "", "--resume", "no complete checkpoint in"},
        BadInput{"config_is_a_directory", "", "--config / train.steps=1",
                 "config file / is a directory: pass a YAML file"},
        BadInput{"unknown_device", "", "device.name=tpu",
                 "device.name: unknown device `tpu`; this build has: cpu, sim, sim-gpu, cuda:N"},
        BadInput{"amd_gpu_device", "", "device.name=hip:0", "use device.name: cpu"},
        // No machine here has a tenth GPU: why there is none, with or without a GPU present.
        BadInput{"gpu_device", "", "device.name=cuda:9", "use device.name: cpu"},
        BadInput{"null_key", "~: 5\n", "train.steps=1",
                 "run.yaml:1:1: a key at the top level is null, empty or a collection"},
        BadInput{"null_key_in_section", "train:\n  null: 5\n", "train.steps=1",
                 "run.yaml:2:3: a key in section `train` is null"},
        BadInput{"collection_key", "train:\n  [a, b]: 5\n", "train.steps=1",
                 "run.yaml:2:3: a key in section `train`"},
        BadInput{"duplicate_key", "train:\n  steps: 5\n  steps: 6\n", "",
                 "run.yaml:3:3: `train.steps` is given twice (first at "},
        BadInput{"duplicate_section",
                 "train:\n  steps: 5\nmodel:\n  hidden: 16\ntrain:\n  seed: 1\n", "",
                 "run.yaml:5:1: `train` is given twice (first at "},
        BadInput{"config_without_keys", "# every key to be filled in later\n", "",
                 "run.yaml: the config file holds no keys"},
        BadInput{"dataset_is_a_device", "", "data.source=text data.path=/dev/zero",
                 "cannot read /dev/zero: it is not a regular file"},
        BadInput{"unknown_precision", "", "train.precision=bf8",
                 "train.precision must be one of f32, bf16, f16, not `bf8` (did you mean `bf16`?)"},
        BadInput{"packing_a_graph_file", "",
                 "data.packing=true model.graph=" DISC_TEST_DATA_DIR "/graphs/llama.disc",
                 "data.packing: the model from model.graph cannot take packed steps"},
        BadInput{"packing_an_onnx_model_without_its_attention", "",
                 "data.packing=true jit.attention=false data.synthetic.vocab=32 "
                 "model.onnx=" DISC_TEST_DATA_DIR "/reference/llama.onnx",
                 "data.packing: an ONNX model packs through its attention as disc's attention "
                 "op; set jit.attention: true"},
        BadInput{"packed_budget_below_max_len", "",
                 "data.packing=true data.token_budget=100 data.synthetic.max_len=128",
                 "(packed steps never split an example)"}),
    [](const auto& info) { return std::string(info.param.name); });

// A graph file that cannot take what the data gives is refused before anything is written, not
// at step 1 with the metrics file already started.
struct GraphMismatch {
  const char* name;
  int64_t b_max, s_max, rows,
      classes;              // the graph's bounds for B and S, embedding rows, logits' classes
  const char* extra_input;  // another input declaration, or ""
  const char* overrides;
  const char* message;
};
void PrintTo(const GraphMismatch& x, std::ostream* os) {
  *os << x.name;
}  // test names, not bytes

class GraphFileErrors : public ::testing::TestWithParam<GraphMismatch> {};

TEST_P(GraphFileErrors, OneLineExitTwoNothingWritten) {
  const GraphMismatch& m = GetParam();
  Scratch s;
  char graph[2048];
  // An embedding, an LM head and the loss: enough to train, with every size a parameter here.
  std::snprintf(graph, sizeof graph, R"(graph @tiny {
  sym B in [1, %lld]
  sym S in [1, %lld]
  input %%tokens : i32[B, S]
  input %%targets : i32[B, S]
  %s
  param %%embed : f32[%lld, 8]
  param %%head : f32[8, %lld]
  %%x = gather(%%embed, %%tokens) : f32[B, S, 8]
  %%logits = matmul(%%x, %%head) : f32[B, S, %lld]
  %%loss = cross_entropy(%%logits, %%targets) : f32[]
  output loss = %%loss
}
)",
                static_cast<long long>(m.b_max), static_cast<long long>(m.s_max), m.extra_input,
                static_cast<long long>(m.rows), static_cast<long long>(m.classes),
                static_cast<long long>(m.classes));
  std::string file = s.write("tiny.disc", graph);
  s.write("data.txt", std::string(3000, 'x'));
  size_t before = s.entries();
  auto r = testing::run_command(std::string(DISC_TRAIN) + " run model.graph=" + file + " " +
                                m.overrides + " data.path=" + s.path("data.txt") +
                                " train.steps=2 logging.progress=none logging.metrics=" +
                                s.path("out/m.jsonl") + " checkpoint.dir=" + s.path("out/ck"));
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
  EXPECT_EQ(r.out.rfind("disc-train: " + file + ": ", 0), 0u) << r.out;
  EXPECT_NE(r.out.find(m.message), std::string::npos) << r.out;
  EXPECT_EQ(s.entries(), before) << "something was written";
}

INSTANTIATE_TEST_SUITE_P(
    Mismatches, GraphFileErrors,
    ::testing::Values(
        // data.batch_size 8 gives B = 8; the graph admits 4.
        GraphMismatch{"batch_above_bound", 4, 64, 300, 300, "",
                      "data.batch_size=8 data.synthetic.max_len=32",
                      "B = 8, outside B's range [1, 4]"},
        // Every synthetic example is 100 tokens; the graph admits 64.
        GraphMismatch{"length_above_bound", 8, 64, 300, 300, "",
                      "data.batch_size=8 data.synthetic.min_len=100 data.synthetic.max_len=100",
                      "S = 100, outside S's range [1, 64]"},
        // Byte tokens run to 257; a 200-row embedding cannot look them up, 200 classes cannot score
        // them.
        GraphMismatch{"embedding_below_vocab", 8, 64, 200, 300, "",
                      "data.source=text data.max_len=64 data.batch_size=8",
                      "embedding %embed has 200 rows, but the data's token ids go up to 257 (text "
                      "data, vocab 258)"},
        GraphMismatch{"logits_below_vocab", 8, 64, 300, 200, "",
                      "data.source=text data.max_len=64 data.batch_size=8",
                      "logits %logits score 200 classes, but the data's token ids go up to 257"},
        GraphMismatch{"input_the_data_lacks", 8, 64, 300, 300, "input %mask : f32[B, S]",
                      "data.batch_size=8 data.synthetic.max_len=32",
                      "input %mask (f32[B, S]) is not something the data gives"}),
    [](const auto& info) { return std::string(info.param.name); });

// Outputs that can never be written are refused before training, not after it (a trace is
// written at the end of a run) and not half way (checkpoints).
class UnwritableOutput : public ::testing::TestWithParam<const char*> {};

TEST_P(UnwritableOutput, OneLineExitTwoNothingWritten) {
  const std::string key = GetParam();
  Scratch s;
  s.write("blocker", "a regular file where a folder would have to be");
  std::map<std::string, std::string> outputs = {{"logging.metrics", s.path("out/m.jsonl")},
                                                {"logging.trace", s.path("out/t.json")},
                                                {"checkpoint.dir", s.path("out/ck")}};
  outputs[key] = s.path("blocker/sub/" + key);
  std::string cmd =
      std::string(DISC_TRAIN) +
      " run train.steps=2 model.hidden=16 data.synthetic.max_len=16 logging.progress=none";
  for (const auto& [k, v] : outputs) cmd += " " + k + "=" + v;
  size_t before = s.entries();
  auto r = testing::run_command(cmd);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
  EXPECT_NE(
      r.out.find("disc-train: " + key + " is " + outputs[key] +
                 ", which cannot be written: " + s.path("blocker") + " is a file, not a folder"),
      std::string::npos)
      << r.out;
  EXPECT_EQ(s.entries(), before) << "something was written";
}

INSTANTIATE_TEST_SUITE_P(Keys, UnwritableOutput,
                         ::testing::Values("logging.metrics", "logging.trace", "checkpoint.dir"),
                         [](const auto& info) {
                           std::string n = info.param;
                           std::replace(n.begin(), n.end(), '.', '_');
                           return n;
                         });

TEST(CliErrors, OutputThatIsAFolderOrCheckpointDirThatIsAFile) {
  Scratch s;
  std::filesystem::create_directories(s.path("metrics_dir"));
  s.write("ck_file", "x");
  size_t before = s.entries();
  auto r = testing::run_command(std::string(DISC_TRAIN) +
                                " validate logging.metrics=" + s.path("metrics_dir"));
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("it is a folder; name a file"), std::string::npos) << r.out;
  r = testing::run_command(std::string(DISC_TRAIN) +
                           " run train.steps=1 checkpoint.dir=" + s.path("ck_file"));
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("it exists and is not a folder"), std::string::npos) << r.out;
  EXPECT_EQ(s.entries(), before);
}

TEST(CliErrors, DatasetThatIsNotWhatTheConfigSays) {
  Scratch s;
  std::string list =
      s.write("list.json", "[{\"instruction\": \"a\", \"input\": \"\", \"output\": \"b\"}]\n");
  std::string cfg = s.write("run.yaml", "data:\n  source: jsonl\n  path: " + list + "\n");
  size_t before = s.entries();
  auto r = testing::run_command(std::string(DISC_TRAIN) + " run --config " + cfg +
                                " logging.metrics=" + s.path("m.jsonl"));
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
  EXPECT_NE(r.out.find("list.json:1"), std::string::npos) << r.out;
  EXPECT_EQ(s.entries(), before);
}

// A megabyte of value is quoted by its first bytes and its size: the message stays one short line.
TEST(CliErrors, AHugeValueIsNotEchoedWhole) {
  Scratch s;
  std::string cfg = s.write("run.yaml", "optimizer:\n  name: " + std::string(1 << 20, 'x') + "\n");
  auto r = testing::run_command(std::string(DISC_TRAIN) + " validate --config " + cfg);
  EXPECT_EQ(r.code, 2) << r.out.substr(0, 400);
  EXPECT_LT(r.out.size(), 400u) << r.out.substr(0, 400);
  EXPECT_NE(r.out.find("optimizer.name must be one of adamw, sgd, not `" + std::string(60, 'x') +
                       "... (1048576 bytes)`"),
            std::string::npos)
      << r.out.substr(0, 400);
}

// With no memory.cap the device is what ran out: the message must not blame a cap of 0 B. A
// 10^6 x 10^6 projection (4 TB of f32) fits no simulated device (it has the host's memory); the
// only tensors allocated before the failure, the embedding and norms, are a few 10^6 floats.
TEST(CliErrors, ParametersBeyondTheDeviceBlameTheDeviceWhenNoCapIsSet) {
  auto r = testing::run_command(std::string(DISC_TRAIN) +
                                " validate device.name=sim model.hidden=1000000 model.heads=1 "
                                "model.kv_heads=1 model.ffn=1 data.synthetic.vocab=4");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_EQ(r.out.find("memory cap"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("the memory of device sim ("), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("cannot hold the parameters and optimizer state"), std::string::npos)
      << r.out;
}

// Records that lack some of data.fields still train, and the run says how many there were.
TEST(Cli, RecordsLackingFieldsAreCountedAndReported) {
  Scratch s;
  std::string data = s.write("d.jsonl",
                             "{\"instruction\": \"a\", \"input\": \"b\", \"output\": \"c\"}\n"
                             "{\"instruction\": \"a\", \"output\": \"c\"}\n");
  auto r = testing::run_command(std::string(DISC_TRAIN) +
                                " validate model.hidden=16 data.source=jsonl data.path=" + data);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(
      r.out.find("1 record lacks some of data.fields, the first: " + data + ":2 lacks `input`"),
      std::string::npos)
      << r.out;
}

TEST(Cli, PrintConfigRoundTripsThroughLoad) {
  Scratch s;
  auto printed =
      testing::run_command(std::string(DISC_TRAIN) + " print-config train.steps=7 memory.cap=2GiB");
  ASSERT_EQ(printed.code, 0) << printed.out;
  EXPECT_NE(printed.out.find("steps: 7"), std::string::npos);
  EXPECT_NE(printed.out.find("cap: 2GiB"), std::string::npos);
  std::string cfg = s.write("printed.yaml", printed.out);
  auto again = testing::run_command(std::string(DISC_TRAIN) + " print-config --config " + cfg);
  EXPECT_EQ(again.code, 0) << again.out;
  EXPECT_EQ(again.out, printed.out);
}

TEST(Cli, ValidateWritesNothingAndPlanShowsSymbols) {
  Scratch s;
  auto v = testing::run_command(std::string(DISC_TRAIN) +
                                " validate model.hidden=32 logging.metrics=" + s.path("m.jsonl"));
  EXPECT_EQ(v.code, 0) << v.out;
  EXPECT_NE(v.out.find("config OK"), std::string::npos) << v.out;
  EXPECT_FALSE(std::filesystem::exists(s.path("m.jsonl")));
  auto p = testing::run_command(std::string(DISC_TRAIN) + " plan model.hidden=32");
  EXPECT_EQ(p.code, 0) << p.out;
  EXPECT_NE(p.out.find("S in [1, 128]"), std::string::npos) << p.out.substr(0, 400);
  EXPECT_NE(p.out.find("adamw_update"), std::string::npos);
  EXPECT_EQ(p.out.find("// llama"), 0u) << "the summary comes first: " << p.out.substr(0, 400);
  EXPECT_NE(p.out.find("peak "), std::string::npos);
}

TEST(Cli, VersionAndUsageErrors) {
  auto v = testing::run_command(std::string(DISC_TRAIN) + " --version");
  EXPECT_EQ(v.code, 0);
  EXPECT_EQ(v.out, std::string("disc-train ") + version() + "\n");
  for (const char* bad : {" frobnicate", " run --bogus", " plan --shape", ""}) {
    auto r = testing::run_command(std::string(DISC_TRAIN) + bad);
    EXPECT_EQ(r.code, 2) << "disc-train" << bad << ": " << r.out;
  }
}

// On a terminal (`script` gives the run one) log lines are coloured, unless NO_COLOR is set.
TEST(Cli, NoColorTurnsColourOff) {
  const std::string run =
      std::string(DISC_TRAIN) +
      " run model.hidden=16 train.steps=2 logging.progress=none jit.cache_dir=''";
  auto coloured = testing::run_command("script -qec \"" + run + "\" /dev/null");
  ASSERT_EQ(coloured.code, 0) << coloured.out;
  EXPECT_NE(coloured.out.find("\x1b["), std::string::npos) << "no colour on a terminal";
  auto plain = testing::run_command("NO_COLOR=1 script -qec \"" + run + "\" /dev/null");
  ASSERT_EQ(plain.code, 0) << plain.out;
  EXPECT_EQ(plain.out.find("\x1b["), std::string::npos) << plain.out;
}

TEST(Cli, PlanJsonIsTheSummaryAsJson) {
  auto p = testing::run_command(std::string(DISC_TRAIN) +
                                " plan --json model.hidden=32 memory.cap=64MiB --shape B=4,S=64");
  ASSERT_EQ(p.code, 0) << p.out;
  auto j = nlohmann::json::parse(p.out);
  EXPECT_EQ(j["shape"], "B=4, S=64");
  EXPECT_EQ(j["cap_bytes"], 64 << 20);
  EXPECT_TRUE(j["fits"]);
  EXPECT_LE(j["planned_peak_bytes"].get<int64_t>(), 64 << 20);
  EXPECT_LT(j["lower_bound_bytes"].get<int64_t>(), j["peak_bytes"].get<int64_t>());
  EXPECT_TRUE(j.contains("smallest_cap_bytes"));
  EXPECT_EQ(j["symbols"][0]["name"], "B");
}

// A cap that clipping in one pass cannot keep and two passes can: plan says it takes two, and run
// takes them and says so.
TEST(Cli, PlanAndRunClipInTwoPassesWhereTheCapNeedsThem) {
  const std::string args = " model.hidden=32 train.steps=2 logging.progress=none";
  auto cap_of = [&](const std::string& more) {
    auto p = testing::run_command(std::string(DISC_TRAIN) + " plan --json" + args + more);
    EXPECT_EQ(p.code, 0) << p.out;
    return nlohmann::json::parse(p.out);
  };
  const int64_t one = cap_of(
                    " memory.cap=1GiB optimizer.clip_passes=1")["every_shape_smallest_cap_bytes"],
                two = cap_of(
                    " memory.cap=1GiB optimizer.clip_passes=2")["every_shape_smallest_cap_bytes"];
  ASSERT_LT(two, one);
  const std::string cap = " memory.cap=" + std::to_string(two);
  const nlohmann::json j = cap_of(cap);
  EXPECT_EQ(j["clip_passes"], 2);
  EXPECT_TRUE(j["fits"]);
  EXPECT_EQ(cap_of(" memory.cap=" + std::to_string(one))["clip_passes"], 1);
  auto run = testing::run_command(std::string(DISC_TRAIN) + " run" + args + cap);
  EXPECT_EQ(run.code, 0) << run.out;
  EXPECT_NE(run.out.find("gradient clipping in two passes"), std::string::npos) << run.out;
}

// With data.token_budget the graph carries the limit B*S <= budget: plan prints it, and the cap
// that every admissible batch keeps is planned over the staircase of worst shapes, far below the
// cap for B and S both at their bounds (what batch_size 64 gives: 8 times the tokens).
TEST(Cli, PlanPrintsATokenBudgetsLimitAndTheCapEveryBatchKeeps) {
  const std::string plan = std::string(DISC_TRAIN) + " plan model.hidden=32 model.max_batch=64";
  auto p = testing::run_command(plan + " --json data.token_budget=1024 memory.cap=64MiB");
  ASSERT_EQ(p.code, 0) << p.out;
  auto j = nlohmann::json::parse(p.out);
  EXPECT_EQ(j["limits"], nlohmann::json::array({"B*S <= 1024"}));
  EXPECT_EQ(j["worst_shapes"], 41);  // (8, 128), (9, 113), ..., (64, 16)
  auto boxed = testing::run_command(plan + " --json data.batch_size=64 memory.cap=64MiB");
  ASSERT_EQ(boxed.code, 0) << boxed.out;
  EXPECT_LT(j["every_shape_smallest_cap_bytes"].get<int64_t>(),
            nlohmann::json::parse(boxed.out)["every_shape_smallest_cap_bytes"].get<int64_t>() / 2);
  auto text = testing::run_command(plan + " data.token_budget=1024");
  EXPECT_NE(text.out.find("//   B*S <= 1024\n"), std::string::npos) << text.out.substr(0, 2000);
  EXPECT_NE(text.out.find("// every admissible batch (41 worst shapes): lower bound "),
            std::string::npos)
      << text.out.substr(0, 2000);
}

TEST(Cli, PlanShowsWhereACapTooSmallFailsWhereRunRefusesIt) {
  const std::string args = " model.hidden=32 data.synthetic.max_len=64 memory.cap=1MiB";
  auto run =
      testing::run_command(std::string(DISC_TRAIN) + " run" + args + " logging.progress=none");
  EXPECT_NE(run.code, 0);
  // The exact bytes beside the rounded ones: two limits one decimal apart read alike.
  EXPECT_NE(run.out.find("the memory cap (memory.cap) 1.0 MiB (1048576 B) is too small for the "
                         "largest batch"),
            std::string::npos)
      << run.out;
  auto plan = testing::run_command(std::string(DISC_TRAIN) + " plan" + args);
  EXPECT_EQ(plan.code, 0) << plan.out;
  EXPECT_NE(plan.out.find("memory cap 1.0 MiB cannot be kept: step "), std::string::npos)
      << plan.out.substr(0, 2000);
  EXPECT_NE(plan.out.find("smallest cap the planner reaches"), std::string::npos);
}

// `fits` is what `run` decides: a cap that keeps the shape asked about but not every admissible
// batch does not fit (it said `"fits": true` for a cap that run then refused).
TEST(Cli, PlanJsonFitsOnlyWhenEveryBatchKeepsTheCap) {
  const std::string plan = std::string(DISC_TRAIN) +
                           " plan --json model.hidden=32 data.synthetic.max_len=64 --shape B=1,S=8";
  auto free_run = testing::run_command(plan + " memory.cap=1GiB");  // the planner on
  ASSERT_EQ(free_run.code, 0) << free_run.out;
  auto j = nlohmann::json::parse(free_run.out);
  const int64_t small = j["smallest_cap_bytes"], every = j["every_shape_smallest_cap_bytes"];
  ASSERT_LT(small, every);
  auto capped = testing::run_command(plan + " memory.cap=" + std::to_string((small + every) / 2));
  ASSERT_EQ(capped.code, 0) << capped.out;
  j = nlohmann::json::parse(capped.out);
  EXPECT_TRUE(j["fits_at_shape"]);
  EXPECT_FALSE(j["fits"]);
  EXPECT_NE(j["every_shape_error"].get<std::string>().find("is too small for the largest batch"),
            std::string::npos)
      << j.dump();
}

TEST(Cli, TrainsAForwardGraphReadFromAFile) {
  Scratch s;
  std::string graph = std::string(DISC_TEST_DATA_DIR) + "/graphs/llama.disc";
  auto r = testing::run_command(
      std::string(DISC_TRAIN) + " run model.graph=" + graph +
      " train.steps=3 data.synthetic.max_len=32 logging.progress=none logging.metrics=" +
      s.path("m.jsonl"));
  EXPECT_EQ(r.code, 0) << r.out;
  std::ifstream in(s.path("m.jsonl"));
  EXPECT_EQ(std::count(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>(), '\n'),
            4);  // the run's start record and 3 steps
  auto bad = testing::run_command(std::string(DISC_TRAIN) + " run model.graph=" +
                                  std::string(DISC_TEST_DATA_DIR) + "/graphs/mlp.disc");
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.out.find("disc-train feeds `tokens` i32[B, S]"), std::string::npos) << bad.out;
}

// data.packing: the same examples as the padded run, step for step within rounding; the metrics
// count the positions computed, and the summary their share of real tokens.
TEST(Cli, PackedRunFollowsThePaddedRun) {
  Scratch s;
  s.write("run.yaml", testing::kTinyCheckpointed);
  auto run = [&](const std::string& packing, const std::string& metrics) {
    return testing::run_command(testing::run_with_config(
        s, "train.steps=4 data.packing=" + packing + " logging.metrics=" + s.path(metrics)));
  };
  auto padded = run("false", "pad.jsonl"), packed = run("true", "pack.jsonl");
  ASSERT_EQ(padded.code, 0) << padded.out;
  ASSERT_EQ(packed.code, 0) << packed.out;
  std::ifstream pad_in(s.path("pad.jsonl")), pack_in(s.path("pack.jsonl"));
  std::string pad_line, pack_line;
  std::getline(pad_in, pad_line), std::getline(pack_in, pack_line);  // the start records
  int steps = 0;
  int64_t pad_positions = 0, pack_positions = 0;
  while (std::getline(pad_in, pad_line) && std::getline(pack_in, pack_line)) {
    auto a = nlohmann::json::parse(pad_line), b = nlohmann::json::parse(pack_line);
    EXPECT_EQ(a["tokens"], b["tokens"]);
    EXPECT_EQ(a["positions"].get<int64_t>(),
              a["batch"].get<int64_t>() * a["seq"].get<int64_t>());  // padded: B * S
    EXPECT_LE(b["positions"].get<int64_t>(), a["positions"].get<int64_t>());
    pad_positions += a["positions"].get<int64_t>(), pack_positions += b["positions"].get<int64_t>();
    EXPECT_NEAR(b["loss"].get<double>(), a["loss"].get<double>(),
                1e-5 * std::abs(a["loss"].get<double>()));
    ++steps;
  }
  EXPECT_EQ(steps, 4);
  EXPECT_LT(pack_positions, pad_positions);
  EXPECT_NE(packed.out.find("% of the "), std::string::npos) << packed.out;
}

TEST(Cli, HelpListsTheSubcommands) {
  auto r = testing::run_command(std::string(DISC_TRAIN) + " --help");
  EXPECT_EQ(r.code, 0);
  for (const char* sub : {"run", "print-config", "validate", "plan"})
    EXPECT_NE(r.out.find(sub), std::string::npos) << sub;
}

}  // namespace
}  // namespace disc::apps
