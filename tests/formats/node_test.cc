// ONNX's own backend node tests (Debian's libonnx-testdata: one small model per op and case, with
// inputs and expected outputs written by ONNX's reference implementation), run through disc's
// importer and executor: a suite nobody here wrote. Every test whose model imports must give its
// outputs within ONNX's default tolerance (|got - want| <= 1e-7 + 1e-3 |want|); the others are
// counted and printed by reason (an op disc does not import, an opset outside 13-17, a dtype).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "base/half.h"
#include "devices/device.h"
#include "engine/executor.h"
#include "formats/onnx/import.h"
#include "formats/onnx/proto.h"
#include "formats/onnx/tensor_proto.h"
#include "ir/binding.h"

namespace disc::onnx {
namespace {

namespace fs = std::filesystem;

const fs::path kNodeTests = "/usr/share/libonnx-testdata/data/node";

std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

proto::Tensor read_tensor(const fs::path& p) {
  return proto::parse_tensor(read_file(p), p.string());
}

engine::Tensor to_tensor(const proto::Tensor& t, memory::Allocator& alloc) {
  auto type = dtype_of(t.data_type);
  if (!type) throw InvalidArgument("a tensor of " + onnx_type_name(t.data_type));
  std::vector<int64_t> shape = dims_of(t);
  if (is_half_float(*type)) {
    std::vector<float> f = float_values(t);
    std::vector<uint16_t> bits(f.size());
    f32_to_half(*type, f.data(), bits.data(), static_cast<int64_t>(f.size()));
    engine::Tensor h = engine::Tensor::empty(*type, shape, alloc);
    h.upload(bits.data());
    return h;
  }
  if (*type == DType::kF32) return engine::Tensor::from<float>(shape, float_values(t), alloc);
  Known k = known_of(t, int64_t{1} << 24);
  std::vector<double> v;
  for (const Scalar& s : k.elements) v.push_back(*s.number());
  switch (*type) {
    case DType::kF64:
      return engine::Tensor::from<double>(shape, v, alloc);
    case DType::kI64:
      return engine::Tensor::from<int64_t>(shape, {v.begin(), v.end()}, alloc);
    case DType::kI32:
      return engine::Tensor::from<int32_t>(shape, {v.begin(), v.end()}, alloc);
    default:
      return engine::Tensor::from<bool>(shape, {v.begin(), v.end()}, alloc);
  }
}

// Elements as doubles, whatever the dtype.
std::vector<double> values(const engine::Tensor& t) {
  std::vector<uint8_t> raw(t.bytes());
  t.download(raw.data());
  std::vector<double> out(t.numel());
  for (int64_t i = 0; i < t.numel(); ++i) {
    auto at = [&](auto v) {
      std::memcpy(&v, raw.data() + i * sizeof(v), sizeof(v));
      return v;
    };
    switch (t.dtype()) {
      case DType::kF32:
        out[i] = at(float{});
        break;
      case DType::kF64:
        out[i] = at(double{});
        break;
      case DType::kI32:
        out[i] = at(int32_t{});
        break;
      case DType::kI64:
        out[i] = static_cast<double>(at(int64_t{}));
        break;
      case DType::kBool:
        out[i] = at(uint8_t{});
        break;
      default: {
        uint16_t bits = at(uint16_t{});
        float f;
        half_to_f32(t.dtype(), &bits, &f, 1);
        out[i] = f;
      }
    }
  }
  return out;
}

// "" when `got` matches `want`, else what differs.
std::string compare(const engine::Tensor& got, const engine::Tensor& want) {
  if (got.shape() != want.shape()) return "shape " + got.describe() + ", want " + want.describe();
  if (got.dtype() != want.dtype()) return "dtype " + got.describe() + ", want " + want.describe();
  auto g = values(got), w = values(want);
  for (size_t i = 0; i < g.size(); ++i) {
    bool both_nan = std::isnan(g[i]) && std::isnan(w[i]);
    if (!both_nan && !(std::abs(g[i] - w[i]) <= 1e-7 + 1e-3 * std::abs(w[i])))
      return "element " + std::to_string(i) + " is " + std::to_string(g[i]) + ", want " +
             std::to_string(w[i]);
  }
  return "";
}

struct Outcome {
  std::string skipped;  // why it was not run
  std::string failed;   // what differed
};

Outcome run_case(const fs::path& dir, memory::Allocator& alloc) {
  ImportOptions o;
  o.int64_inputs_as_i32 = false;  // the test data feeds int64 inputs as int64
  Imported m;
  try {
    m = import_bytes(read_file(dir / "model.onnx"), dir.filename().string(), o);
  } catch (const Error& e) {
    return {e.what(), ""};
  }
  for (const auto& set : fs::directory_iterator(dir)) {
    if (!set.is_directory()) continue;
    std::map<std::string, engine::Tensor> args;
    try {
      for (size_t i = 0; i < m.inputs.size(); ++i)
        args[m.inputs[i]] =
            to_tensor(read_tensor(set.path() / ("input_" + std::to_string(i) + ".pb")), alloc);
    } catch (const Error& e) {
      return {std::string("test data: ") + e.what() + " (ONNX 1.12 stores bfloat16 data so)", ""};
    }
    try {
      for (const auto& [name, w] : m.weights) {
        const ir::Value& p = *m.graph->find_value(name);
        args[name] = engine::Tensor::from<float>(ir::concrete_shape(*m.graph, p, {}), w, alloc);
      }
      engine::Executor ex(*m.graph, alloc);
      auto out = ex.run(args);
      for (size_t i = 0; i < m.outputs.size(); ++i) {
        engine::Tensor want;
        try {
          want =
              to_tensor(read_tensor(set.path() / ("output_" + std::to_string(i) + ".pb")), alloc);
        } catch (const Error& e) {
          return {std::string("test data: ") + e.what() + " (ONNX 1.12 stores bfloat16 data so)",
                  ""};
        }
        std::string diff = compare(out.at(m.outputs[i]), want);
        if (!diff.empty()) return {"", "output " + m.outputs[i] + ": " + diff};
      }
    } catch (const Error& e) {
      return {"", e.what()};
    }
  }
  return {};
}

// The reason's gist, for counting: the message without the case's name and the node's.
std::string reason(std::string why) {
  if (auto at = why.find("): "); at != std::string::npos)
    why = why.substr(at + 3);
  else if (auto colon = why.find(": "); colon != std::string::npos)
    why = why.substr(colon + 2);
  if (auto list = why.find("; it imports"); list != std::string::npos) why = why.substr(0, list);
  if (auto opset = why.find("; disc imports opsets"); opset != std::string::npos)
    why = why.substr(0, opset);
  return why.size() > 110 ? why.substr(0, 107) + "..." : why;
}

// Cases that import but fail, each with why. One that passes fails the test: the list stays true.
const std::map<std::string, std::string> kKnownFailures = {
    {"test_gather_negative_indices",
     "negative indices in a tensor at run time (disc's gather takes 0 <= index < rows; "
     "constant negative indices are imported)"},
};

TEST(OnnxNodeTests, EveryImportedModelMatchesOnnxsReference) {
  if (!fs::exists(kNodeTests))
    GTEST_SKIP() << kNodeTests << " is missing: install libonnx-testdata";
  auto dev = devices::make_cpu_device(2);
  memory::DeviceAllocator alloc{*dev};
  std::vector<fs::path> cases;
  for (const auto& d : fs::directory_iterator(kNodeTests)) cases.push_back(d.path());
  std::sort(cases.begin(), cases.end());
  int passed = 0;
  std::map<std::string, std::vector<std::string>> skipped;
  for (const fs::path& dir : cases) {
    Outcome o = run_case(dir, alloc);
    const std::string name = dir.filename().string();
    const bool known = kKnownFailures.contains(name);
    if (!o.skipped.empty()) {
      skipped[reason(o.skipped)].push_back(name);
    } else if (!o.failed.empty()) {
      if (known) {
        skipped["known failure: " + kKnownFailures.at(name)].push_back(name);
      } else {
        ADD_FAILURE() << name << ": " << o.failed;
      }
    } else {
      EXPECT_FALSE(known) << name << " passes now: take it off kKnownFailures";
      ++passed;
    }
  }
  size_t skips = 0;
  for (const auto& [why, names] : skipped) skips += names.size();
  std::printf("ONNX node tests: %zu, imported and passed %d, skipped %zu:\n", cases.size(), passed,
              skips);
  for (const auto& [why, names] : skipped) {
    std::printf("  %4zu  %s (%s%s)\n", names.size(), why.c_str(), names[0].c_str(),
                names.size() > 1 ? ", ..." : "");
  }
  EXPECT_GT(passed, 0);
}

}  // namespace
}  // namespace disc::onnx
