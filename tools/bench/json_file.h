// The benchmarks' --json output: one JSON document per file, for tools/bench/bench_all.py and
// for anyone comparing runs.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace disc::bench {

// Writes `j` indented to `path`; throws IoError naming the path when it cannot.
void write_json(const std::string& path, const nlohmann::json& j);

}  // namespace disc::bench
