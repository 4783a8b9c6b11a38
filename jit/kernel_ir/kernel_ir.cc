#include "jit/kernel_ir/kernel_ir.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <iomanip>
#include <sstream>

#include "base/error.h"
#include "base/hash.h"

namespace disc::jit {
namespace {

struct OpInfo {
  KOp op;
  std::string_view name;
  int arity;
};

constexpr std::array kOps = {
    OpInfo{KOp::kLoad, "load", 0},
    OpInfo{KOp::kStore, "store", 1},
    OpInfo{KOp::kConst, "const", 0},
    OpInfo{KOp::kLoadAt, "load_at", 1},
    OpInfo{KOp::kColIndex, "col_index", 0},
    OpInfo{KOp::kRowModCols, "row_mod_cols", 0},
    OpInfo{KOp::kNeg, "neg", 1},
    OpInfo{KOp::kAbs, "abs", 1},
    OpInfo{KOp::kExp, "exp", 1},
    OpInfo{KOp::kLog, "log", 1},
    OpInfo{KOp::kSqrt, "sqrt", 1},
    OpInfo{KOp::kRsqrt, "rsqrt", 1},
    OpInfo{KOp::kTanh, "tanh", 1},
    OpInfo{KOp::kSigmoid, "sigmoid", 1},
    OpInfo{KOp::kSilu, "silu", 1},
    OpInfo{KOp::kRelu, "relu", 1},
    OpInfo{KOp::kRoundBf16, "round_bf16", 1},
    OpInfo{KOp::kRoundF16, "round_f16", 1},
    OpInfo{KOp::kAdd, "add", 2},
    OpInfo{KOp::kSub, "sub", 2},
    OpInfo{KOp::kMul, "mul", 2},
    OpInfo{KOp::kDiv, "div", 2},
    OpInfo{KOp::kMax, "max", 2},
    OpInfo{KOp::kMin, "min", 2},
    OpInfo{KOp::kPow, "pow", 2},
    OpInfo{KOp::kEq, "eq", 2},
    OpInfo{KOp::kNe, "ne", 2},
    OpInfo{KOp::kLt, "lt", 2},
    OpInfo{KOp::kLe, "le", 2},
    OpInfo{KOp::kGt, "gt", 2},
    OpInfo{KOp::kGe, "ge", 2},
    OpInfo{KOp::kSelect, "select", 3},
    OpInfo{KOp::kReduceSum, "reduce_sum", 1},
    OpInfo{KOp::kReduceMax, "reduce_max", 1},
    OpInfo{KOp::kReduceLogSumExp, "reduce_logsumexp", 1},
    OpInfo{KOp::kSumRows, "sum_rows", 1},
    OpInfo{KOp::kCheckLabels, "check_labels", 1},
};

const OpInfo& info(KOp op) {
  return kOps[static_cast<size_t>(op)];
}

constexpr std::array<std::string_view, 4> kAccessNames = {"full", "row", "col", "scalar"};

[[noreturn]] void bad(int i, const std::string& what) {
  throw InvalidArgument("kernel IR, instruction " + std::to_string(i) + ": " + what);
}

// A sum_rows argument is a row value made of loads, constants and arithmetic: it can be
// evaluated for every row before the rows run.
void check_row_total(const KernelIR& k, int i, const std::vector<Level>& levels) {
  if (levels[k.code[i].args[0]] != Level::kRow) bad(i, "sum_rows sums a value that is not per row");
  std::vector<int> todo = {k.code[i].args[0]};
  while (!todo.empty()) {
    const Instr& in = k.code[todo.back()];
    todo.pop_back();
    if (is_reduction(in.op) || in.op == KOp::kSumRows)
      bad(i, "sum_rows sums a value made by a " + std::string(kop_name(in.op)) +
                 "; only loads and arithmetic may make it");
    todo.insert(todo.end(), in.args.begin(), in.args.end());
  }
}

// Checks one instruction's arguments, buffer and access against what came before.
void check_instr(const KernelIR& k, int i, const std::vector<Level>& levels,
                 std::vector<int>& stores) {
  const Instr& in = k.code[i];
  if (static_cast<int>(in.args.size()) != kop_arity(in.op))
    bad(i, "`" + std::string(kop_name(in.op)) + "` takes " + std::to_string(kop_arity(in.op)) +
               " arguments");
  for (size_t a = 0; a < in.args.size(); ++a) {
    int arg = in.args[a];
    if (arg < 0 || arg >= i)
      bad(i, "argument %" + std::to_string(arg) + " is not an earlier instruction");
    const KOp aop = k.code[arg].op;
    if (aop == KOp::kStore || aop == KOp::kCheckLabels)
      bad(i, "argument %" + std::to_string(arg) + " is a " + std::string(kop_name(aop)) +
                 ", which has no value");
    const bool wants_bool = in.op == KOp::kSelect && a == 0;
    if (is_compare(aop) != wants_bool)
      bad(i, "argument %" + std::to_string(arg) +
                 (wants_bool ? " must be a compare" : " is a bool; only select reads bools"));
  }
  if (in.op == KOp::kSumRows) check_row_total(k, i, levels);
  if (in.op == KOp::kCheckLabels && levels[in.args[0]] != Level::kScalar)
    bad(i, "checks a value that is not scalar");
  if (in.op == KOp::kLoadAt &&
      (in.access != Access::kFull || levels[in.args[0]] == Level::kElement))
    bad(i, "load_at takes full access and a column per row");
  if (!names_buffer(in.op)) return;
  if (in.buffer < 0 || in.buffer >= k.buffers())
    bad(i, "buffer " + std::to_string(in.buffer) + " out of range");
  const bool output = in.buffer >= k.inputs;
  if (in.op != KOp::kStore && output)
    bad(i, "loads from output buffer " + std::to_string(in.buffer));
  if (in.op == KOp::kStore) {
    if (!output) bad(i, "stores to input buffer " + std::to_string(in.buffer));
    // A store may broadcast a value of a lower level (a constant filling a tensor); col and
    // scalar stores may sum one of the next level over the rows.
    const Level want =
        in.access == Access::kFull || in.access == Access::kCol ? Level::kElement : Level::kRow;
    if (levels[in.args[0]] > want)
      bad(i, std::string("stores a value of a higher level with ") +
                 std::string(access_name(in.access)) + " access");
    if (++stores[in.buffer - k.inputs] > 1)
      bad(i, "output buffer " + std::to_string(in.buffer) + " is stored twice");
  }
}

int parse_ref(std::string_view tok, int line) {
  int v = -1;
  if (tok.size() < 2 || tok[0] != '%' ||
      std::from_chars(tok.data() + 1, tok.data() + tok.size(), v).ec != std::errc())
    bad(line, "expected %N, got `" + std::string(tok) + "`");
  return v;
}

Access parse_access(std::string_view tok, int line) {
  for (size_t a = 0; a < kAccessNames.size(); ++a)
    if (kAccessNames[a] == tok) return static_cast<Access>(a);
  bad(line, "unknown access `" + std::string(tok) + "` (full, row, col, scalar)");
}

// "kernel inputs=1 outputs=1 space=0 types=f32,f32"
void parse_header(const std::vector<std::string>& toks, KernelIR& k) {
  if (toks.empty() || toks[0] != "kernel")
    throw InvalidArgument("kernel IR: the first line must start with `kernel`");
  for (size_t t = 1; t < toks.size(); ++t) {
    auto eq = toks[t].find('=');
    std::string key = toks[t].substr(0, eq),
                val = eq == std::string::npos ? "" : toks[t].substr(eq + 1);
    if (key == "inputs")
      k.inputs = std::stoi(val);
    else if (key == "outputs")
      k.outputs = std::stoi(val);
    else if (key == "space")
      k.space = std::stoi(val);
    else if (key == "types") {
      std::stringstream ss(val);
      for (std::string ty; std::getline(ss, ty, ',');) {
        auto dt = parse_dtype(ty);
        if (!dt) throw InvalidArgument("kernel IR: unknown dtype `" + ty + "`");
        k.types.push_back(*dt);
      }
    } else {
      throw InvalidArgument("kernel IR: unknown header field `" + key + "`");
    }
  }
}

Instr parse_instr(const std::vector<std::string>& toks, int line) {
  Instr in;
  size_t t = 0;
  if (toks[0] != "store") {
    if (toks.size() < 3 || toks[1] != "=") bad(line, "expected `%N = op ...`");
    if (parse_ref(toks[0], line) != line)
      bad(line, "is numbered " + toks[0] + "; instructions are numbered in order");
    t = 2;
  }
  if (!kop_from_name(toks[t], in.op)) bad(line, "unknown op `" + toks[t] + "`");
  ++t;
  if (names_buffer(in.op)) {
    if (toks.size() < t + 2) bad(line, "expected a buffer and an access");
    in.buffer = std::stoi(toks[t]);
    in.access = parse_access(toks[t + 1], line);
    t += 2;
  } else if (in.op == KOp::kConst) {
    if (toks.size() != t + 1) bad(line, "expected one number");
    in.value = std::stod(toks[t++]);
  }
  for (; t < toks.size(); ++t) in.args.push_back(parse_ref(toks[t], line));
  return in;
}

}  // namespace

std::string_view access_name(Access a) {
  return kAccessNames[static_cast<size_t>(a)];
}
std::string_view kop_name(KOp op) {
  return info(op).name;
}
int kop_arity(KOp op) {
  return info(op).arity;
}
bool is_compare(KOp op) {
  return op >= KOp::kEq && op <= KOp::kGe;
}
bool names_buffer(KOp op) {
  return op == KOp::kLoad || op == KOp::kLoadAt || op == KOp::kStore;
}
bool is_expensive(KOp op) {
  return op == KOp::kExp || op == KOp::kLog || op == KOp::kTanh || op == KOp::kSigmoid ||
         op == KOp::kSilu || op == KOp::kPow || op == KOp::kSqrt || op == KOp::kRsqrt ||
         op == KOp::kDiv;
}
bool is_reduction(KOp op) {
  return op == KOp::kReduceSum || op == KOp::kReduceMax || op == KOp::kReduceLogSumExp;
}

bool kop_from_name(std::string_view name, KOp& op) {
  for (const OpInfo& o : kOps) {
    if (o.name == name) {
      op = o.op;
      return true;
    }
  }
  return false;
}

std::vector<std::vector<int>> KernelIR::in_place_table() const {
  // One pass over the code for every output at once: a fused node may have thousands of outputs.
  std::vector<int> last_use(inputs + outputs, -1), store(outputs, -1);
  std::vector<bool> own_index_only(inputs, true);
  for (int i = 0; i < static_cast<int>(code.size()); ++i) {
    const Instr& in = code[i];
    if (in.buffer < 0) continue;
    last_use[in.buffer] = i;
    if (in.buffer < inputs && !(in.op == KOp::kLoad && in.access == Access::kFull))
      own_index_only[in.buffer] = false;  // load_at reads another column: after its store in place
    if (in.op == KOp::kStore && in.access == Access::kFull && in.buffer >= inputs &&
        store[in.buffer - inputs] < 0)
      store[in.buffer - inputs] = i;
  }
  std::vector<std::vector<int>> table(outputs);
  for (int o = 0; o < outputs; ++o) {
    if (store[o] < 0) continue;
    for (int b = 0; b < inputs; ++b)
      if (types[b] == types[inputs + o] && own_index_only[b] && last_use[b] < store[o])
        table[o].push_back(b);
  }
  return table;
}

std::vector<int> KernelIR::in_place_inputs(int output) const {
  if (output < 0 || output >= outputs) return {};
  return in_place_table()[output];
}

std::vector<Level> KernelIR::levels() const {
  std::vector<Level> l(code.size(), Level::kScalar);
  for (size_t i = 0; i < code.size(); ++i) {
    const Instr& in = code[i];
    if (in.op == KOp::kLoad) {
      l[i] = in.access == Access::kScalar ? Level::kScalar
             : in.access == Access::kRow  ? Level::kRow
                                          : Level::kElement;
    } else if (in.op == KOp::kColIndex) {
      l[i] = Level::kElement;
    } else if (in.op == KOp::kRowModCols || in.op == KOp::kLoadAt) {
      l[i] = Level::kRow;
    } else if (is_reduction(in.op)) {
      l[i] = Level::kRow;
    } else if (in.op == KOp::kSumRows || in.op == KOp::kCheckLabels) {
      l[i] = Level::kScalar;
    } else {
      for (int a : in.args) l[i] = std::max(l[i], l[a]);
    }
  }
  return l;
}

void KernelIR::check() const {
  if (inputs < 0 || outputs < 1) throw InvalidArgument("kernel IR: needs at least one output");
  if (static_cast<int>(types.size()) != buffers())
    throw InvalidArgument("kernel IR: " + std::to_string(types.size()) + " buffer types for " +
                          std::to_string(buffers()) + " buffers");
  if (space < 0 || space >= buffers())
    throw InvalidArgument("kernel IR: space buffer " + std::to_string(space) + " out of range");
  for (int b = inputs; b < buffers(); ++b)
    if (types[b] != DType::kF32 && !is_half_float(types[b]))
      throw InvalidArgument("kernel IR: output buffer " + std::to_string(b) +
                            " is not f32, bf16 or f16");
  const std::vector<Level> l = levels();
  std::vector<int> stores(outputs, 0);
  for (int i = 0; i < static_cast<int>(code.size()); ++i) {
    check_instr(*this, i, l, stores);
    if (is_reduction(code[i].op) && l[code[i].args[0]] != Level::kElement)
      bad(i, "reduces a value that is not per element");
  }
  for (int o = 0; o < outputs; ++o)
    if (stores[o] == 0)
      throw InvalidArgument("kernel IR: output buffer " + std::to_string(inputs + o) +
                            " is never stored");
  for (int b : summed_stores())
    if (types[b] != DType::kF32)
      throw InvalidArgument("kernel IR: output buffer " + std::to_string(b) +
                            " sums over rows, so it must be f32");
}

std::string KernelIR::str() const {
  std::ostringstream s;
  s << std::setprecision(17) << "kernel inputs=" << inputs << " outputs=" << outputs
    << " space=" << space << " types=";
  for (size_t b = 0; b < types.size(); ++b) s << (b ? "," : "") << dtype_name(types[b]);
  for (size_t i = 0; i < code.size(); ++i) {
    const Instr& in = code[i];
    s << "\n";
    if (in.op != KOp::kStore) s << "%" << i << " = ";
    s << kop_name(in.op);
    if (names_buffer(in.op)) s << " " << in.buffer << " " << access_name(in.access);
    if (in.op == KOp::kConst) s << " " << in.value;
    for (int a : in.args) s << " %" << a;
  }
  return s.str();
}

KernelIR KernelIR::parse(std::string_view text) {
  KernelIR k;
  std::vector<std::vector<std::string>> lines;
  std::string line;
  for (char c : std::string(text) + "\n") {
    if (c != '\n' && c != ';') {
      line += c;
      continue;
    }
    std::stringstream ss(line);
    std::vector<std::string> toks;
    for (std::string tok; ss >> tok;) toks.push_back(tok);
    if (!toks.empty()) lines.push_back(std::move(toks));
    line.clear();
  }
  if (lines.empty()) throw InvalidArgument("kernel IR: empty");
  parse_header(lines[0], k);
  for (size_t i = 1; i < lines.size(); ++i)
    k.code.push_back(parse_instr(lines[i], static_cast<int>(i - 1)));
  k.check();
  return k;
}

Space space_of(const KernelIR& k, const std::vector<ir::TensorRef>& buffers) {
  if (static_cast<int>(buffers.size()) != k.buffers())
    throw ShapeError("kernel: " + std::to_string(buffers.size()) + " buffers for a kernel of " +
                     std::to_string(k.buffers()));
  const ir::TensorRef& s = buffers[k.space];
  Space sp;
  if (s.rank() > 0) {
    sp.cols = s.shape.back();
    sp.rows = 1;
    for (int d = 0; d + 1 < s.rank(); ++d) sp.rows *= s.shape[d];
  }
  for (const Instr& in : k.code) {
    if (!names_buffer(in.op)) continue;
    const ir::TensorRef& b = buffers[in.buffer];
    const int64_t want = in.access == Access::kFull  ? sp.rows * sp.cols
                         : in.access == Access::kRow ? sp.rows
                         : in.access == Access::kCol ? sp.cols
                                                     : 1;
    if (b.numel() != want || b.dtype != k.types[in.buffer]) {
      throw ShapeError("kernel: buffer " + std::to_string(in.buffer) + " is " +
                       std::string(dtype_name(b.dtype)) + " with " + std::to_string(b.numel()) +
                       " elements; its " + std::string(access_name(in.access)) + " access over " +
                       std::to_string(sp.rows) + " x " + std::to_string(sp.cols) + " needs " +
                       std::string(dtype_name(k.types[in.buffer])) + " with " +
                       std::to_string(want));
    }
  }
  return sp;
}

std::vector<int> KernelIR::evaluations() const {
  const std::vector<Level> l = levels();
  std::vector<int> count(code.size(), 0);
  auto pass = [&](std::vector<int> roots) {
    std::vector<bool> seen(code.size(), false);
    while (!roots.empty()) {
      const int i = roots.back();
      roots.pop_back();
      if (seen[i] || l[i] != Level::kElement) continue;
      seen[i] = true;
      ++count[i];
      if (!is_reduction(code[i].op))
        roots.insert(roots.end(), code[i].args.begin(), code[i].args.end());
    }
  };
  std::vector<int> final_roots;
  for (const Instr& in : code) {
    if (is_reduction(in.op)) pass(in.args);
    if (in.op == KOp::kStore && (in.access == Access::kFull || in.access == Access::kCol))
      final_roots.push_back(in.args[0]);
  }
  pass(final_roots);
  return count;
}

std::vector<int> KernelIR::summed_stores() const {
  const std::vector<Level> l = levels();
  std::vector<int> b;
  for (const Instr& in : code)
    if (in.op == KOp::kStore && (in.access == Access::kCol ||
                                 (in.access == Access::kScalar && l[in.args[0]] == Level::kRow)))
      b.push_back(in.buffer);
  return b;
}

bool KernelIR::has_row_totals() const {
  for (const Instr& in : code)
    if (in.op == KOp::kSumRows) return true;
  return false;
}

uint64_t KernelIR::fingerprint() const {
  return fnv1a(str());
}

void throw_bad_labels(int64_t count, int64_t cols) {
  throw InvalidArgument(
      "kernel: " + std::to_string(count) + " labels are outside the classes [0, " +
      std::to_string(cols) +
      ") and are not the ignore index: fix the labels, or the number of classes (the vocabulary)");
}

}  // namespace disc::jit
