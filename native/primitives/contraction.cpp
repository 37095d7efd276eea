// CONTRACTION: a group of SHAREs introducing one new weight. An inner SHARE keeps its data side (the
// coordinate is multiplied, and summed if it is a reduction); an outer SHARE also EXPANDs its data side (the
// coordinate exists only in the weight, like C_out of a convolution).
#include <algorithm>

#include "../hash.hpp"
#include "../priors.hpp"
#include "common.hpp"

namespace syno {

namespace {

enum class Role : uint8_t { None, Inner, Outer };

// FLOPs of this contraction's einsum, exactly: every data coordinate that is alive at this cut is a letter
// (bare reductions not in the group were already summed), as is every coordinate of the group.
double contraction_flops(const Space& space, const NodeState& n, const std::vector<const Dim*>& group) {
    double total = 0;
    for (size_t v = 0; v < space.ctx.valuations.size(); ++v) {
        double letters = 1;
        for (const Dim* d : n.frontier) {
            if (d->is(DimKind::ShareR)) continue;
            bool in_group = std::find(group.begin(), group.end(), d) != group.end();
            if (d->is_bare_reduce() && !in_group) continue;
            letters *= space.ctx.approx(d->size, static_cast<int>(v));
        }
        for (int i : space.fixed_inputs) letters *= space.ctx.approx(space.input[i].size, static_cast<int>(v));
        total += 2 * letters;
    }
    return total;
}

// The space priors a CONTRACTION decides alone (priors.hpp): every one is final once the contraction is made.
bool priors_allow(const Space& space, const NodeState& n, const std::vector<const Dim*>& dims,
                  const std::vector<Role>& roles) {
    const Options& o = space.options;
    auto& rules = space.rules;
    std::vector<const Dim*> outer;
    size_t inner = 0;
    bool other = false, wrong_rank = false;
    for (size_t k = 0; k < dims.size(); ++k) {
        if (roles[k] == Role::Inner) ++inner;
        if (roles[k] != Role::Outer) continue;
        outer.push_back(dims[k]);
        OuterKind kind = outer_kind(dims[k]);
        other |= kind == OuterKind::Other;
        wrong_rank |= kind == OuterKind::LowRank && largest_value(space, dims[k]->size) != o.prior_lowrank_size;
    }
    if (o.prior_weight_io && rules.check(PriorWeightInputOutput, inner == 0 || outer.empty())) return false;
    if (o.prior_outer_kinds && rules.check(PriorOuterKind, other)) return false;
    if (o.prior_lowrank_size > 0 && rules.check(PriorLowRankSize, wrong_rank)) return false;
    if (o.prior_max_outer > 0 &&
        rules.check(PriorOuterProduct, outer_product(space, n, outer) > o.prior_max_outer))
        return false;
    return true;
}

}  // namespace

void generate_contraction(const Space& space, const NodePtr& node, std::vector<NodePtr>& out) {
    const Options& o = space.options;
    if (node->contractions >= o.max_weights) return;
    auto& rules = space.rules;
    auto dims = data_dims(space, *node);
    const size_t n = dims.size();
    std::vector<Role> roles(n, Role::None);
    // Odometer over {None, Inner, Outer}^n, in a fixed order.
    while (true) {
        size_t i = 0;
        while (i < n) {
            roles[i] = static_cast<Role>((static_cast<int>(roles[i]) + 1) % 3);
            if (roles[i] != Role::None) break;
            ++i;
        }
        if (i == n) break;
        std::vector<const Dim*> group;
        std::vector<Size> kept;
        bool outer_reduce = false;
        for (size_t k = 0; k < n; ++k)
            if (roles[k] != Role::None) {
                group.push_back(dims[k]);
                if (roles[k] == Role::Inner) kept.push_back(dims[k]->size);
                outer_reduce |= roles[k] == Role::Outer && dims[k]->is_bare_reduce();
            }
        if (static_cast<int>(group.size()) > o.max_shares) continue;
        if (rules.check(NoExpandReduce, outer_reduce)) continue;
        if (o.canonical_rules && rules.check(ContractionNeedsTwoShares, group.size() < 2)) continue;
        bool depends = node->contractions == 0;
        for (const Dim* d : group) depends |= d->depends_on(node->latest_group);
        // Independent of the previous contraction: it could come first, so require a canonical order.
        if (rules.check(IndependentContractionsOrdered, !depends && group.front()->hash <= node->latest_leader)) continue;
        if (!o.structural && !priors_allow(space, *node, dims, roles)) continue;

        if (pruned_early(space, *node, group, kept, Prim::Contraction)) continue;
        uint64_t g = fnv1a("Contraction");
        for (size_t k = 0; k < n; ++k)
            if (roles[k] != Role::None) g = combine(combine(g, dims[k]->hash), static_cast<uint64_t>(roles[k]));
        Step step{Prim::Contraction, group, {}, {}, {}, g};
        std::array<int8_t, kMaxVariables> usage{};
        double params = 0, min_weight = 1e300;
        for (size_t v = 0; v < space.ctx.valuations.size(); ++v) {
            double w = 1;
            for (const Dim* d : group) w *= space.ctx.approx(d->size, static_cast<int>(v));
            params += w;
            min_weight = std::min(min_weight, w);
        }
        if (!o.structural && min_weight < o.min_weight_params) continue;  // a search-time filter
        for (size_t k = 0; k < n; ++k) {
            if (roles[k] == Role::None) continue;
            const Dim* d = dims[k];
            const Dim* lhs = space.store.unary(DimKind::ShareL, d, d->size, {}, g);
            const Dim* rhs = space.store.unary(DimKind::ShareR, d, d->size, {}, g);
            if (roles[k] == Role::Inner) step.produced.push_back(lhs);
            else step.expanded.push_back(lhs);
            step.produced.push_back(rhs);
            auto u = abs_usage(d->size, space.ctx, true);
            for (int j = 0; j < kMaxVariables; ++j) usage[j] = static_cast<int8_t>(usage[j] + u[j]);
        }
        double flops = contraction_flops(space, *node, group);
        if (auto c = make_child(space, node, std::move(step), usage, flops, params)) out.push_back(c);
    }
}

}  // namespace syno
