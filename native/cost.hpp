// Cost of a lowered program as the PyTorch generator runs it (docs/architecture.md §2, "Cost"): FLOPs of the
// contractions and reductions actually computed, elements materialized (copies: rolls, zero padding, unfolded
// windows, contiguous operands, results), and the largest tensor materialized. One number for budgets:
// total = flops + kElementCost * materialized.
#pragma once
#include <cstddef>
#include <vector>

namespace syno {

struct Program;

// FLOP-equivalents of one materialized element. Measured on 1 CPU thread (torch, forward + backward): a copied
// element (roll, pad + unfold + contiguous) costs 8-20 ns, a GEMM FLOP 0.025-0.035 ns, i.e. 250-600 FLOPs; we
// take the low end (bench/cost.py: with 128, operators within the budget still ran up to 3x the layer's step).
constexpr double kElementCost = 256;

struct Cost {
    double flops = 0;         // multiply-adds x2 of the contractions computed + reduction adds
    double materialized = 0;  // elements written by copies and results, and weight gradients
    double peak = 0;          // elements of the largest tensor materialized (input included)
    double total() const { return flops + kElementCost * materialized; }
};

// Walks the steps as codegen/torch.py lowers them: broadcast (expanded) dims stay virtual until a step needs
// them stored; unfold + unfold + contract of the conv pattern is one convolution (no im2col copy).
Cost plan_cost(const Program& program);

// What steps[from..] cost at least in any program that ends with them and reaches steps[from] with T holding
// the same dims, none broadcast, in whatever layout: plan_cost's walk from `from`, leaving out the copies that
// depend on T's layout (a permute before a merge, contraction or convolution; the final permute). A roll,
// an unfold, a reduce and a contraction or convolution (FLOPs, result, weight gradient) depend only on the
// dims. The partial-node cost bound (bounds.hpp) is this walk.
double plan_cost_bound(const Program& program, size_t from);

}  // namespace syno
