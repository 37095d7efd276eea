// Budget bounds (see bounds.hpp). Why they hold:
// * Every weight has at least one element in every mapping (and at least min_weight_params), an operator has at
//   least min_weights weights, and a contraction's einsum letters include every coordinate of its weight, so its
//   FLOPs (2 x letters) are at least twice the weight's elements. After a contraction the data tensor is stored
//   (memory counts 4 bytes per element), and it has at least one element.
// * Upward: the data coordinates of any frontier are sizes whose exponents of a variable v sum, in absolute
//   value, to at most out_v + 2 * max_occurrences_v (out_v: the root frontier's; REDUCE and STRIDE add at most
//   their usage, MERGE adds twice its usage, SPLIT/SHIFT/UNFOLD/EXPAND/CONTRACTION add nothing). So every data
//   tensor has at most B = prod_v value_v^(out_v + 2 max_occurrences_v) elements (times the pass-through dims).
//   A contraction's letters are data coordinates of the frontier above it, a weight is a subset of them, and
//   each bare reduction is summed once over a data tensor: FLOPs <= (2 max_weights + max_reductions) B,
//   params <= max_weights B.
// * Planned cost (min_cost, cost.hpp's total) of an operator with at least one weight: (a) every weight writes
//   its gradient and its contraction computes at least one FLOP per weight element (point 4 below), so cost >=
//   (1 + kElementCost) x its elements; (b) going forward from the input, T's stored elements only shrink at a
//   STRIDE (by its stride, a coefficient size whose exponents count against the allowances: the product of all
//   strides is at most S = prod over coefficients c of value_c^max_occurrences_c), as SPLIT, MERGE, SHIFT keep
//   them, UNFOLD grows them and EXPAND adds virtual dims only; the first step that sums stored elements (a
//   contraction, whose letters include all of T's stored dims, or a reduce of a stored dim) computes at least
//   numel(T) >= numel(input) / S FLOPs, and an operator with a weight has a contraction. Those FLOPs may be the
//   ones of (a), so min_cost = max((a)'s FLOPs, numel(input) / S) + kElementCost x the weights' elements.
//   Under a cost profile (point 6 below) the same counts are priced by its coefficients (all >= 0): a training
//   profile's cost is at least flop x numel(input) / S + element x W (W: the weights' elements, the gradients;
//   the FLOPs of (b) and the writes of (a) are different counts) and at least min(flop + element, 2 element) x W
//   (point 4: a weight computes a FLOP per element, or, strided, writes its gradient twice), plus launch x the
//   weights (one gradient kernel each; a compiler fuses view copies, never a gradient's write); an inference
//   profile's (no gradients) at least flop x numel(input) / S. Under cpu.eager (flop 1, element kElementCost)
//   that is max(W, numel(input) / S) + kElementCost x W, the formula above.
//
// Cost bound of a node that is not final (cost_bound). The search builds an operator from the output up, so a
// node's path P is the forward tail of the program of every operator below it; a completion C adds steps in
// front. Let lower(op) be the program of such an operator and lower_partial(node) P's steps alone.
// 1. lower(op) is C's steps, then P's, each followed by a reduce step for each bare reduction it brings into
//    the data tensor T. T at the cut holds the frontier's data coordinates minus its bare reductions (those
//    came into T inside C, or are inputs, and were summed at once) plus the pass-through ones: the input of
//    lower_partial. So P's steps and reduce steps are the same in both.
// 2. The planner reorders view steps only inside a run between two reduce/contract steps (barriers), and
//    barriers do not move. Let b be P's first barrier (the first one at or after the cut). Every run after b
//    holds P's steps only and is planned alike in both programs; T before b holds the same dims in both (a
//    run's order does not change the dims it ends with). Only the run before b mixes C's views with P's.
// 3. With no EXPAND in the space (max_count[EXPAND] = 0, the default) no dim is ever broadcast (only expand
//    steps make one; an outer SHARE's coordinate comes with the weight). plan_cost's walk from b then depends on
//    T's dims alone, except for copies that depend on T's memory layout (permutes before a merge, contraction
//    or convolution, and the final permute). plan_cost_bound (cost.hpp) walks from b counting all but those:
//    every term it counts is in plan_cost(lower(op)) (fusions of a roll with a stride, and of one or two unfolds
//    with a contraction, are decided inside runs after b, so alike), and the terms it leaves out are >= 0. One
//    or two unfolds before b may fuse with a contraction at b into a convolution: that counts 2 x letters FLOPs,
//    the walk counts that contraction as 1 or 2 x the same letters; the convolution reads T before the unfolds,
//    so the walk counts that contraction's read of T divided by its two largest odd summed letters (the windows
//    it may have: windows are odd). So bound <= cost, mapping by mapping.
// 4. With EXPAND allowed, T's dims at b may be broadcast in some completion; the bound is then (1 +
//    kElementCost) x the weights' elements: every contraction writes its weight's gradient and computes at
//    least one FLOP per weight element (its letters include the weight's coordinates). With the planner's
//    weight views (plan.hpp): a roll, split, merge or unfold keeps or grows the weight the contraction reads; a
//    strided weight writes its gradient twice (the zero-filled scatter: 2 kElementCost >= 1 + kElementCost);
//    a product of two weights counts 2 x its letters >= both weights' elements.
// 5. The run before b (first_run_bound). The planner's list schedule picks the ready step of least (priority,
//    index), and C's steps come first by index and never wait on P's. So when a P unfold u is picked every C
//    step of the run is placed already (else the earliest unplaced C step is ready and picked first): after u
//    the run grows T only by P's other unfolds (an unfold multiplies numel(T) by its window, a stride divides
//    it, other views keep it). Hence numel(T after u) >= numel(T at b) / prod(P's other first-run windows),
//    and u writes that plus its padding (>= numel(T before u) = numel(T after u) / k). The one or two unfolds
//    right before a contraction at b may fuse into a convolution: then the two largest of these terms are dropped.
//    A P roll (shift) is fused, and free, iff a P stride takes its output (that stride becomes ready with it
//    and has the least priority); else it writes numel(T at it) >= numel(T at b) / (prod of P's first-run
//    windows x what C's unfolds placed after it may add). That factor is 1 when C can add no unfold (at the
//    depth limit, or no UNFOLD left under max_count); otherwise the roll is not counted (its kernel is).
// 6. Under a cost profile (cost.hpp, CostProfile) the bound is the profile's total of the counts above: every
//    coefficient is >= 0 and each count is at most the operator's -- FLOPs, elements and kernels are sums over
//    writes the operator makes too; with fuse_views, a run's fused copy is the largest copy of the run (a max over
//    a subset of the run's copies is at most the max over all of them), a run ending in a reduction counts none in
//    both; the run ending at b is not counted (with a broadcast product at b, which a compiler fuses with the views
//    around it, that run goes on past b; without fusion, first_run_bound counts its copies). Point 4 under a
//    profile: each weight costs at least min(flop + element, 2 element) per element, and one kernel (its
//    gradient); for an inference profile (no gradients) the bound is 0.
//
// FLOPs upper bound of a node (flops_upper). An operator's FLOPs (lower.cpp) are 2 x numel(letters) per
// contraction plus numel(T) per reduce step (each bare reduction is summed once: at most max_reductions steps).
// The node's own contractions are in flops_bound exactly. Any other contraction or reduce step works on a data
// tensor that is, at that cut, the data coordinates of some frontier (on the node's path, or above it in the
// completion) with the pass-through dims, and a contraction's letters add only coordinates of that frontier
// (its group). Above the node a frontier's numel grows only by REDUCE (reduction stage) and STRIDE, and each
// multiplies it by a size whose variables' |exponents| it takes from the allowance: growth <= prod_v
// value_v^(max_occurrences_v - usage_v) over the variables those primitives may still use. So every tensor is
// at most U = pass-through x max(path frontiers' numel, node's numel x growth), and FLOPs <= flops_bound +
// (2 x contractions left + max_reductions) x U, mapping by mapping.
#include "bounds.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "cost.hpp"
#include "lower.hpp"

namespace syno {

BudgetBounds budget_bounds(const Space& space) {
    const Options& o = space.options;
    const SizeContext& ctx = space.ctx;
    BudgetBounds b;
    std::vector<int> exponent_sum(ctx.count(), 0);
    for (const Dim* d : space.root->frontier)
        for (int i = 0; i < ctx.count(); ++i) exponent_sum[i] += std::abs(d->size.exponent[i]);
    int weights_at_least = std::max(0, o.min_weights);
    int weights_at_most = std::max(0, o.max_weights);
    int contraction_cap = o.max_count[static_cast<int>(Prim::Contraction)];
    if (contraction_cap >= 0) weights_at_most = std::min(weights_at_most, contraction_cap);
    weights_at_most = std::min(weights_at_most, o.max_depth);
    int reductions_at_most = std::min(std::max(0, o.max_reductions), o.max_depth);
    for (size_t v = 0; v < ctx.valuations.size(); ++v) {
        double elements = 1;  // B for this mapping, in log space first: it may exceed a double
        double log_elements = 0;
        for (int i = 0; i < ctx.count(); ++i) {
            double value = static_cast<double>(ctx.valuations[v][i]);
            log_elements += (exponent_sum[i] + 2.0 * ctx.variables[i].max_occurrences) * std::log(std::max(value, 1.0));
        }
        for (int i : space.fixed_inputs)
            log_elements += std::log(std::max(ctx.approx(space.input[i].size, static_cast<int>(v)), 1.0));
        elements = log_elements > 700 ? INFINITY : std::exp(log_elements) * (1 + 1e-9);  // rounding stays above
        double weight_min = std::max(1.0, o.min_weight_params);
        b.min_params += weights_at_least * weight_min;
        b.min_flops += 2 * weights_at_least * weight_min;
        b.max_params += weights_at_most * elements;
        b.max_flops += (2.0 * weights_at_most + reductions_at_most) * elements;
        if (weights_at_least > 0) {  // min_cost, see above (log space: S may exceed a double)
            double log_input = 0, log_strides = 0;
            for (const InputDim& d : space.input)
                log_input += std::log(std::max(ctx.approx(d.size, static_cast<int>(v)), 1.0));
            for (int i = 0; i < ctx.count(); ++i)
                if (!ctx.is_primary(i))
                    log_strides +=
                        ctx.variables[i].max_occurrences * std::log(std::max<double>(ctx.valuations[v][i], 1.0));
            double read = std::exp(std::min(log_input - log_strides, 700.0)) * (1 - 1e-9);  // rounding stays below
            double weight_elements = weights_at_least * weight_min;
            const CostProfile& q = o.cost_profile;
            if (q.inference)
                b.min_cost += q.flop * read;
            else
                b.min_cost += std::max(q.flop * read + q.element * weight_elements,
                                       std::min(q.flop + q.element, 2 * q.element) * weight_elements) +
                              q.launch * weights_at_least;
        }
    }
    b.min_memory = weights_at_least > 0 ? 4 : 0;
    return b;
}

namespace {

// What the views of the run before the first barrier b write at least (point 5 above), as copies: elements and
// kernels (an unfold's padding and windows are two, a roll one).
Cost first_run_bound(const Program& p, size_t b, double unfold_growth) {
    Cost c;
    if (b >= p.steps.size()) return c;
    std::vector<int> dims = p.input.dims;  // T's dims at b: the run's views applied as sets
    double windows = 1;
    for (size_t i = 0; i < b; ++i) {
        const ProgramStep& s = p.steps[i];
        for (int d : s.src) dims.erase(std::find(dims.begin(), dims.end(), d));
        dims.insert(dims.end(), s.dst.begin(), s.dst.end());
        if (s.op == StepOp::Unfold) windows *= static_cast<double>(s.window);
    }
    double at_b = 1;
    for (int d : dims) at_b *= static_cast<double>(p.sizes.at(d));
    std::vector<double> rolls;
    std::vector<std::pair<double, double>> unfolds;  // (windows written, padding written)
    for (size_t i = 0; i < b; ++i) {
        const ProgramStep& s = p.steps[i];
        if (s.op == StepOp::Unfold) {
            double k = static_cast<double>(s.window), after = at_b / (windows / k);
            unfolds.emplace_back(after, after / k);
        } else if (s.op == StepOp::Shift) {
            bool fused = false;
            for (size_t j = 0; j < b; ++j) fused |= p.steps[j].op == StepOp::Stride && p.steps[j].src[0] == s.dst[0];
            if (!fused) rolls.push_back(at_b / (windows * unfold_growth));  // 0 when C may add unfolds: still a kernel
        }
    }
    std::sort(unfolds.begin(), unfolds.end());
    if (p.steps[b].op == StepOp::Contract) unfolds.resize(unfolds.size() > 2 ? unfolds.size() - 2 : 0);
    auto copy = [&](double elements) {  // each of these copies reads at least what the bound says it writes
        c.materialized += elements;
        c.copied += elements;
        c.read += elements;
        c.copy_read += elements;
        c.kernels += 1;
        c.copy_kernels += 1;
    };
    for (double r : rolls) copy(r);
    for (auto [window, padding] : unfolds) copy(window), copy(padding);
    // fused, the run may go on past b (a broadcast product at b): its one fused copy is not claimed here
    return c;
}

Cost& operator+=(Cost& a, const Cost& b) {
    a.flops += b.flops;
    a.materialized += b.materialized;
    a.kernels += b.kernels;
    a.read += b.read;
    a.copy_read += b.copy_read;
    a.copied += b.copied;
    a.copy_kernels += b.copy_kernels;
    a.fused_copied += b.fused_copied;
    a.fused_copy_kernels += b.fused_copy_kernels;
    a.gradients += b.gradients;
    a.gradient_kernels += b.gradient_kernels;
    return a;
}

}  // namespace

double flops_upper(const Space& space, const NodeState& node) {
    const Options& o = space.options;
    const SizeContext& ctx = space.ctx;
    int contraction_cap = o.max_count[static_cast<int>(Prim::Contraction)];
    int contractions_left = std::max(0, o.max_weights - node.contractions);
    if (contraction_cap >= 0)
        contractions_left = std::min(contractions_left, std::max(0, contraction_cap - node.counts[static_cast<int>(Prim::Contraction)]));
    double steps = 2.0 * contractions_left + std::max(0, std::min(o.max_reductions, o.max_depth));
    bool reduce_left = node.reducing && node.reductions < o.max_reductions && o.max_count[static_cast<int>(Prim::Reduce)] != 0;
    bool stride_left = o.max_count[static_cast<int>(Prim::Stride)] != 0;
    double total = node.flops_bound;
    for (size_t v = 0; v < ctx.valuations.size(); ++v) {
        int vi = static_cast<int>(v);
        auto numel = [&](const NodeState& n) {
            double x = 1;
            for (const Dim* d : n.frontier)
                if (!d->is(DimKind::ShareR)) x *= ctx.approx(d->size, vi);
            return x;
        };
        double growth = 1;
        for (int i = 0; i < ctx.count(); ++i) {
            bool usable = reduce_left || (stride_left && !ctx.is_primary(i));
            int remaining = ctx.variables[i].max_occurrences - node.usage[i];
            double value = static_cast<double>(ctx.valuations[v][i]);
            if (usable && remaining > 0 && value > 1) growth *= std::pow(value, remaining);
        }
        double largest = numel(node) * growth;
        for (const NodeState* m = node.parent.get(); m; m = m->parent.get()) largest = std::max(largest, numel(*m));
        for (int i : space.fixed_inputs) largest *= std::max(1.0, ctx.approx(space.input[i].size, vi));
        total += steps * largest;
    }
    return total * (1 + 1e-9);
}

double cost_bound(const Space& space, const NodeState& node) {
    const Options& o = space.options;
    const CostProfile& q = o.cost_profile;
    if (o.max_count[static_cast<int>(Prim::Expand)] != 0) {  // point 4 (a strided weight: its gradient twice)
        if (q.inference) return 0;  // no gradient, and a weight's FLOPs alone may be fewer than its elements
        return std::min(q.flop + q.element, 2 * q.element) * node.params +
               q.launch * node.contractions * static_cast<double>(space.ctx.valuations.size());
    }
    int unfold_cap = o.max_count[static_cast<int>(Prim::Unfold)];
    bool no_unfold_left = node.depth >= o.max_depth ||
                          (unfold_cap >= 0 && node.counts[static_cast<int>(Prim::Unfold)] >= unfold_cap);
    double unfold_growth = no_unfold_left ? 1 : INFINITY;
    double total = 0;
    for (size_t v = 0; v < space.ctx.valuations.size(); ++v) {
        Program p = lower_partial(space, node, static_cast<int>(v));
        size_t b = 0;
        while (b < p.steps.size() && p.steps[b].op != StepOp::Reduce && p.steps[b].op != StepOp::Contract) ++b;
        Cost c = plan_cost_bound(p, b);
        c += first_run_bound(p, b, unfold_growth);
        total += c.total(q);
    }
    return total;
}

}  // namespace syno
