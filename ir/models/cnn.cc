// Small CNN classifier over NCHW images: per stage a 3x3 convolution (padding 1), ReLU and 2x2
// max pooling; then flatten, a linear head and cross-entropy.
#include "base/error.h"
#include "ir/models/model.h"
#include "ir/nn.h"

namespace disc::ir::models {

Model build_cnn(const CnnConfig& c) {
  Model m;
  m.graph = std::make_unique<Graph>("cnn");
  Graph& g = *m.graph;
  g.shapes().add_symbol({"B", 1, c.max_batch, 1, std::nullopt});
  DimExpr B = DimExpr::symbol("B");
  Value* x =
      g.add_argument("images", {DType::kF32, {B, c.channels, c.image, c.image}}, Role::kInput);
  Value* labels = g.add_argument("labels", {DType::kI32, {B}}, Role::kInput);
  ParamInit normal{ParamInit::Kind::kNormal, c.init_std}, zeros{ParamInit::Kind::kZeros};
  int64_t channels = c.channels, size = c.image;
  for (size_t i = 0; i < c.conv_channels.size(); ++i) {
    if (size % 2 != 0)
      throw InvalidArgument("cnn: image size " + std::to_string(size) +
                            " is odd before pooling stage " + std::to_string(i));
    int64_t out = c.conv_channels[i];
    std::string p = "conv" + std::to_string(i);
    Value* w = add_param(m, p + ".w", {out, channels, 3, 3}, normal);
    Value* b = add_param(m, p + ".b", {out}, zeros);
    Value* y = g.add("conv2d", {x, w}, {{"padding", std::vector<int64_t>{1, 1}}});
    y = g.add("add", {y, g.add("broadcast", {b},
                               {{"shape", y->shape()}, {"dims", std::vector<int64_t>{1}}})});
    x = g.add("max_pool2d", {g.add("relu", {y})},
              {{"kernel", std::vector<int64_t>{2, 2}}, {"stride", std::vector<int64_t>{2, 2}}});
    channels = out;
    size /= 2;
  }
  int64_t flat = channels * size * size;
  x = g.add("reshape", {x}, {{"shape", std::vector<DimExpr>{B, flat}}});
  Value* w = add_param(m, "head.w", {flat, c.classes}, normal);
  Value* b = add_param(m, "head.b", {c.classes}, zeros);
  x = nn::linear(g, x, w, b);
  m.loss = nn::cross_entropy(g, x, labels);
  g.add_output("logits", x);
  return m;
}

}  // namespace disc::ir::models
