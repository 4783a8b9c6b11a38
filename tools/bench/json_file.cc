#include "json_file.h"

#include <fstream>

#include "base/error.h"

namespace disc::bench {

void write_json(const std::string& path, const nlohmann::json& j) {
  std::ofstream out(path);
  out << j.dump(2) << "\n";
  if (!out) throw IoError("cannot write " + path + ": check the folder exists and is writable");
}

}  // namespace disc::bench
