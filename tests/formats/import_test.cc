// The importer on models built here (ONNX protobufs written in the test): shape arithmetic that
// folds into symbolic dims, bad input refused with one line that names what and where, and the
// imported llama compiling to disc's own llama's kernels and memory lower bound.
#include "formats/onnx/import.h"

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cctype>
#include <cmath>

#include "devices/device.h"
#include "engine/pipeline.h"
#include "engine/safetensors.h"
#include "engine/trainer.h"
#include "formats/onnx/weights.h"
#include "ir/binding.h"
#include "ir/models/model.h"
#include "ir/text_format.h"
#include "memory/governor.h"
#include "reference_steps.h"

namespace disc::onnx {
namespace {

const std::string kModels = std::string(DISC_TEST_DATA_DIR) + "/reference/";

// A model under construction: inputs, initializers and nodes in the default domain.
class ModelBuilder {
 public:
  explicit ModelBuilder(int64_t opset = 17) {
    m_.set_ir_version(8);
    auto* o = m_.add_opset_import();
    o->set_domain("");
    o->set_version(opset);
  }
  // An input of `type` whose dims are sizes or, as strings, dim_params.
  ModelBuilder& input(const std::string& name, const std::vector<std::string>& dims,
                      int type = ::onnx::TensorProto::FLOAT) {
    auto* tt = g().add_input()->mutable_type()->mutable_tensor_type();
    g().mutable_input(g().input_size() - 1)->set_name(name);
    tt->set_elem_type(type);
    for (const std::string& d : dims) {
      auto* dim = tt->mutable_shape()->add_dim();
      if (!d.empty() && std::isdigit(static_cast<unsigned char>(d[0]))) {
        dim->set_dim_value(std::stoll(d));
      } else {
        dim->set_dim_param(d);
      }
    }
    return *this;
  }
  ModelBuilder& ints(const std::string& name, const std::vector<int64_t>& v) {
    auto* t = g().add_initializer();
    t->set_name(name);
    t->set_data_type(::onnx::TensorProto::INT64);
    t->add_dims(static_cast<int64_t>(v.size()));
    for (int64_t x : v) t->add_int64_data(x);
    return *this;
  }
  ModelBuilder& floats(const std::string& name, const std::vector<float>& v) {
    auto* t = g().add_initializer();
    t->set_name(name);
    t->set_data_type(::onnx::TensorProto::FLOAT);
    t->add_dims(static_cast<int64_t>(v.size()));
    for (float x : v) t->add_float_data(x);
    return *this;
  }
  ModelBuilder& node(const std::string& op, const std::vector<std::string>& in,
                     const std::vector<std::string>& out) {
    auto* n = g().add_node();
    n->set_op_type(op);
    n->set_name(op + "_" + std::to_string(g().node_size()));
    for (const auto& i : in) n->add_input(i);
    for (const auto& o : out) n->add_output(o);
    return *this;
  }
  ModelBuilder& output(const std::string& name) {
    g().add_output()->set_name(name);
    return *this;
  }
  // An output with a declared float type of these sizes.
  ModelBuilder& output(const std::string& name, const std::vector<int64_t>& dims) {
    auto* o = g().add_output();
    o->set_name(name);
    auto* tt = o->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(::onnx::TensorProto::FLOAT);
    for (int64_t d : dims) tt->mutable_shape()->add_dim()->set_dim_value(d);
    return *this;
  }
  std::string bytes() const { return m_.SerializeAsString(); }
  Imported import(const ImportOptions& o = {}) const { return import_bytes(bytes(), "m.onnx", o); }

 private:
  ::onnx::GraphProto& g() { return *m_.mutable_graph(); }
  ::onnx::ModelProto m_;
};

std::string import_error(const ModelBuilder& b, const ImportOptions& o = {}) {
  try {
    b.import(o);
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "(imported)";
}

TEST(OnnxImport, ShapeArithmeticFoldsIntoSymbolicDims) {
  // y = reshape(x, concat(shape(x)[0] * shape(x)[1], -1)): [batch, seq, 16] -> [batch*seq, 16],
  // then back through Shape of x: the graph keeps two reshapes and no shape nodes.
  ModelBuilder b;
  b.input("x", {"batch", "seq", "16"})
      .ints("zero", {0})
      .ints("one", {1})
      .ints("minus_one", {-1})
      .node("Shape", {"x"}, {"s"})
      .node("Gather", {"s", "zero"}, {"b"})
      .node("Gather", {"s", "one"}, {"q"})
      .node("Mul", {"b", "q"}, {"rows"})
      .node("Concat", {"rows", "minus_one"}, {"target"})
      .node("Reshape", {"x", "target"}, {"flat"})
      .node("Reshape", {"flat", "s"}, {"y"})
      .output("y");
  Imported m = b.import({.bounds = {{"seq", 512}}});
  std::string text = ir::print_graph(*m.graph);
  EXPECT_NE(text.find("sym batch in [1, 4096]"), std::string::npos) << text;
  EXPECT_NE(text.find("sym seq in [1, 512]"), std::string::npos) << text;
  EXPECT_NE(text.find("reshape(%x) {shape = [batch*seq, 16]}"), std::string::npos) << text;
  EXPECT_EQ(m.graph->num_nodes(), 2u) << text;
  EXPECT_EQ(m.graph->outputs().at(0).second->type().str(), "f32[batch, seq, 16]");
}

TEST(OnnxImport, ComputedShapesThatCannotFoldNameTheNode) {
  ModelBuilder b;
  b.input("x", {"batch", "4"}).input("shape", {"2"}, ::onnx::TensorProto::INT64);
  b.node("Reshape", {"x", "shape"}, {"y"}).output("y");
  EXPECT_EQ(import_error(b),
            "m.onnx: node `Reshape_1` (Reshape, opset 17): the target shape (input 1, `shape`) "
            "must be known at import: a constant, or shape arithmetic on Shape; here it is "
            "computed from tensor values");
}

TEST(OnnxImport, UnsupportedOpNamesNodeOpOpsetAndWhatIsSupported) {
  ModelBuilder b(15);
  b.input("x", {"batch", "4"}).node("ArgMax", {"x"}, {"y"}).output("y");
  std::string e = import_error(b);
  EXPECT_EQ(e.rfind("m.onnx: node `ArgMax_1` (ArgMax, opset 15): disc does not import ArgMax at "
                    "opset 15; it imports Abs, Add, And, Cast, CastLike, Ceil, Concat, ",
                    0),
            0u)
      << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  // CastLike came at opset 15: at 13 it is not on the list.
  ModelBuilder old(13);
  old.input("x", {"4"}).node("ArgMax", {"x"}, {"y"}).output("y");
  EXPECT_EQ(import_error(old).find("CastLike"), std::string::npos);
}

TEST(OnnxImport, OpsetsDtypesAndMalformedFilesAreRefused) {
  ModelBuilder old(11);
  old.input("x", {"4"}).node("Relu", {"x"}, {"y"}).output("y");
  EXPECT_EQ(import_error(old),
            "m.onnx: opset 11; disc imports opsets 13 to 17 (export again with "
            "opset_version=17)");
  ModelBuilder bytes;
  bytes.input("x", {"4"}, ::onnx::TensorProto::UINT8).node("Relu", {"x"}, {"y"}).output("y");
  EXPECT_EQ(import_error(bytes),
            "m.onnx: input `x` holds uint8, which disc does not import (float, double, float16, "
            "bfloat16, int32, int64, bool)");
  ModelBuilder dangling;
  dangling.input("x", {"4"}).node("Relu", {"z"}, {"y"}).output("y");
  EXPECT_EQ(import_error(dangling),
            "m.onnx: node `Relu_1` (Relu, opset 17): reads `z`, which no "
            "earlier node, input or initializer makes");
  ModelBuilder unnamed;
  unnamed.input("x", {"4", ""}).node("Relu", {"x"}, {"y"}).output("y");
  EXPECT_NE(import_error(unnamed).find("dim 1 has neither a size nor a name"), std::string::npos);
  EXPECT_THROW(import_bytes("\x08\x96\x01garbage\xff\xff", "g.onnx"), InvalidArgument);
  EXPECT_THROW(import_bytes("", "empty.onnx"), InvalidArgument);
  EXPECT_THROW(import_file("/nonexistent/m.onnx"), IoError);
  // Past the importer's limits, refused before anything is sized by the file.
  ModelBuilder wide;
  wide.input("x", {"B", "S"}).node("Relu", {"x"}, {"a"}).node("Relu", {"a"}, {"y"}).output("y");
  EXPECT_EQ(import_error(wide, {.max_nodes = 1}),
            "m.onnx: the graph has 2 nodes, more than the 1 disc imports "
            "(ImportOptions::max_nodes)");
  EXPECT_EQ(import_error(wide, {.max_symbols = 1}),
            "m.onnx: input `x` dim 1 names dim_param `S`, past the 1 distinct dim_params disc "
            "imports (ImportOptions::max_symbols)");
  // A duplicate initializer names the file and the initializer (it said `value %w is defined
  // twice`, in the text format's terms).
  ModelBuilder twice;
  twice.input("x", {"2"}).floats("w", {1, 2}).floats("w", {3, 4});
  twice.node("Add", {"x", "w"}, {"y"}).output("y");
  EXPECT_EQ(import_error(twice),
            "m.onnx: initializer `w` is defined twice (ONNX names each value once)");
  // A declared output shape the nodes contradict (it was ignored).
  ModelBuilder declared;
  declared.input("x", {"3", "4"}).node("Relu", {"x"}, {"y"}).output("y", {3, 5});
  EXPECT_EQ(import_error(declared),
            "m.onnx: graph output `y` is declared with dim 1 of size 5, but its nodes make "
            "f32[3, 4]: export the model again, or correct the output's shape");
  ModelBuilder agreed;
  agreed.input("x", {"3", "4"}).node("Relu", {"x"}, {"y"}).output("y", {3, 4});
  EXPECT_EQ(import_error(agreed), "(imported)");
  // A NaN or infinity in a weight: refused at import, naming it (the run "diverged at step 1").
  ModelBuilder nan;
  nan.input("x", {"2"}).floats("w", {1, std::nanf(""), INFINITY, 2});
  nan.node("Add", {"x", "w"}, {"y"}).output("y");
  EXPECT_EQ(import_error(nan),
            "m.onnx: initializer `w` holds 2 NaN or infinite values (the first at element 1): the "
            "file is damaged or was exported from a diverged run; export it again");
}

// A model with its own loss (a float scalar output named `loss`): that is the loss, and disc adds
// no targets. One step trains it.
TEST(OnnxImport, AModelsOwnLossOutputIsTheLoss) {
  ModelBuilder b;
  b.input("x", {"batch", "4"});
  b.node("MatMul", {"x", "w"}, {"y"}).node("Mul", {"y", "y"}, {"sq"});
  b.node("ReduceMean", {"sq"}, {"loss"}).output("loss").output("y");
  std::string bytes = b.bytes();
  ::onnx::ModelProto m;
  ASSERT_TRUE(m.ParseFromString(bytes));
  auto* w = m.mutable_graph()->add_initializer();
  w->set_name("w");
  w->set_data_type(::onnx::TensorProto::FLOAT);
  w->add_dims(4), w->add_dims(4);
  for (int i = 0; i < 16; ++i) w->add_float_data(i % 5 == 0 ? 1.0f : 0.25f);
  auto* keep = m.mutable_graph()->mutable_node(2)->add_attribute();
  keep->set_name("keepdims"), keep->set_type(::onnx::AttributeProto::INT), keep->set_i(0);
  Imported imported = import_bytes(m.SerializeAsString(), "loss.onnx");
  ir::models::Model model = language_model(imported);
  EXPECT_EQ(model.loss->producer()->op().name, "reduce_mean");
  EXPECT_EQ(model.graph->find_value("targets"), nullptr);
  ASSERT_EQ(model.params.size(), 1u);
  engine::Trainer t(std::move(model), {.threads = 1});
  load_weights(imported, t);
  EXPECT_EQ(t.input_names(), std::vector<std::string>{"x"});
  engine::Batch batch = {
      {"x", engine::Tensor::from<float>({3, 4}, std::vector<float>(12, 0.5f), t.allocator())}};
  const float first = t.step(batch, 0.1).loss, second = t.step(batch, 0.1).loss;
  EXPECT_FLOAT_EQ(first, 0.875f * 0.875f);  // each y = 0.5 * (1 + 3 * 0.25)
  EXPECT_LT(second, first);
}

// The imported llama after the compile pipeline (the layers pass among its stages) against disc's
// own llama of the same sizes and weights: the same number of fused kernels, the same memory lower
// bound at the largest batch, and the same loss.
TEST(OnnxImport, LlamaCompilesToDiscsOwnLlamasKernelsAndLowerBound) {
  auto dev = devices::make_cpu_device(1);
  memory::DeviceAllocator alloc{*dev};
  engine::TensorFile ref = engine::read_safetensors(kModels + "llama.safetensors", alloc);
  ImportOptions o;
  o.inputs = {{"tokens", {4, 64}}};
  Imported imported = import_file(kModels + "llama.onnx", o);
  engine::Trainer onnx(language_model(imported), {.threads = 1});
  load_weights(imported, onnx);

  ir::models::LlamaConfig c{.vocab = 32,
                            .hidden = 16,
                            .layers = 2,
                            .heads = 4,
                            .kv_heads = 2,
                            .ffn = 24,
                            .max_batch = 4,
                            .max_seq = 64};
  engine::Trainer own(ir::models::build_llama(c), {.threads = 1});
  for (const std::string& p : own.parameter_names())
    own.set_parameter(p, ref.tensors.at("param." + p));

  EXPECT_EQ(onnx.compiled().fusion->groups.size(), own.compiled().fusion->groups.size());
  auto lower_bound = [](engine::Trainer& t) {
    ir::Bindings b = t.largest_shape();
    return t.governor().lower_bound(b, t.bytes_held_for(b));
  };
  EXPECT_EQ(lower_bound(onnx), lower_bound(own));
  const engine::Batch batch = engine::reference_batch(ref, {"tokens", "targets"}, alloc);
  EXPECT_EQ(onnx.step(batch, 0.0).loss, own.step(batch, 0.0).loss);
}

TEST(OnnxImport, ExportWritesTrainedWeightsIntoTheInitializers) {
  auto dev = devices::make_cpu_device(1);
  memory::DeviceAllocator alloc{*dev};
  Imported imported = import_file(kModels + "gpt2.onnx");
  std::map<std::string, engine::Tensor> params;
  for (const auto& [name, w] : imported.weights) {
    std::vector<float> changed = w;
    for (float& v : changed) v = v * 2 + 1;
    const ir::Value& p = *imported.graph->find_value(name);
    params[name] =
        engine::Tensor::from<float>(ir::concrete_shape(*imported.graph, p, {}), changed, alloc);
  }
  const std::string out = ::testing::TempDir() + "/gpt2_trained.onnx";
  export_weights(kModels + "gpt2.onnx", params, out);
  Imported again = import_file(out);
  ASSERT_EQ(again.weights.size(), params.size());
  for (const auto& [name, t] : params) EXPECT_EQ(again.weights.at(name), t.to_vector<float>());
  EXPECT_EQ(ir::print_graph(*again.graph),
            ir::print_graph(*import_file(kModels + "gpt2.onnx").graph));
  EXPECT_THROW(export_weights(kModels + "gpt2.onnx", params, kModels + "gpt2.onnx"),
               InvalidArgument);
  params.erase(params.begin());
  params["not_there"] = engine::Tensor::from<float>({1}, {0.0f}, alloc);
  EXPECT_THROW(export_weights(kModels + "gpt2.onnx", params, out), InvalidArgument);
}

}  // namespace
}  // namespace disc::onnx
