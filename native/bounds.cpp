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
#include "bounds.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>

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
    }
    b.min_memory = weights_at_least > 0 ? 4 : 0;
    return b;
}

}  // namespace syno
