#include "jit/cpu/llvm_emitter.h"

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include <algorithm>
#include <bit>
#include <functional>
#include <limits>
#include <vector>

#include "base/error.h"
#include "jit/cpu/llvm_math.h"

namespace disc::jit {
namespace {

using llvm::Value;

// W lanes of columns from `col` in one pass: all of them, or those in `mask` (the remainder).
struct Chunk {
  Value* col = nullptr;        // i64, the first column
  Value* mask = nullptr;       // <W x i1>, or null when every lane is a column
  std::vector<Value*> values;  // element-level values of the instructions, computed on demand
};

// A pass's work on one loop iteration: the chunks it covers, the loop-carried values (reduction
// accumulators) in, their next values out.
using PassBody =
    std::function<std::vector<Value*>(std::vector<Chunk>& chunks, std::vector<Value*> carried)>;

// The memory type of a buffer's elements; throws for types loads do not convert.
llvm::Type* element_type(llvm::IRBuilderBase& b, DType t, int buffer) {
  switch (t) {
    case DType::kF32:
      return b.getFloatTy();
    case DType::kF64:
      return b.getDoubleTy();
    case DType::kI32:
      return b.getInt32Ty();
    case DType::kI64:
      return b.getInt64Ty();
    case DType::kBool:
      return b.getInt8Ty();
    case DType::kBF16:
    case DType::kF16:
      return b.getInt16Ty();  // the bits; to_real and from_f32 convert them
    default:
      throw CompileError("jit: kernel buffer " + std::to_string(buffer) + " is " +
                         std::string(dtype_name(t)) +
                         "; the LLVM emitter loads f32, f64, bf16, f16, i32, i64 and bool buffers");
  }
}

// `ty` with its scalar type replaced by `elem` (a vector stays a vector of as many lanes).
llvm::Type* like(llvm::Type* ty, llvm::Type* elem) {
  if (auto* v = llvm::dyn_cast<llvm::FixedVectorType>(ty))
    return llvm::FixedVectorType::get(elem, v->getNumElements());
  return elem;
}

// Converts loaded elements of type `t` to `real` (float or double, scalar or vector).
Value* to_real(llvm::IRBuilderBase& b, Value* v, DType t, llvm::Type* real) {
  switch (t) {
    case DType::kI32:
    case DType::kI64:
      return b.CreateSIToFP(v, real);
    case DType::kBool:
      return b.CreateUIToFP(b.CreateICmpNE(v, llvm::Constant::getNullValue(v->getType())), real);
    case DType::kBF16: {  // bf16 is the high half of an f32: exact, in two integer instructions
      Value* wide = b.CreateShl(b.CreateZExt(v, like(v->getType(), b.getInt32Ty())), 16);
      return b.CreateFPCast(b.CreateBitCast(wide, like(v->getType(), b.getFloatTy())), real);
    }
    case DType::kF16:
      return b.CreateFPExt(b.CreateBitCast(v, like(v->getType(), b.getHalfTy())), real);
    default:
      return b.CreateFPCast(v, real);
  }
}

// Converts f32 values (scalar or vector) to what a buffer of type `t` stores: f32 as they are,
// bf16 and f16 rounded to nearest, ties to even, as base/half.h rounds. bf16 is rounded with
// integer arithmetic, which every x86 vectorises (a NaN keeps its sign and stays a quiet NaN);
// f16 with fptrunc, which F16C does in one instruction. Not avx512_bf16's vcvtneps2bf16 (fptrunc
// to bfloat): it flushes denormals to zero, so a kernel would round differently on CPUs with it
// than on CPUs without, and than PyTorch's and the reference kernels' rounding; the integer form
// costs six vector instructions per 16 values, and fused kernels are bound by memory, not by them.
Value* from_f32(llvm::IRBuilderBase& b, Value* v, DType t) {
  llvm::Type* ty = v->getType();
  if (t == DType::kF16)
    return b.CreateBitCast(b.CreateFPTrunc(v, like(ty, b.getHalfTy())), like(ty, b.getInt16Ty()));
  if (t != DType::kBF16) return v;
  llvm::Type* i32 = like(ty, b.getInt32Ty());
  auto c = [&](uint32_t x) { return llvm::ConstantInt::get(i32, x); };
  Value* u = b.CreateBitCast(v, i32);
  Value* odd = b.CreateAnd(b.CreateLShr(u, 16), c(1));
  Value* rounded = b.CreateLShr(b.CreateAdd(u, b.CreateAdd(odd, c(0x7fff))), 16);
  Value* nan = b.CreateOr(b.CreateLShr(u, 16), c(0x40));
  Value* bits = b.CreateSelect(b.CreateFCmpUNO(v, v), nan, rounded);
  return b.CreateTrunc(bits, like(ty, b.getInt16Ty()));
}

class Emitter {
 public:
  Emitter(const KernelIR& k, const Bucket& bucket, const Target& t, llvm::Module& m)
      : k_(k),
        levels_(k.levels()),
        bucket_(bucket),
        shape_(loop_shape(bucket, t)),
        m_(m),
        b_(m.getContext()) {}

  void emit(const std::string& name);

 private:
  // Phases of the function, in the order they run.
  void begin_function(const std::string& name);
  void load_buffer_pointers();
  void emit_scalars();
  void emit_scalar_stores();
  void emit_row_loop();
  void emit_row();
  void emit_element_stores();

  // Values of instructions: at their own level, and as an operand of a higher one.
  Value* apply(const Instr& in, const std::vector<Value*>& args, bool dbl);
  Value* unary(KOp op, Value* x, bool dbl);
  Value* operand(int i, Level at, Chunk* chunk);
  Value* element(int root, Chunk& chunk);
  bool reads_elements(int i) const;
  Value* make_element(int i, Chunk& chunk);
  Value* row_value(int i);
  Value* reduce(int i);
  Value* load_chunk(const Instr& in, const Chunk& chunk);
  Value* scratch_chunk(int i, const Chunk& chunk, Value* v);
  void store_chunk(const Instr& in, const Chunk& chunk, Value* v);

  // Passes over the columns and the loops they are made of.
  std::vector<Value*> emit_pass(std::vector<Value*> carried, const PassBody& body, int unroll);
  std::vector<Value*> emit_loop(
      Value* begin, Value* end, int64_t step, std::vector<Value*> carried,
      const std::function<std::vector<Value*>(Value*, std::vector<Value*>)>& body);
  std::vector<Value*> emit_static_tail(std::vector<Value*> carried, const PassBody& body,
                                       int unroll);
  std::vector<Value*> emit_masked_tail(Value* begin, std::vector<Value*> carried,
                                       const PassBody& body);
  Value* lanes_below(Value* n);
  Chunk chunk_at(Value* col, Value* mask = nullptr);
  llvm::MDNode* finished_loop_metadata();

  Value* i64(int64_t v) { return b_.getInt64(static_cast<uint64_t>(v)); }
  llvm::FixedVectorType* vec(llvm::Type* t) {
    return llvm::FixedVectorType::get(t, static_cast<unsigned>(shape_.lanes));
  }
  Value* splat(Value* v) { return b_.CreateVectorSplat(shape_.lanes, v); }
  Value* libm(const char* name, Value* x);
  bool is_const(int i, double v) const {
    return k_.code[i].op == KOp::kConst && k_.code[i].value == v;
  }

  const KernelIR& k_;
  const std::vector<Level> levels_;
  const Bucket bucket_;
  const LoopShape shape_;
  llvm::Module& m_;
  llvm::IRBuilder<> b_;
  llvm::Function* fn_ = nullptr;
  std::vector<Value*> buffers_;      // ptr per kernel buffer
  std::vector<llvm::Type*> types_;   // element type per kernel buffer
  Value* cols_ = nullptr;            // i64: a constant when the bucket is static
  Value* row_index_ = nullptr;       // i64: the row in progress
  Value* row_offset_ = nullptr;      // row * cols
  std::vector<Value*> scalar_;       // scalar level: double (or i1 for compares)
  std::vector<Value*> scalar_f_;     // the same as operands of f32 code: float (or i1)
  std::vector<Value*> row_values_;   // row level: float (or i1), in the row in progress
  Value* scratch_ = nullptr;         // ptr: the scratch rows of cached values
  std::vector<int> cache_slot_;      // per instruction: its scratch row, or -1 (not cached)
  std::vector<int> stored_in_pass_;  // per instruction: the pass that stores it, or -1
  int pass_ = 0;                     // the pass being emitted, from 1
};

void Emitter::emit(const std::string& name) {
  begin_function(name);
  load_buffer_pointers();
  emit_scalars();
  emit_row_loop();
}

void Emitter::begin_function(const std::string& name) {
  llvm::LLVMContext& ctx = m_.getContext();
  llvm::Type* i64t = b_.getInt64Ty();
  auto* type = llvm::FunctionType::get(b_.getVoidTy(), {i64t, i64t, i64t, b_.getPtrTy()}, false);
  fn_ = llvm::Function::Create(type, llvm::Function::ExternalLinkage, name, m_);
  fn_->addFnAttr(llvm::Attribute::NoUnwind);
  // The widest vectors the code uses: the back end must not split them into narrower registers.
  fn_->addFnAttr("min-legal-vector-width", std::to_string(32 * shape_.lanes));
  fn_->addParamAttr(3, llvm::Attribute::ReadOnly);
  fn_->addParamAttr(3, llvm::Attribute::NoCapture);
  const char* names[] = {"row_begin", "row_end", "cols", "buffers"};
  for (int a = 0; a < 4; ++a) fn_->getArg(a)->setName(names[a]);
  b_.SetInsertPoint(llvm::BasicBlock::Create(ctx, "entry", fn_));
  if (bucket_.is_static()) {
    cols_ = i64(bucket_.lo);
    return;
  }
  // The bucket's range, for LLVM's range analysis (trip counts, remainders).
  cols_ = fn_->getArg(2);
  b_.CreateAssumption(b_.CreateICmpSGE(cols_, i64(bucket_.lo)));
  if (bucket_.hi != std::numeric_limits<int64_t>::max())
    b_.CreateAssumption(b_.CreateICmpSLE(cols_, i64(bucket_.hi)));
}

void Emitter::load_buffer_pointers() {
  for (int i = 0; i < k_.buffers(); ++i) {
    types_.push_back(element_type(b_, k_.types[i], i));
    Value* slot = b_.CreateConstInBoundsGEP1_64(b_.getPtrTy(), fn_->getArg(3), i);
    buffers_.push_back(b_.CreateLoad(b_.getPtrTy(), slot, "buf" + std::to_string(i)));
  }
  const std::vector<int> cached = cached_values(k_);
  cache_slot_.assign(k_.code.size(), -1);
  stored_in_pass_.assign(k_.code.size(), -1);
  for (size_t s = 0; s < cached.size(); ++s) cache_slot_[cached[s]] = static_cast<int>(s);
  if (cached.empty()) return;
  Value* slot = b_.CreateConstInBoundsGEP1_64(b_.getPtrTy(), fn_->getArg(3), scratch_slot(k_));
  scratch_ = b_.CreateLoad(b_.getPtrTy(), slot, "scratch");
}

// Scalar-level instructions in double, once per call; their f32 versions for the code below.
void Emitter::emit_scalars() {
  const size_t n = k_.code.size();
  scalar_.assign(n, nullptr);
  scalar_f_.assign(n, nullptr);
  for (size_t i = 0; i < n; ++i) {
    const Instr& in = k_.code[i];
    if (levels_[i] != Level::kScalar || in.op == KOp::kStore) continue;
    Value* v = nullptr;
    if (in.op == KOp::kCheckLabels) continue;  // run_kernel checked it before the call
    if (in.op == KOp::kConst) {
      v = llvm::ConstantFP::get(b_.getDoubleTy(), in.value);
    } else if (in.op == KOp::kSumRows) {  // computed by run_kernel, in the buffer after ours
      Value* slot = b_.CreateConstInBoundsGEP1_64(b_.getPtrTy(), fn_->getArg(3), totals_slot(k_));
      Value* totals = b_.CreateLoad(b_.getPtrTy(), slot, "totals");
      v = b_.CreateLoad(b_.getDoubleTy(),
                        b_.CreateConstInBoundsGEP1_64(b_.getDoubleTy(), totals, i));
    } else if (in.op == KOp::kLoad) {
      const int buf = in.buffer;
      v = to_real(b_, b_.CreateLoad(types_[buf], buffers_[buf]), k_.types[buf], b_.getDoubleTy());
    } else {
      std::vector<Value*> args;
      for (int a : in.args) args.push_back(scalar_[a]);
      v = apply(in, args, /*dbl=*/true);
    }
    scalar_[i] = v;
    scalar_f_[i] = is_compare(in.op) ? v : b_.CreateFPTrunc(v, b_.getFloatTy());
  }
}

// Scalar stores, by the call that owns row 0 only (as the interpreter stores them once).
void Emitter::emit_scalar_stores() {
  std::vector<int> stores;
  for (size_t i = 0; i < k_.code.size(); ++i)
    if (k_.code[i].op == KOp::kStore && k_.code[i].access == Access::kScalar &&
        levels_[k_.code[i].args[0]] == Level::kScalar)
      stores.push_back(static_cast<int>(i));
  if (stores.empty()) return;
  llvm::LLVMContext& ctx = m_.getContext();
  auto* store = llvm::BasicBlock::Create(ctx, "scalar_stores", fn_);
  auto* rows = llvm::BasicBlock::Create(ctx, "rows_begin", fn_);
  b_.CreateCondBr(b_.CreateICmpEQ(fn_->getArg(0), i64(0)), store, rows);
  b_.SetInsertPoint(store);
  for (int i : stores) {
    const int buf = k_.code[i].buffer;
    b_.CreateStore(from_f32(b_, scalar_f_[k_.code[i].args[0]], k_.types[buf]), buffers_[buf]);
  }
  b_.CreateBr(rows);
  b_.SetInsertPoint(rows);
}

void Emitter::emit_row_loop() {
  llvm::LLVMContext& ctx = m_.getContext();
  Value* begin = fn_->getArg(0);
  Value* end = fn_->getArg(1);
  auto* work = llvm::BasicBlock::Create(ctx, "work", fn_);
  auto* exit = llvm::BasicBlock::Create(ctx, "exit", fn_);
  b_.CreateCondBr(b_.CreateICmpSLT(begin, end), work, exit);
  b_.SetInsertPoint(work);
  emit_scalar_stores();
  auto* loop = llvm::BasicBlock::Create(ctx, "row", fn_);
  llvm::BasicBlock* pre = b_.GetInsertBlock();
  b_.CreateBr(loop);
  b_.SetInsertPoint(loop);
  llvm::PHINode* row = b_.CreatePHI(b_.getInt64Ty(), 2, "r");
  row->addIncoming(begin, pre);
  row_index_ = row;
  row_offset_ = b_.CreateMul(row, cols_, "row_offset", /*HasNUW=*/true, /*HasNSW=*/true);
  emit_row();
  Value* next = b_.CreateAdd(row, i64(1), "r_next", true, true);
  row->addIncoming(next, b_.GetInsertBlock());
  llvm::BranchInst* back = b_.CreateCondBr(b_.CreateICmpSLT(next, end), loop, exit);
  back->setMetadata(llvm::LLVMContext::MD_loop, finished_loop_metadata());
  b_.SetInsertPoint(exit);
  b_.CreateRetVoid();
}

// One row: row-level instructions and reduction passes in instruction order, row stores where
// they stand, then the final pass over the element-level stores.
void Emitter::emit_row() {
  row_values_.assign(k_.code.size(), nullptr);
  for (size_t i = 0; i < k_.code.size(); ++i) {
    const Instr& in = k_.code[i];
    if (in.op == KOp::kStore) {
      if (in.access == Access::kRow) {
        Value* v = from_f32(b_, operand(in.args[0], Level::kRow, nullptr), k_.types[in.buffer]);
        b_.CreateStore(v, b_.CreateInBoundsGEP(types_[in.buffer], buffers_[in.buffer], row_index_));
      } else if (in.access == Access::kScalar && levels_[in.args[0]] == Level::kRow) {
        // Summed over rows: into the sum of the row block this call runs (run_kernel's).
        Value* old = b_.CreateLoad(b_.getFloatTy(), buffers_[in.buffer]);
        b_.CreateStore(b_.CreateFAdd(old, row_values_[in.args[0]]), buffers_[in.buffer]);
      }
    } else if (levels_[i] == Level::kRow) {
      row_values_[i] = row_value(static_cast<int>(i));
    }
  }
  emit_element_stores();
}

Value* Emitter::row_value(int i) {
  const Instr& in = k_.code[i];
  if (is_reduction(in.op)) return reduce(i);
  if (in.op == KOp::kLoad) {
    Value* p = b_.CreateInBoundsGEP(types_[in.buffer], buffers_[in.buffer], row_index_);
    return to_real(b_, b_.CreateLoad(types_[in.buffer], p), k_.types[in.buffer], b_.getFloatTy());
  }
  if (in.op == KOp::kLoadAt) {  // the column clamped to [0, cols - 1] in float, then truncated
    if (bucket_.hi == 0) return llvm::ConstantFP::get(b_.getFloatTy(), 0.0);  // no column to read
    Value* last = b_.CreateSIToFP(b_.CreateSub(cols_, i64(1)), b_.getFloatTy());
    Value* col = operand(in.args[0], Level::kRow, nullptr);
    col = b_.CreateBinaryIntrinsic(llvm::Intrinsic::maxnum,
                                   b_.CreateBinaryIntrinsic(llvm::Intrinsic::minnum, col, last),
                                   llvm::ConstantFP::get(b_.getFloatTy(), 0.0));
    Value* at = b_.CreateAdd(row_offset_, b_.CreateFPToSI(col, b_.getInt64Ty()));
    Value* p = b_.CreateInBoundsGEP(types_[in.buffer], buffers_[in.buffer], at);
    return to_real(b_, b_.CreateLoad(types_[in.buffer], p), k_.types[in.buffer], b_.getFloatTy());
  }
  if (in.op == KOp::kRowModCols) {  // modulo max(cols, 1): an empty row has no columns to compare
    Value* n = b_.CreateBinaryIntrinsic(llvm::Intrinsic::umax, cols_, i64(1));
    return b_.CreateUIToFP(b_.CreateURem(row_index_, n), b_.getFloatTy());
  }
  std::vector<Value*> args;
  for (int a : in.args) args.push_back(operand(a, Level::kRow, nullptr));
  return apply(in, args, /*dbl=*/false);
}

// A reduction's pass: U vector accumulators, combined pairwise, then the lanes halved pairwise.
// An accumulator is one vector (sum, max) or two (logsumexp: the running max m and the sum s of
// exp(x - m), rescaled when m grows: one exp per element).
Value* Emitter::reduce(int i) {
  using State = std::vector<Value*>;
  const KOp op = k_.code[i].op;
  const int arg = k_.code[i].args[0];
  const double inf = std::numeric_limits<double>::infinity();
  auto vc = [&](double v) { return llvm::ConstantFP::get(vec(b_.getFloatTy()), v); };
  auto like = [&](Value* x, double v) { return llvm::ConstantFP::get(x->getType(), v); };
  // logsumexp's running max starts at the lowest finite float, so that exp(x - m) is exp(-inf) = 0
  // for an element (or masked lane) of -inf, never exp(NaN); a row of -inf ends as -FLT_MAX +
  // log(0) = -inf.
  const double lowest = std::numeric_limits<float>::lowest();
  const State identity = op == KOp::kReduceSum   ? State{vc(0)}
                         : op == KOp::kReduceMax ? State{vc(-inf)}
                                                 : State{vc(lowest), vc(0)};
  Value* masked = op == KOp::kReduceLogSumExp ? vc(-inf) : identity[0];  // what masked lanes read
  // max as the interpreter's std::max(acc, x): x when acc < x, so NaNs are skipped.
  auto merge = [&](const State& a, const State& b) -> State {
    if (op == KOp::kReduceSum) return {b_.CreateFAdd(a[0], b[0])};
    Value* m = b_.CreateSelect(b_.CreateFCmpOLT(a[0], b[0]), b[0], a[0]);
    if (op == KOp::kReduceMax) return {m};
    Value* ea = emit_exp(b_, b_.CreateFSub(a[0], m));
    Value* eb = emit_exp(b_, b_.CreateFSub(b[0], m));
    return {m, b_.CreateFAdd(b_.CreateFMul(a[1], ea), b_.CreateFMul(b[1], eb))};
  };
  auto update = [&](const State& a, Value* x) -> State {
    if (op != KOp::kReduceLogSumExp) return merge(a, {x});
    Value* up = b_.CreateFCmpOGT(x, a[0]);  // x becomes the running max: rescale the sum
    // exp(-|x - m|): exp(m - x) rescales the sum when x is the new max, else exp(x - m) adds.
    Value* t = emit_exp(
        b_, b_.CreateFNeg(b_.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, b_.CreateFSub(x, a[0]))));
    Value* s = b_.CreateSelect(up, b_.CreateFAdd(b_.CreateFMul(a[1], t), like(t, 1)),
                               b_.CreateFAdd(a[1], t));
    return {b_.CreateSelect(up, x, a[0]), s};
  };
  const size_t width = identity.size();
  State carried;
  for (int u = 0; u < shape_.unroll; ++u)
    carried.insert(carried.end(), identity.begin(), identity.end());
  carried = emit_pass(
      carried,
      [&](std::vector<Chunk>& chunks, State a) {
        for (size_t u = 0; u < chunks.size(); ++u) {
          Value* x = element(arg, chunks[u]);
          if (chunks[u].mask) x = b_.CreateSelect(chunks[u].mask, x, masked);
          const State next = update(State(a.begin() + u * width, a.begin() + (u + 1) * width), x);
          std::copy(next.begin(), next.end(), a.begin() + u * width);
        }
        return a;
      },
      shape_.unroll);
  std::vector<State> acc;
  for (size_t u = 0; u < carried.size() / width; ++u)
    acc.emplace_back(carried.begin() + u * width, carried.begin() + (u + 1) * width);
  for (size_t n = acc.size(); n > 1; n /= 2)
    for (size_t u = 0; u < n / 2; ++u) acc[u] = merge(acc[u], acc[u + n / 2]);
  State v = acc[0];
  for (int w = shape_.lanes; w > 1; w /= 2) {
    std::vector<int> lo(w / 2), hi(w / 2);
    for (int l = 0; l < w / 2; ++l) lo[l] = l, hi[l] = l + w / 2;
    State a, b;
    for (Value* x : v)
      a.push_back(b_.CreateShuffleVector(x, lo)), b.push_back(b_.CreateShuffleVector(x, hi));
    v = merge(a, b);
  }
  for (Value*& x : v) x = b_.CreateExtractElement(x, uint64_t{0});
  return op == KOp::kReduceLogSumExp ? b_.CreateFAdd(v[0], emit_log(b_, v[1])) : v[0];
}

// Every element-level store of the row, chunk by chunk: all values (and so all loads) of the
// chunks of an iteration first, then their stores.
void Emitter::emit_element_stores() {
  std::vector<int> stores;
  for (size_t i = 0; i < k_.code.size(); ++i)
    if (k_.code[i].op == KOp::kStore &&
        (k_.code[i].access == Access::kFull || k_.code[i].access == Access::kCol))
      stores.push_back(static_cast<int>(i));
  if (stores.empty()) return;
  emit_pass(
      {},
      [&](std::vector<Chunk>& chunks, std::vector<Value*> none) {
        std::vector<std::vector<Value*>> values(chunks.size());
        for (size_t u = 0; u < chunks.size(); ++u)
          for (int s : stores)
            values[u].push_back(operand(k_.code[s].args[0], Level::kElement, &chunks[u]));
        for (size_t u = 0; u < chunks.size(); ++u)
          for (size_t s = 0; s < stores.size(); ++s)
            store_chunk(k_.code[stores[s]], chunks[u], values[u][s]);
        return none;
      },
      /*unroll=*/1);
}

Value* Emitter::operand(int i, Level at, Chunk* chunk) {
  const Level l = levels_[i];
  if (l == Level::kElement) return element(i, *chunk);
  Value* v = l == Level::kScalar ? scalar_f_[i] : row_values_[i];
  return at == Level::kElement ? splat(v) : v;
}

// Depth first with a stack of its own, in the order a recursion would take: a kernel's chain of
// element instructions is as long as its group (a fused chain of 30,000 relus).
Value* Emitter::element(int root, Chunk& chunk) {
  std::vector<int> todo = {root};
  while (!todo.empty()) {
    const int i = todo.back();
    if (chunk.values[i]) {
      todo.pop_back();
      continue;
    }
    const size_t before = todo.size();
    if (reads_elements(i)) {
      const std::vector<int>& args = k_.code[i].args;
      for (auto a = args.rbegin(); a != args.rend(); ++a)
        if (levels_[*a] == Level::kElement && !chunk.values[*a]) todo.push_back(*a);
    }
    if (todo.size() > before) continue;  // its element operands first, the first one's first
    todo.pop_back();
    chunk.values[i] = make_element(i, chunk);
  }
  return chunk.values[root];
}

// Whether instruction i computes from its operands here (not a load, a column index, or a value
// an earlier pass left in scratch).
bool Emitter::reads_elements(int i) const {
  const KOp op = k_.code[i].op;
  return op != KOp::kLoad && op != KOp::kColIndex &&
         !(cache_slot_[i] >= 0 && stored_in_pass_[i] >= 0 && stored_in_pass_[i] != pass_);
}

Value* Emitter::make_element(int i, Chunk& chunk) {
  const Instr& in = k_.code[i];
  Value* v = nullptr;
  if (in.op == KOp::kLoad) {
    v = load_chunk(in, chunk);
  } else if (in.op == KOp::kColIndex) {
    // Lane l is column col + l, exact in f32 up to 2^24.
    const bool narrow = bucket_.hi < (int64_t{1} << 31);
    llvm::Type* it = narrow ? b_.getInt32Ty() : b_.getInt64Ty();
    std::vector<llvm::Constant*> iota;
    for (int l = 0; l < shape_.lanes; ++l) iota.push_back(llvm::ConstantInt::get(it, l));
    Value* col = splat(b_.CreateTrunc(chunk.col, it));
    v = b_.CreateSIToFP(b_.CreateAdd(col, llvm::ConstantVector::get(iota)), vec(b_.getFloatTy()));
  } else if (cache_slot_[i] >= 0 && stored_in_pass_[i] >= 0 && stored_in_pass_[i] != pass_) {
    v = scratch_chunk(i, chunk, nullptr);  // computed by an earlier pass
  } else {
    std::vector<Value*> args;
    for (int a : in.args) args.push_back(operand(a, Level::kElement, &chunk));
    v = apply(in, args, /*dbl=*/false);
    if (cache_slot_[i] >= 0) {
      scratch_chunk(i, chunk, v);
      stored_in_pass_[i] = pass_;
    }
  }
  return v;
}

// Stores v into instruction i's scratch row at the chunk's columns, or (v null) loads it back.
Value* Emitter::scratch_chunk(int i, const Chunk& chunk, Value* v) {
  Value* at = b_.CreateAdd(b_.CreateMul(i64(cache_slot_[i]), cols_), chunk.col);
  Value* p = b_.CreateInBoundsGEP(b_.getFloatTy(), scratch_, at);
  llvm::Type* vt = vec(b_.getFloatTy());
  if (v) {
    if (chunk.mask)
      b_.CreateMaskedStore(v, p, llvm::Align(4), chunk.mask);
    else
      b_.CreateAlignedStore(v, p, llvm::Align(4));
    return v;
  }
  if (chunk.mask)
    return b_.CreateMaskedLoad(vt, p, llvm::Align(4), chunk.mask, llvm::Constant::getNullValue(vt));
  return b_.CreateAlignedLoad(vt, p, llvm::Align(4));
}

Value* Emitter::load_chunk(const Instr& in, const Chunk& chunk) {
  llvm::Type* t = types_[in.buffer];
  Value* index = in.access == Access::kFull ? b_.CreateAdd(row_offset_, chunk.col) : chunk.col;
  Value* p = b_.CreateInBoundsGEP(t, buffers_[in.buffer], index);
  const llvm::Align align(static_cast<uint64_t>(dtype_size(k_.types[in.buffer])));
  llvm::Type* vt = vec(t);
  Value* v = chunk.mask ? static_cast<Value*>(b_.CreateMaskedLoad(vt, p, align, chunk.mask,
                                                                  llvm::Constant::getNullValue(vt)))
                        : b_.CreateAlignedLoad(vt, p, align);
  return to_real(b_, v, k_.types[in.buffer], vec(b_.getFloatTy()));
}

// A full store writes the row's chunk; a col store (a column sum) adds it to the sums of the
// row block this call runs (run_kernel gives each block its own zeroed buffer).
// A full store rounds to a 16-bit buffer's type; column sums are f32 (KernelIR::check).
void Emitter::store_chunk(const Instr& in, const Chunk& chunk, Value* v) {
  const bool sum = in.access == Access::kCol;
  Value* p = b_.CreateInBoundsGEP(types_[in.buffer], buffers_[in.buffer],
                                  sum ? chunk.col : b_.CreateAdd(row_offset_, chunk.col));
  if (sum) {
    llvm::Type* vt = vec(b_.getFloatTy());
    Value* old = chunk.mask
                     ? static_cast<Value*>(b_.CreateMaskedLoad(vt, p, llvm::Align(4), chunk.mask,
                                                               llvm::Constant::getNullValue(vt)))
                     : b_.CreateAlignedLoad(vt, p, llvm::Align(4));
    v = b_.CreateFAdd(old, v);
  }
  v = from_f32(b_, v, k_.types[in.buffer]);
  const llvm::Align align(static_cast<uint64_t>(dtype_size(k_.types[in.buffer])));
  if (chunk.mask)
    b_.CreateMaskedStore(v, p, align, chunk.mask);
  else
    b_.CreateAlignedStore(v, p, align);
}

Chunk Emitter::chunk_at(Value* col, Value* mask) {
  Chunk c;
  c.col = col;
  c.mask = mask;
  c.values.assign(k_.code.size(), nullptr);
  return c;
}

// The columns [0, cols): a loop of U whole chunks while U * W columns remain, then the rest.
// With a static extent the rest is straight-line code: whole chunks, then one masked chunk if W
// does not divide the extent. With a dynamic one it is a loop of masked chunks, which runs at
// least once (with no lane left when U * W divides cols). Every loop runs at least once in the
// bucket, so no loop has a guard: a guard depends on cols alone, and LLVM would unswitch the row
// loop on it, copying the whole row's code once per guard.
std::vector<Value*> Emitter::emit_pass(std::vector<Value*> carried, const PassBody& body,
                                       int unroll) {
  ++pass_;
  const int64_t w = shape_.lanes, uw = w * unroll;
  Value* start = i64(0);
  if (bucket_.lo >= uw) {
    Value* end = uw > 1 ? b_.CreateAnd(cols_, i64(-uw)) : cols_;
    carried = emit_loop(start, end, uw, carried, [&](Value* col, std::vector<Value*> c) {
      std::vector<Chunk> chunks;
      for (int u = 0; u < unroll; ++u) chunks.push_back(chunk_at(b_.CreateAdd(col, i64(u * w))));
      return body(chunks, c);
    });
    start = end;
  }
  if (bucket_.is_static()) return emit_static_tail(carried, body, unroll);
  return uw == 1 ? carried : emit_masked_tail(start, carried, body);
}

// After the unrolled loop, a static extent's last columns: whole chunks, then a masked one.
std::vector<Value*> Emitter::emit_static_tail(std::vector<Value*> carried, const PassBody& body,
                                              int unroll) {
  const int64_t w = shape_.lanes, cols = bucket_.lo;
  int64_t col = cols & -(w * unroll);
  for (; col + w <= cols; col += w) {
    std::vector<Chunk> chunks{chunk_at(i64(col))};
    carried = body(chunks, carried);
  }
  if (col == cols) return carried;
  std::vector<Chunk> chunks{chunk_at(i64(col), lanes_below(i64(cols - col)))};
  return body(chunks, carried);
}

// A masked chunk of the lanes below cols - col, for col = begin, begin + W, ... while col < cols,
// and at least once.
std::vector<Value*> Emitter::emit_masked_tail(Value* begin, std::vector<Value*> carried,
                                              const PassBody& body) {
  const int64_t w = shape_.lanes;
  return emit_loop(begin, cols_, w, carried, [&](Value* col, std::vector<Value*> c) {
    Value* left = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, b_.CreateSub(cols_, col),
                                           i64(w));  // 0 .. W
    std::vector<Chunk> chunks{chunk_at(col, lanes_below(left))};
    return body(chunks, c);
  });
}

// The mask of lanes 0 .. n-1 (n <= W, i64).
Value* Emitter::lanes_below(Value* n) {
  std::vector<llvm::Constant*> iota;
  for (int l = 0; l < shape_.lanes; ++l) iota.push_back(b_.getInt32(l));
  return b_.CreateICmpSLT(llvm::ConstantVector::get(iota),
                          splat(b_.CreateTrunc(n, b_.getInt32Ty())));
}

// do { carried = body(col, carried); col += step; } while (col < end), from col = begin: the
// caller knows that the loop runs at least once.
std::vector<Value*> Emitter::emit_loop(
    Value* begin, Value* end, int64_t step, std::vector<Value*> carried,
    const std::function<std::vector<Value*>(Value*, std::vector<Value*>)>& body) {
  llvm::LLVMContext& ctx = m_.getContext();
  llvm::BasicBlock* pre = b_.GetInsertBlock();
  auto* loop = llvm::BasicBlock::Create(ctx, "cols", fn_);
  auto* done = llvm::BasicBlock::Create(ctx, "cols_done", fn_);
  b_.CreateBr(loop);
  b_.SetInsertPoint(loop);
  llvm::PHINode* col = b_.CreatePHI(b_.getInt64Ty(), 2, "c");
  col->addIncoming(begin, pre);
  std::vector<llvm::PHINode*> phis;
  std::vector<Value*> current;
  for (Value* v : carried) {
    phis.push_back(b_.CreatePHI(v->getType(), 2));
    phis.back()->addIncoming(v, pre);
    current.push_back(phis.back());
  }
  std::vector<Value*> next = body(col, current);
  Value* col_next = b_.CreateAdd(col, i64(step), "c_next", true, true);
  llvm::BasicBlock* latch = b_.GetInsertBlock();
  col->addIncoming(col_next, latch);
  for (size_t i = 0; i < phis.size(); ++i) phis[i]->addIncoming(next[i], latch);
  llvm::BranchInst* back = b_.CreateCondBr(b_.CreateICmpSLT(col_next, end), loop, done);
  back->setMetadata(llvm::LLVMContext::MD_loop, finished_loop_metadata());
  b_.SetInsertPoint(done);
  return next;
}

// Marks a loop as done: already vectorised and unrolled for the bucket, so LLVM's vectoriser and
// unroller leave it alone (they would only grow the code, and compile time).
llvm::MDNode* Emitter::finished_loop_metadata() {
  llvm::LLVMContext& ctx = m_.getContext();
  llvm::Metadata* unroll =
      llvm::MDNode::get(ctx, llvm::MDString::get(ctx, "llvm.loop.unroll.disable"));
  llvm::Metadata* vectorize =
      llvm::MDNode::get(ctx, {llvm::MDString::get(ctx, "llvm.loop.vectorize.enable"),
                              llvm::ConstantAsMetadata::get(b_.getFalse())});
  // A loop ID refers to itself first, so that loops with the same properties stay distinct.
  llvm::MDNode* id = llvm::MDNode::getDistinct(ctx, {nullptr, unroll, vectorize});
  id->replaceOperandWith(0, id);
  return id;
}

// A libm function of one double, declared as what it is: no memory access, no errno reliance.
Value* Emitter::libm(const char* name, Value* x) {
  auto callee =
      m_.getOrInsertFunction(name, llvm::FunctionType::get(x->getType(), {x->getType()}, false));
  auto* f = llvm::cast<llvm::Function>(callee.getCallee());
  f->setDoesNotAccessMemory();
  f->setDoesNotThrow();
  f->setWillReturn();
  return b_.CreateCall(callee, {x});
}

Value* Emitter::unary(KOp op, Value* x, bool dbl) {
  auto one = [&] { return llvm::ConstantFP::get(x->getType(), 1.0); };
  switch (op) {
    case KOp::kNeg:
      return b_.CreateFNeg(x);
    case KOp::kAbs:
      return b_.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x);
    case KOp::kSqrt:
      return b_.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, x);
    case KOp::kRsqrt:
      return b_.CreateFDiv(one(), b_.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, x));
    case KOp::kRelu: {
      Value* zero = llvm::Constant::getNullValue(x->getType());
      return b_.CreateSelect(b_.CreateFCmpOGT(x, zero), x, zero);
    }
    case KOp::kRoundBf16:
    case KOp::kRoundF16: {  // from f32, as a scalar-level (double) value is rounded too
      const DType t = op == KOp::kRoundBf16 ? DType::kBF16 : DType::kF16;
      Value* f = dbl ? b_.CreateFPTrunc(x, like(x->getType(), b_.getFloatTy())) : x;
      return to_real(b_, from_f32(b_, f, t), t, x->getType());
    }
    case KOp::kExp:
      return dbl ? libm("exp", x) : emit_exp(b_, x);
    case KOp::kLog:
      return dbl ? libm("log", x) : emit_log(b_, x);
    case KOp::kTanh:
      return dbl ? libm("tanh", x) : emit_tanh(b_, x);
    // In double as the interpreter writes them.
    case KOp::kSigmoid:
      return dbl ? b_.CreateFDiv(one(), b_.CreateFAdd(one(), libm("exp", b_.CreateFNeg(x))))
                 : emit_sigmoid(b_, x);
    case KOp::kSilu:
      return dbl ? b_.CreateFDiv(x, b_.CreateFAdd(one(), libm("exp", b_.CreateFNeg(x))))
                 : emit_silu(b_, x);
    default:
      throw CompileError("jit: the LLVM emitter has no unary `" + std::string(kop_name(op)) + "`");
  }
}

Value* Emitter::apply(const Instr& in, const std::vector<Value*>& a, bool dbl) {
  switch (in.op) {
    case KOp::kAdd:
      return b_.CreateFAdd(a[0], a[1]);
    case KOp::kSub:
      return b_.CreateFSub(a[0], a[1]);
    case KOp::kMul:
      return b_.CreateFMul(a[0], a[1]);
    case KOp::kDiv:
      return b_.CreateFDiv(a[0], a[1]);
    // (a > b) ? a : b and (a < b) ? a : b, NaNs included, as the interpreter.
    case KOp::kMax:
      return b_.CreateSelect(b_.CreateFCmpOGT(a[0], a[1]), a[0], a[1]);
    case KOp::kMin:
      return b_.CreateSelect(b_.CreateFCmpOLT(a[0], a[1]), a[0], a[1]);
    case KOp::kPow:
      // x * x is pow(x, 2) exactly; other exponents call pow or powf (lane by lane).
      if (is_const(in.args[1], 2.0)) return b_.CreateFMul(a[0], a[0]);
      return b_.CreateBinaryIntrinsic(llvm::Intrinsic::pow, a[0], a[1]);
    case KOp::kEq:
      return b_.CreateFCmpOEQ(a[0], a[1]);
    case KOp::kNe:
      return b_.CreateFCmpUNE(a[0], a[1]);
    case KOp::kLt:
      return b_.CreateFCmpOLT(a[0], a[1]);
    case KOp::kLe:
      return b_.CreateFCmpOLE(a[0], a[1]);
    case KOp::kGt:
      return b_.CreateFCmpOGT(a[0], a[1]);
    case KOp::kGe:
      return b_.CreateFCmpOGE(a[0], a[1]);
    case KOp::kSelect:
      return b_.CreateSelect(a[0], a[1], a[2]);
    default:
      return unary(in.op, a[0], dbl);
  }
}

}  // namespace

std::vector<int> cached_values(const KernelIR& k) {
  const std::vector<int> count = k.evaluations();
  std::vector<int> cached;
  for (size_t i = 0; i < k.code.size(); ++i)
    if (count[i] > 1 && is_expensive(k.code[i].op)) cached.push_back(static_cast<int>(i));
  return cached;
}

LoopShape loop_shape(const Bucket& b, const Target& t) {
  LoopShape s;
  s.lanes = std::max(1, t.vector_bits / 32);
  if (b.hi < s.lanes)
    s.lanes = b.hi <= 1 ? 1 : static_cast<int>(std::bit_floor(static_cast<uint64_t>(b.hi)));
  // Unrolled only when every extent in the bucket fills an unrolled iteration.
  s.unroll = b.lo >= 2 * s.lanes ? 2 : 1;
  return s;
}

std::unique_ptr<llvm::Module> emit_kernel(const KernelIR& k, const Bucket& b, const Target& t,
                                          llvm::LLVMContext& ctx, const std::string& name) {
  if (b.lo < 0 || b.lo > b.hi)
    throw CompileError("jit: bucket " + b.str() + " holds no column extent");
  k.check();  // before anything reads the instructions' arguments
  auto m = std::make_unique<llvm::Module>(name, ctx);
  m->setTargetTriple(t.triple);
  m->addModuleFlag(llvm::Module::Error, "disc.loops_done", 1);
  Emitter(k, b, t, *m).emit(name);
  return m;
}

}  // namespace disc::jit
