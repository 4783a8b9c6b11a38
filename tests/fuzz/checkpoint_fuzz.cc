// libFuzzer target for the checkpoint resume path (Trainer::load, what `disc-train run --resume`
// calls). An input is a checkpoint folder packed as 4 bytes (little-endian) N, N bytes of
// trainer.json, then state.safetensors. Any input must load or throw disc::Error; a refused one
// leaves the trainer's state as it was (all or nothing); a loaded one holds only finite values,
// the step it names, and saves again. The seed is the trainer's own checkpoint, packed by
// LLVMFuzzerInitialize into the corpus folder, so it follows the format as it changes.
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <vector>

#include "base/error.h"
#include "engine/trainer.h"
#include "ir/models/model.h"

namespace {

namespace fs = std::filesystem;

disc::engine::Trainer& trainer() {
  static disc::engine::Trainer t = [] {
    disc::ir::models::MlpConfig c;
    c.in = 4, c.classes = 3, c.hidden = {3}, c.max_batch = 2;
    disc::engine::TrainerOptions o;
    o.threads = 1, o.jit = false;
    return disc::engine::Trainer(disc::ir::models::build_mlp(c), o);
  }();
  return t;
}

const fs::path& folder() {
  static const fs::path dir =
      fs::temp_directory_path() / ("disc-fuzz-" + std::to_string(::getpid()) + "-checkpoint");
  return dir;
}

std::map<std::string, std::vector<char>> state_bytes() {
  std::map<std::string, std::vector<char>> out;
  for (const std::string& name : trainer().parameter_names()) {
    const disc::engine::Tensor& t = trainer().parameter(name);
    out[name].resize(static_cast<size_t>(t.bytes()));
    t.download(out[name].data());
  }
  return out;
}

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write(const fs::path& p, const char* data, size_t size) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(data, static_cast<std::streamsize>(size));
  if (!out.flush()) __builtin_trap();  // the harness's own failure
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  // The corpus folder is the last argument that is not a flag.
  for (int i = *argc - 1; i > 0; --i) {
    if ((*argv)[i][0] == '-') continue;
    if (!fs::is_directory((*argv)[i])) break;
    const fs::path saved = folder() / "seed";
    trainer().save(saved.string(), {{"epoch", "0"}, {"position", "0"}});
    const std::string json = read(saved / "trainer.json"),
                      state = read(saved / "state.safetensors");
    const uint32_t n = static_cast<uint32_t>(json.size());
    char len[4];
    std::memcpy(len, &n, 4);
    write(fs::path((*argv)[i]) / "seed-checkpoint", (std::string(len, 4) + json + state).data(),
          4 + json.size() + state.size());
    fs::remove_all(saved);
    break;
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 4) return 0;
  uint32_t n = 0;
  std::memcpy(&n, data, 4);
  n = static_cast<uint32_t>(std::min<size_t>(n, size - 4));
  const fs::path dir = folder() / "ck";
  fs::create_directories(dir);
  write(dir / "trainer.json", reinterpret_cast<const char*>(data) + 4, n);
  write(dir / "state.safetensors", reinterpret_cast<const char*>(data) + 4 + n, size - 4 - n);
  const auto before = state_bytes();
  try {
    trainer().load(dir.string());
  } catch (const disc::Error&) {
    if (state_bytes() != before) __builtin_trap();  // a refused checkpoint changed the trainer
    return 0;
  }
  for (const std::string& name : trainer().parameter_names())
    if (trainer().parameter(name).count_nonfinite() != 0) __builtin_trap();
  if (trainer().steps_done() < 0) __builtin_trap();
  trainer().save((folder() / "again").string());  // what loads saves again
  return 0;
}
