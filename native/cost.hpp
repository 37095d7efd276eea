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

// A target's cost profile (syno_automl/cost_profile.py): what one FLOP, one element materialized (written), one
// element read and one kernel launch cost on that target, in one unit. With fuse_views (a compiled target: Inductor inlines view chains into
// their consumer), the copies of one run of view steps are one kernel writing the largest of them, and a run
// that ends in a reduction is read by the reduction itself (no copy at all). The default is cpu.eager, today's
// model: flops + kElementCost x materialized.
struct CostProfile {
    double flop = 1;
    double element = kElementCost;
    double read = 0;  // one element read (cpu.eager: not priced)
    double launch = 0;
    bool fuse_views = false;
    bool inference = false;  // price a forward pass: no weight gradients (their writes and kernels)
};

struct Cost {
    double flops = 0;         // multiply-adds x2 of the contractions computed + reduction adds
    double materialized = 0;  // elements written by copies and results, and weight gradients
    double peak = 0;          // elements of the largest tensor materialized (input included)
    double read = 0;          // elements the materializing kernels read (the operands of a contraction, reduce, copy)
    double kernels = 0;       // materializations (one kernel launch each), copies included
    double copied = 0;        // of materialized: writes a compiler fuses (view copies: rolls, padding, windows,
                              // permutes; and broadcast products, elementwise multiplies by a weight)
    double copy_read = 0;     // of read: by the view copies
    double copy_kernels = 0;  // of kernels: the view copies
    double fused_copied = 0;  // the copies as a compiler fuses them: per run of views, the largest (0 before a reduce)
    double fused_copy_kernels = 0;  // runs whose copies a compiler still writes (one kernel each)
    double gradients = 0;           // of materialized: the weights' gradients (a training step's only)
    double gradient_kernels = 0;    // of kernels: those writes
    double total() const { return flops + kElementCost * materialized; }
    // The cost under a profile (equal to total() under the default one).
    double total(const CostProfile& p) const {
        double written = materialized - (p.inference ? gradients : 0);
        double launched = kernels - (p.inference ? gradient_kernels : 0);
        if (!p.fuse_views) return p.flop * flops + p.element * written + p.read * read + p.launch * launched;
        // a run's fused kernel reads about what it writes
        return p.flop * flops + p.element * (written - copied + fused_copied) +
               p.read * (read - copy_read + fused_copied) + p.launch * (launched - copy_kernels + fused_copy_kernels);
    }
};

// Walks the steps as codegen/torch.py lowers them: broadcast (expanded) dims stay virtual until a step needs
// them stored; unfold (+ unfold) + contract of the conv pattern is one conv1d (conv2d), no im2col copy.
Cost plan_cost(const Program& program);

// What steps[from..] cost at least in any program that ends with them and reaches steps[from] with T holding
// the same dims, none broadcast, in whatever layout: plan_cost's walk from `from`, leaving out the copies that
// depend on T's layout (a permute before a merge, contraction or convolution; the final permute). A roll,
// an unfold, a reduce and a contraction or convolution (FLOPs, result, weight gradient) depend only on the
// dims. The partial-node cost bound (bounds.hpp) is this walk.
// Returns the counts (Cost) of that walk: every count in it is at most plan_cost's for such a program, and so is
// its fused_copied / fused_copy_kernels (the runs after `from` are the same; the run ending at `from` counts none).
Cost plan_cost_bound(const Program& program, size_t from);

}  // namespace syno
