// Registration of the op families into the registry (one function per file of ir/ops/).
#pragma once

namespace disc::ir {

class OpRegistry;

void register_elementwise_ops(OpRegistry& r);
void register_constant_ops(OpRegistry& r);
void register_layout_ops(OpRegistry& r);
void register_reduce_ops(OpRegistry& r);
void register_matmul_ops(OpRegistry& r);
void register_attention_ops(OpRegistry& r);
void register_linear_cross_entropy_ops(OpRegistry& r);
void register_gather_ops(OpRegistry& r);
void register_nn_ops(OpRegistry& r);
void register_conv_ops(OpRegistry& r);
void register_grad_ops(OpRegistry& r);
void register_optimizer_ops(OpRegistry& r);
void register_collective_ops(OpRegistry& r);

}  // namespace disc::ir
