// disc's decoder of ONNX's protobuf messages (formats/onnx/proto.h) against the two things it
// stands in for: libonnx-dev's onnx.proto (every field number it reads is the schema's) and
// libprotobuf's encoder (messages written by the generated ONNX classes decode to the same values,
// packed and unpacked; a rewritten model parses again with libprotobuf, every other field
// unchanged).
#include "formats/onnx/proto.h"

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cstring>
#include <fstream>
#include <sstream>

#include "base/error.h"

namespace disc::onnx {
namespace {

// The text of `message NAME { ... }` in onnx.proto (nested messages included in their parent's).
std::string message_block(const std::string& schema, const std::string& name) {
  const size_t at = schema.find("message " + name + " {");
  if (at == std::string::npos) return "";
  const size_t line = schema.rfind('\n', at) + 1;
  const std::string close = "\n" + schema.substr(line, at - line) + "}";
  return schema.substr(at, schema.find(close, at) - at);
}

TEST(OnnxProto, EveryFieldNumberReadIsOnnxProtos) {
  std::ifstream f("/usr/include/onnx/onnx.proto");
  if (!f) GTEST_SKIP() << "/usr/include/onnx/onnx.proto is missing: install libonnx-dev";
  std::stringstream s;
  s << f.rdbuf();
  const std::string schema = s.str();
  const std::vector<std::pair<std::string, std::vector<std::string>>> read = {
      {"ModelProto", {"graph = 7", "opset_import = 8"}},
      {"OperatorSetIdProto", {"domain = 1", "version = 2"}},
      {"GraphProto", {"node = 1", "name = 2", "initializer = 5", "input = 11", "output = 12"}},
      {"NodeProto",
       {"input = 1", "output = 2", "name = 3", "op_type = 4", "attribute = 5", "domain = 7"}},
      {"AttributeProto",
       {"name = 1", "f = 2", "i = 3", "s = 4", "t = 5", "floats = 7", "ints = 8", "type = 20",
        "FLOAT = 1", "INT = 2", "STRING = 3", "TENSOR = 4", "GRAPH = 5", "FLOATS = 6", "INTS = 7",
        "STRINGS = 8", "TENSORS = 9", "GRAPHS = 10"}},
      {"ValueInfoProto", {"name = 1", "type = 2"}},
      {"TypeProto", {"tensor_type = 1", "elem_type = 1", "shape = 2"}},
      {"TensorShapeProto", {"dim = 1", "dim_value = 1", "dim_param = 2"}},
      {"TensorProto",
       {"dims = 1",         "data_type = 2",    "float_data = 4",     "int32_data = 5",
        "string_data = 6",  "int64_data = 7",   "name = 8",           "raw_data = 9",
        "double_data = 10", "uint64_data = 11", "external_data = 13", "data_location = 14",
        "EXTERNAL = 1",     "FLOAT = 1",        "INT32 = 6",          "INT64 = 7",
        "BOOL = 9",         "FLOAT16 = 10",     "DOUBLE = 11",        "BFLOAT16 = 16"}},
  };
  for (const auto& [message, fields] : read) {
    const std::string block = message_block(schema, message);
    ASSERT_FALSE(block.empty()) << message;
    for (const std::string& field : fields)
      EXPECT_TRUE(block.find(" " + field + ";") != std::string::npos ||
                  block.find(" " + field + " [") != std::string::npos)  // [packed = true]
          << message << " has no `" << field << "` in onnx.proto";
  }
}

::onnx::ModelProto sample_model() {
  ::onnx::ModelProto m;
  m.set_ir_version(8);
  m.set_producer_name("kept as written");
  auto* o = m.add_opset_import();
  o->set_domain("");
  o->set_version(17);
  auto* g = m.mutable_graph();
  g->set_name("g");
  auto* in = g->add_input();
  in->set_name("x");
  auto* tt = in->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(::onnx::TensorProto::FLOAT);
  tt->mutable_shape()->add_dim()->set_dim_param("batch");
  tt->mutable_shape()->add_dim()->set_dim_value(16);
  auto* w = g->add_initializer();
  w->set_name("w");
  w->set_data_type(::onnx::TensorProto::FLOAT);
  w->add_dims(2);
  w->add_dims(3);
  for (float v : {1.5f, -2.0f, 0.0f, 3.25f, -0.5f, 7.0f}) w->add_float_data(v);
  w->set_doc_string("kept too");
  auto* ids = g->add_initializer();
  ids->set_name("ids");
  ids->set_data_type(::onnx::TensorProto::INT64);
  ids->add_dims(3);
  for (int64_t v : {int64_t{-1}, int64_t{0}, int64_t{1} << 40}) ids->add_int64_data(v);
  auto* n = g->add_node();
  n->set_op_type("Gemm");
  n->set_name("gemm");
  n->add_input("x");
  n->add_input("w");
  n->add_input("");  // an optional input left out
  n->add_output("y");
  auto* a = n->add_attribute();
  a->set_name("alpha");
  a->set_type(::onnx::AttributeProto::FLOAT);
  a->set_f(0.25f);
  auto* perm = n->add_attribute();
  perm->set_name("perm");
  perm->set_type(::onnx::AttributeProto::INTS);
  for (int64_t v : {int64_t{0}, int64_t{-2}, int64_t{1}}) perm->add_ints(v);
  g->add_output()->set_name("y");
  return m;
}

TEST(OnnxProto, DecodesWhatLibprotobufEncodes) {
  const ::onnx::ModelProto want = sample_model();
  const proto::Model m = proto::parse_model(want.SerializeAsString(), "m.onnx");
  ASSERT_EQ(m.opset_import.size(), 1u);
  EXPECT_EQ(m.opset_import[0].version, 17);
  ASSERT_TRUE(m.graph);
  const proto::Graph& g = *m.graph;
  EXPECT_EQ(g.name, "g");
  ASSERT_EQ(g.input.size(), 1u);
  EXPECT_TRUE(g.input[0].is_tensor && g.input[0].has_shape);
  EXPECT_EQ(g.input[0].elem_type, ::onnx::TensorProto::FLOAT);
  ASSERT_EQ(g.input[0].dims.size(), 2u);
  EXPECT_EQ(g.input[0].dims[0].param, "batch");
  EXPECT_FALSE(g.input[0].dims[0].value);
  EXPECT_EQ(g.input[0].dims[1].value, 16);
  ASSERT_EQ(g.initializer.size(), 2u);
  EXPECT_EQ(g.initializer[0].dims, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(g.initializer[0].float_data,
            (std::vector<float>{1.5f, -2.0f, 0.0f, 3.25f, -0.5f, 7.0f}));
  EXPECT_EQ(g.initializer[1].int64_data, (std::vector<int64_t>{-1, 0, int64_t{1} << 40}));
  ASSERT_EQ(g.node.size(), 1u);
  const proto::Node& n = g.node[0];
  EXPECT_EQ(n.input, (std::vector<std::string>{"x", "w", ""}));
  EXPECT_EQ(n.attribute[0].type, proto::Attribute::kFloat);
  EXPECT_EQ(n.attribute[0].f, 0.25f);
  EXPECT_EQ(n.attribute[1].ints, (std::vector<int64_t>{0, -2, 1}));
  EXPECT_EQ(g.output[0].name, "y");
}

TEST(OnnxProto, ReplacedInitializerDataParsesWithLibprotobufAndKeepsTheRest) {
  const ::onnx::ModelProto before = sample_model();
  std::string raw(6 * sizeof(float), '\0');
  const float values[6] = {9, 8, 7, 6, 5, 4};
  std::memcpy(raw.data(), values, sizeof(values));
  const std::string bytes =
      proto::replace_initializer_data(before.SerializeAsString(), {{"w", raw}}, "m.onnx");
  ::onnx::ModelProto after;
  ASSERT_TRUE(after.ParseFromString(bytes));
  const auto& w = after.graph().initializer(0);
  EXPECT_EQ(w.raw_data(), raw);
  EXPECT_EQ(w.float_data_size(), 0);
  EXPECT_EQ(w.doc_string(), "kept too");
  // Everything else as it was: the rewritten initializer set back gives the same message.
  ::onnx::ModelProto restored = after;
  restored.mutable_graph()->mutable_initializer(0)->clear_raw_data();
  for (float v : before.graph().initializer(0).float_data())
    restored.mutable_graph()->mutable_initializer(0)->add_float_data(v);
  EXPECT_EQ(restored.SerializeAsString(), before.SerializeAsString());
}

TEST(OnnxProto, MalformedBytesAreOneErrorNeverAReadPastTheEnd) {
  const std::string good = sample_model().SerializeAsString();
  int refused = 0;
  for (size_t cut = 0; cut < good.size(); ++cut) {  // every truncation
    try {
      proto::parse_model(good.substr(0, cut), "cut.onnx");
    } catch (const InvalidArgument& e) {
      ++refused;
      EXPECT_EQ(std::string(e.what()).rfind("cut.onnx: not a valid ONNX protobuf (", 0), 0u);
    }
  }
  EXPECT_GT(refused, 0);
  EXPECT_THROW(proto::parse_model(std::string("\x3a\xff\xff\xff\xff\x0f", 6), "m"),
               InvalidArgument);  // a length past the end
  EXPECT_THROW(proto::parse_model(std::string(11, '\xff'), "m"), InvalidArgument);  // long varint
  EXPECT_THROW(proto::parse_model("\x0b", "m"), InvalidArgument);  // wire type 3 (groups)
}

}  // namespace
}  // namespace disc::onnx
