#include "formats/onnx/weights.h"

#include <filesystem>

#include "base/error.h"
#include "base/finite.h"
#include "engine/durable_folder.h"
#include "formats/onnx/proto.h"
#include "formats/onnx/tensor_proto.h"

namespace disc::onnx {

void load_weights(const Imported& m, engine::Trainer& trainer) {
  for (const std::string& name : trainer.parameter_names()) {
    auto w = m.weights.find(name);
    if (w == m.weights.end()) continue;
    const engine::Tensor& p = trainer.parameter(name);
    trainer.set_parameter(name,
                          engine::Tensor::from<float>(p.shape(), w->second, trainer.allocator()));
  }
}

void export_weights(const std::string& source, const std::map<std::string, engine::Tensor>& params,
                    const std::string& out) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::equivalent(source, out, ec))
    throw InvalidArgument("export: " + out + " is the model it exports from; name another file");
  const std::string bytes = proto::read_file(source);
  const proto::Model m = proto::parse_model(bytes, source);
  if (!m.graph) throw InvalidArgument(source + ": the model has no graph");
  std::map<std::string, const engine::Tensor*> left;
  for (const auto& [name, t] : params) left[name] = &t;
  std::vector<std::pair<std::string, std::string>> raw;
  for (const proto::Tensor& init : m.graph->initializer) {
    auto p = left.find(init.name);
    if (p == left.end()) continue;
    if (dims_of(init) != p->second->shape())
      throw InvalidArgument("export: parameter " + init.name + " has another shape than " + source +
                            "'s initializer");
    const std::vector<float> values = p->second->to_vector<float>();
    const std::optional<DType> dtype = dtype_of(init.data_type);
    if (std::string why = dtype ? unrepresentable(values, *dtype) : ""; !why.empty())
      throw InvalidArgument("export: cannot write `" + init.name + "` as " +
                            std::string(dtype_name(*dtype)) + " (" + source + "'s type): " + why +
                            "; nothing was written");
    raw.emplace_back(init.name, raw_float_data(init.data_type, values));
    left.erase(p);
  }
  if (!left.empty())
    throw InvalidArgument("export: " + source + " has no initializer `" + left.begin()->first +
                          "` (export into the model the run imported)");
  const std::string serialized = proto::replace_initializer_data(bytes, raw, source);
  fs::path target(out),
      staging = target.parent_path() / ("." + target.filename().string() + ".partial");
  engine::write_text_durably(staging.string(), serialized);
  fs::rename(staging, target, ec);
  if (ec) {
    fs::remove(staging);
    throw IoError("export: cannot put " + out + " in place: " + ec.message());
  }
}

}  // namespace disc::onnx
