// Checkpoints and parameter files fail safely: a checkpoint that does not fit the model changes
// nothing, a corrupt one is an IoError that says where, a safetensors header cannot make the
// reader allocate what the file does not hold, and init honours each parameter's dtype.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include "base/error.h"
#include "devices/device.h"
#include "engine/init.h"
#include "engine/safetensors.h"
#include "engine/trainer.h"
#include "ir/models/model.h"
#include "memory/allocator.h"

namespace disc::engine {
namespace {

namespace fs = std::filesystem;

class ScratchDir {
 public:
  ScratchDir()
      : dir_(fs::temp_directory_path() /
             ("disc-ckpt-" + std::to_string(::getpid()) + "-" + std::to_string(n_++))) {
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  ~ScratchDir() { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

 private:
  static inline int n_ = 0;
  fs::path dir_;
};

Trainer small_trainer(uint64_t seed, const std::string& device = "cpu") {
  ir::models::MlpConfig c;
  c.in = 6, c.classes = 3, c.hidden = {5}, c.max_batch = 4;
  TrainerOptions o;
  o.device = device, o.threads = 1, o.seed = seed;
  return Trainer(ir::models::build_mlp(c), o);
}

std::vector<char> bytes_of(const Tensor& t) {
  std::vector<char> bytes(static_cast<size_t>(t.bytes()));
  t.download(bytes.data());
  return bytes;
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::trunc) << text;
}

// A safetensors file with `header` as its JSON header and `data` after it.
void write_raw_safetensors(const std::string& path, const std::string& header,
                           const std::string& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  uint64_t len = header.size();
  out.write(reinterpret_cast<const char*>(&len), 8);
  out << header << data;
}

// A safetensors header the reader must refuse, and what its IoError must say.
struct BadHeader {
  const char* header;
  const char* message;
};

// Writes `c.header` with `data_bytes` zero bytes after it at `path`; reading it must be an IoError
// whose message holds `c.message`.
void expect_refused(const std::string& path, const BadHeader& c, size_t data_bytes,
                    memory::Allocator& alloc) {
  write_raw_safetensors(path, c.header, std::string(data_bytes, '\0'));
  try {
    read_safetensors(path, alloc);
    ADD_FAILURE() << "accepted " << c.header;
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find(c.message), std::string::npos)
        << c.header << ": " << e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << c.header << " gave a non-IoError: " << e.what();
  }
}

TEST(Checkpoint, LoadThatDoesNotFitChangesNothing) {
  ScratchDir s;
  Trainer a = small_trainer(1), b = small_trainer(2);
  a.save(s.path("ck"), {{"k", "v"}});
  // Replace the tensor that comes last in name order: an all-or-nothing load must refuse before
  // it copies the ones before it.
  memory::Allocator& alloc = b.allocator();
  TensorFile file = read_safetensors(s.path("ck/state.safetensors"), alloc);
  std::string last = file.tensors.rbegin()->first;
  file.tensors[last] = Tensor::from<float>({1}, {0.5f}, alloc);
  write_safetensors(s.path("ck/state.safetensors"), file.tensors, file.metadata);

  std::map<std::string, std::vector<char>> before;
  for (const auto& name : b.parameter_names()) before[name] = bytes_of(b.parameter(name));
  int differing = 0;
  for (const auto& name : a.parameter_names())
    differing += bytes_of(a.parameter(name)) != before[name];
  ASSERT_GT(differing, 1)
      << "the two trainers must start from different parameters for this test to mean anything";

  try {
    b.load(s.path("ck"));
    FAIL() << "a checkpoint with a wrong shape loaded";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("`" + last + "`"), std::string::npos) << e.what();
  }
  for (const auto& name : b.parameter_names())
    EXPECT_EQ(bytes_of(b.parameter(name)), before[name]) << name << " was overwritten";
  EXPECT_EQ(b.steps_done(), 0);
}

TEST(Checkpoint, CorruptTrainerJsonIsAnIoErrorNamingTheFile) {
  ScratchDir s;
  Trainer t = small_trainer(1);
  t.save(s.path("ck"), {{"epoch", "0"}});
  for (const char* text : {"{\"step\": \"three\", \"extra\": {}}", "{\"extra\": {}}",
                           "{\"step\": 3, \"extra\": {\"epoch\": 1}}", "[1, 2]",
                           "{\"step\": -4, \"extra\": {}}", "{\"step\": 3"}) {
    write_text(s.path("ck/trainer.json"), text);
    try {
      t.load(s.path("ck"));
      ADD_FAILURE() << "loaded " << text;
    } catch (const IoError& e) {
      EXPECT_NE(std::string(e.what()).find(s.path("ck/trainer.json")), std::string::npos)
          << e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << text << " gave a non-IoError: " << e.what();
    }
  }
  fs::remove(s.path("ck/trainer.json"));
  EXPECT_THROW(t.load(s.path("ck")), IoError);
}

TEST(Checkpoint, SaveRoundTripsAndReplacesAnOlderCheckpointOfTheSameName) {
  ScratchDir s;
  Trainer a = small_trainer(1), b = small_trainer(2);
  a.save(s.path("ck/step-1"), {{"epoch", "1"}});
  b.save(s.path("ck/step-1/"), {{"epoch", "2"}});  // a trailing slash names the same folder
  Trainer c = small_trainer(3);
  EXPECT_EQ(c.load(s.path("ck/step-1")), (std::map<std::string, std::string>{{"epoch", "2"}}));
  for (const auto& name : b.parameter_names())
    EXPECT_EQ(bytes_of(c.parameter(name)), bytes_of(b.parameter(name))) << name;
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(s.path("ck")))
    left.push_back(e.path().filename().string());
  EXPECT_EQ(left, std::vector<std::string>{"step-1"}) << "a staging folder was left behind";
}

// A checkpoint moves between devices: saved from memory the host cannot address (sim-gpu, as a
// GPU's), loaded on the CPU, and back.
TEST(Checkpoint, MovesBetweenTheCpuAndADeviceTheHostCannotAddress) {
  ScratchDir s;
  Trainer gpu = small_trainer(1, "sim-gpu");
  gpu.save(s.path("from-gpu"));
  Trainer cpu = small_trainer(2);
  cpu.load(s.path("from-gpu"));
  for (const auto& name : gpu.parameter_names())
    EXPECT_EQ(bytes_of(cpu.parameter(name)), bytes_of(gpu.parameter(name))) << name;
  Trainer other = small_trainer(3);
  other.save(s.path("from-cpu"));
  gpu.load(s.path("from-cpu"));
  for (const auto& name : gpu.parameter_names())
    EXPECT_EQ(bytes_of(gpu.parameter(name)), bytes_of(other.parameter(name))) << name;
  EXPECT_NE(bytes_of(cpu.parameter(cpu.parameter_names()[0])),
            bytes_of(other.parameter(other.parameter_names()[0])));
}

TEST(Checkpoint, SaveWhereNoFolderCanBeIsAnIoError) {
  ScratchDir s;
  write_text(s.path("file"), "not a folder");
  Trainer t = small_trainer(1);
  EXPECT_THROW(t.save(s.path("file/ck")), IoError);
  EXPECT_THROW(t.save(s.path("file")), IoError);  // an existing file where the folder should go
  EXPECT_THROW(t.save("."), InvalidArgument);
  fs::create_directories(s.path("mine"));
  write_text(s.path("mine/notes.txt"), "keep me");
  EXPECT_THROW(t.save(s.path("mine")),
               InvalidArgument);  // save replaces whole folders: not this one
  EXPECT_TRUE(fs::exists(s.path("mine/notes.txt")));
}

TEST(Safetensors, HeaderCannotMakeTheReaderAllocateWhatTheFileLacks) {
  ScratchDir s;
  auto dev = devices::make_cpu_device(1);
  memory::DeviceAllocator alloc(*dev);
  const BadHeader cases[] = {
      // 2^40 floats claimed, 8 bytes present: refused before a 4 TiB allocation is tried.
      {R"({"x": {"dtype": "F32", "shape": [1099511627776], "data_offsets": [0, 4398046511104]}})",
       "outside the file"},
      // 2^32 * 2^32 elements wrap to 0 in 64 bits: a size check after the product would pass.
      {R"({"x": {"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 0]}})",
       "too large"},
      {R"({"x": {"dtype": "F64", "shape": [2305843009213693952], "data_offsets": [0, 0]}})",
       "too large"},
      {R"({"x": {"dtype": "F32", "shape": [-2, -2], "data_offsets": [0, 16]}})", "negative"},
      {R"({"x": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})", "needs 12"},
      {R"({"x": {"dtype": "F32", "shape": "big", "data_offsets": [0, 8]}})", "malformed header"},
      {R"([1, 2])", "not a JSON object"},
  };
  for (const BadHeader& c : cases) expect_refused(s.path("t.safetensors"), c, 8, alloc);
  EXPECT_EQ(alloc.stats().live_bytes, 0);
}

TEST(Safetensors, TruncatedFileIsAnIoError) {
  ScratchDir s;
  auto dev = devices::make_cpu_device(1);
  memory::DeviceAllocator alloc(*dev);
  write_safetensors(s.path("t.safetensors"),
                    {{"x", Tensor::from<float>({4}, {1, 2, 3, 4}, alloc)}});
  fs::resize_file(s.path("t.safetensors"), fs::file_size(s.path("t.safetensors")) - 3);
  EXPECT_THROW(read_safetensors(s.path("t.safetensors"), alloc), IoError);
}

TEST(Safetensors, NamesThatAreNotUtf8AreAnInvalidArgument) {
  ScratchDir s;
  auto dev = devices::make_cpu_device(1);
  memory::DeviceAllocator alloc(*dev);
  EXPECT_THROW(
      write_safetensors(s.path("t.safetensors"), {{"\xff", Tensor::from<float>({1}, {1}, alloc)}}),
      InvalidArgument);
  EXPECT_TRUE(fs::is_empty(s.path(""))) << "a temporary was left behind";
}

TEST(Safetensors, ByteRangesMustTileTheDataSection) {
  ScratchDir s;
  auto dev = devices::make_cpu_device(1);
  memory::DeviceAllocator alloc(*dev);
  const BadHeader cases[] = {
      {R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
           "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
       "overlapping"},
      {R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
           "b": {"dtype": "F32", "shape": [1], "data_offsets": [8, 12]}})",
       "a hole"},
      {R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})", "trailing bytes"},
      {R"({"a": {"dtype": "I32", "shape": [1], "data_offsets": [2, 6]},
           "b": {"dtype": "BF16", "shape": [1], "data_offsets": [0, 2]},
           "c": {"dtype": "BF16", "shape": [3], "data_offsets": [6, 12]}})",
       "inside an element"},
  };
  for (const BadHeader& c : cases) expect_refused(s.path("t.safetensors"), c, 12, alloc);
  // The same tensors tiling the section are read.
  write_raw_safetensors(s.path("t.safetensors"),
                        R"({"b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]},
                            "a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})",
                        std::string(12, '\0'));
  EXPECT_EQ(read_safetensors(s.path("t.safetensors"), alloc).tensors.size(), 2u);
}

TEST(Safetensors, AFlippedBitFailsTheTensorsChecksum) {
  ScratchDir s;
  auto dev = devices::make_cpu_device(1);
  memory::DeviceAllocator alloc(*dev);
  const std::string path = s.path("t.safetensors");
  write_safetensors(path,
                    {{"a", Tensor::from<float>({2}, {1, 2}, alloc)},
                     {"b", Tensor::from<float>({3}, {3, 4, 5}, alloc)}},
                    {{"note", "kept"}});
  TensorFile good = read_safetensors(path, alloc);
  EXPECT_EQ(good.metadata, (std::map<std::string, std::string>{{"note", "kept"}}))
      << "the checksums are the reader's business, not the caller's";
  const auto size = fs::file_size(path);
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(static_cast<std::streamoff>(size) - 2);  // inside b, the last tensor
  f.put('\x40');
  f.close();
  try {
    read_safetensors(path, alloc);
    FAIL() << "a file with a flipped bit was read";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("tensor `b` fails its checksum"), std::string::npos)
        << e.what();
  }
}

TEST(Tensor, CountsNanAndInfiniteElementsOfEveryFloatType) {
  auto dev = devices::make_cpu_device(1);
  memory::DeviceAllocator alloc(*dev);
  const float inf = std::numeric_limits<float>::infinity(), nan = std::nanf("");
  const float max = std::numeric_limits<float>::max();
  EXPECT_EQ(Tensor::from<float>({5}, {1, inf, -inf, nan, max}, alloc).count_nonfinite(), 3);
  EXPECT_EQ(Tensor::from<double>({3}, {1e308, -std::numeric_limits<double>::infinity(), 0}, alloc)
                .count_nonfinite(),
            1);
  // bf16 0x7f80 is +inf, 0xff81 a NaN, 0x7f7f the largest finite; f16 0x7c00 is +inf, 0x7bff
  // the largest finite.
  Tensor bf16 = Tensor::empty(DType::kBF16, {3}, alloc),
         f16 = Tensor::empty(DType::kF16, {2}, alloc);
  const uint16_t bf16_bits[] = {0x7f80, 0xff81, 0x7f7f}, f16_bits[] = {0x7c00, 0x7bff};
  bf16.upload(bf16_bits), f16.upload(f16_bits);
  EXPECT_EQ(bf16.count_nonfinite(), 2);
  EXPECT_EQ(f16.count_nonfinite(), 1);
  EXPECT_EQ(Tensor::from<int32_t>({1}, {-1}, alloc).count_nonfinite(), 0);
}

// A NaN in a checkpoint is not a state to train from, even when its checksum holds (a tool that
// rewrote the file, or a run before checksums).
TEST(Checkpoint, NanOrInfinityInACheckpointIsRefusedAndChangesNothing) {
  ScratchDir s;
  Trainer a = small_trainer(1), b = small_trainer(2);
  a.save(s.path("ck"));
  memory::Allocator& alloc = b.allocator();
  TensorFile file = read_safetensors(s.path("ck/state.safetensors"), alloc);
  const std::string name = file.tensors.begin()->first;
  Tensor& t = file.tensors[name];
  std::vector<float> v = t.to_vector<float>();
  v[v.size() / 2] = std::numeric_limits<float>::infinity();
  t.upload(v.data());
  write_safetensors(s.path("ck/state.safetensors"), file.tensors, file.metadata);
  const std::vector<char> before = bytes_of(b.parameter(name));
  try {
    b.load(s.path("ck"));
    FAIL() << "a checkpoint holding infinity loaded";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("1 NaN or infinite values in `" + name + "`"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(bytes_of(b.parameter(name)), before);
}

// A diverged run must not write its state over good checkpoints, however the NaN got in (a ReLU
// can hide one from the loss and the gradient norm); a load of a good one makes saving possible
// again.
TEST(Checkpoint, SaveRefusesAStateThatIsNotFinite) {
  ScratchDir s;
  Trainer t = small_trainer(1);
  const std::string w = t.parameter_names()[0];
  std::vector<float> v = t.parameter(w).to_vector<float>();
  t.save(s.path("good"));
  v[0] = std::nanf("");
  t.set_parameter(w, Tensor::from<float>(t.parameter(w).shape(), v, t.allocator()));
  try {
    t.save(s.path("bad"));
    FAIL() << "a NaN state was saved";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("`" + w + "` holds 1 NaN or infinite values"),
              std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(fs::exists(s.path("bad")));
  t.load(s.path("good"));
  EXPECT_NO_THROW(t.save(s.path("again")));
}

// A model whose only parameter is `w`, of `dtype`, initialised normal(0, 0.5).
ir::models::Model one_param(DType dtype) {
  ir::models::Model m;
  m.graph = std::make_unique<ir::Graph>("p");
  m.params.push_back(m.graph->add_argument("w", {dtype, {4, 8}}, ir::Role::kParameter));
  m.init["w"] = {ir::models::ParamInit::Kind::kNormal, 0.5};
  return m;
}

TEST(Init, F64ParametersGetF64ValuesFromTheSameDraws) {
  auto dev = devices::make_cpu_device(1);
  memory::DeviceAllocator alloc(*dev);
  Tensor d = init_params(one_param(DType::kF64), 9, alloc).at("w");
  Tensor f = init_params(one_param(DType::kF32), 9, alloc).at("w");
  ASSERT_EQ(d.dtype(), DType::kF64);
  ASSERT_EQ(d.shape(), (std::vector<int64_t>{4, 8}));
  int beyond_float = 0;
  for (int64_t i = 0; i < d.numel(); ++i) {
    EXPECT_EQ(static_cast<float>(d.data<double>()[i]), f.data<float>()[i]) << i;
    beyond_float += d.data<double>()[i] != static_cast<double>(f.data<float>()[i]);
  }
  EXPECT_GT(beyond_float, 0) << "the f64 values carry no more precision than f32";
}

TEST(Init, SymbolicShapesAreAClearError) {
  auto dev = devices::make_cpu_device(1);
  memory::DeviceAllocator alloc(*dev);
  ir::Graph g("step");
  g.shapes().add_symbol({"B", 1, 8});
  g.add_argument("m.w", {DType::kF32, {ir::DimExpr::symbol("B"), 4}}, ir::Role::kState);
  try {
    zero_state(g, alloc);
    FAIL() << "zero_state accepted a symbolic shape";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("`m.w` has the symbolic shape f32[B, 4]"),
              std::string::npos)
        << e.what();
  }
  ir::models::Model m = one_param(DType::kI32);  // bf16 and f16 are frozen weights' dtypes
  EXPECT_THROW(init_params(m, 1, alloc), InvalidArgument);
}

}  // namespace
}  // namespace disc::engine
