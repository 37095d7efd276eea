// CONTRACTION: a group of SHAREs introducing one new weight. An inner SHARE keeps its data side (the
// coordinate is multiplied, and summed if it is a reduction); an outer SHARE also EXPANDs its data side (the
// coordinate exists only in the weight, like C_out of a convolution).
//
// The groups are the 3^n role assignments of the n data coordinates (an odometer), and nearly all are rejected
// (in the default space 1 in 50 passes the shape distance, 1 in 200 makes a child): a group is a pair of bit masks
// (inner, outer) checked against the node's facts computed once (contraction_facts.hpp), and one that the FLOPs
// or size budgets reject interns no coordinate. The rules are checked in the same order on the same groups as
// ever: the children (in the same order) and the rule counters are unchanged.
#include "contraction_facts.hpp"

#include "../hash.hpp"

namespace syno {

namespace {

using contraction::bit;
using contraction::for_each;
using contraction::Mask;

// The space priors a CONTRACTION decides alone (priors.hpp): every one is final once the contraction is made.
bool priors_allow(const Space& space, contraction::Tally& rules, const contraction::NodeFacts& f, Mask inner,
                  Mask outer) {
    const Options& o = space.options;
    if (o.prior_weight_io && rules.check(PriorWeightInputOutput, inner == 0 || outer == 0)) return false;
    if (o.prior_outer_kinds && rules.check(PriorOuterKind, (outer & f.other) != 0)) return false;
    if (o.prior_lowrank_size > 0 && rules.check(PriorLowRankSize, (outer & f.wrong_rank) != 0)) return false;
    if (o.prior_max_outer > 0 && rules.check(PriorOuterProduct, f.outer_product(outer) > o.prior_max_outer))
        return false;
    return true;
}

}  // namespace

void generate_contraction(const Space& space, const NodePtr& node, std::vector<NodePtr>& out) {
    const Options& o = space.options;
    if (node->contractions >= o.max_weights) return;
    const contraction::NodeFacts facts(space, *node, data_dims(space, *node), !o.structural && o.prior_max_outer > 0);
    const std::vector<const Dim*>& dims = facts.dims;
    const size_t n = dims.size();
    contraction::Tally rules(space);
    ReachCheck reach(space, *node);
    contraction::DistanceMemo distance(facts);
    const int limit = o.max_count[static_cast<int>(Prim::Contraction)];
    const bool count_left = limit < 0 || node->counts[static_cast<int>(Prim::Contraction)] < limit;
    std::vector<uint8_t> roles(n, 0);  // 0 none, 1 inner, 2 outer: the odometer's digits
    Mask inner = 0, outer = 0;
    int shares = 0;  // the group's size (kept by the odometer: popcount is a library call without -mpopcnt)
    std::vector<const Dim*> group;
    std::vector<Size> kept;
    // Odometer over {None, Inner, Outer}^n, in a fixed order (coordinate 0 the fastest digit).
    while (true) {
        size_t i = 0;
        for (; i < n; ++i) {
            roles[i] = static_cast<uint8_t>((roles[i] + 1) % 3);
            if (roles[i] == 1) { inner |= bit(i), ++shares; break; }
            if (roles[i] == 2) { inner &= ~bit(i), outer |= bit(i); break; }
            outer &= ~bit(i), --shares;  // back to none: carry
        }
        if (i == n) break;
        const Mask members = inner | outer;
        if (shares > o.max_shares) continue;
        if (rules.check(NoExpandReduce, (outer & facts.bare_reduce) != 0)) continue;
        if (o.canonical_rules && rules.check(ContractionNeedsTwoShares, shares < 2)) continue;
        // Independent of the previous contraction: it could come first, so require a canonical order.
        bool depends = node->contractions == 0 || (members & facts.depends) != 0;
        const Dim* front = dims[static_cast<size_t>(std::countr_zero(members))];
        if (rules.check(IndependentContractionsOrdered, !depends && front->hash <= node->latest_leader)) continue;
        if (!o.structural && !priors_allow(space, rules, facts, inner, outer)) continue;

        group.clear();
        kept.clear();
        for_each(members, [&](size_t k) {
            group.push_back(dims[k]);
            if (inner & bit(k)) kept.push_back(dims[k]->size);
        });
        // may_reach: the count, the kept sizes (its inner SHAREs'), the shape distance
        if (!count_left || (inner & ~facts.valid) != 0 ||
            !distance.allows(members, outer, [&] { return reach.distance_allows(group, kept, Prim::Contraction); })) {
            rules.pruned();
            continue;
        }
        double params = 0, min_weight = 1e300;
        for (size_t v = 0; v < facts.mappings; ++v) {
            double w = 1;
            for_each(members, [&](size_t k) { w *= facts.at(k, v); });
            params += w;
            min_weight = std::min(min_weight, w);
        }
        if (!o.structural && min_weight < o.min_weight_params) continue;  // a search-time filter
        std::array<int8_t, kMaxVariables> usage{};
        for_each(members, [&](size_t k) {
            for (int j = 0; j < kMaxVariables; ++j) usage[j] = static_cast<int8_t>(usage[j] + facts.usage[k][j]);
        });
        double flops = facts.flops(members);
        // the SHAREs' sizes (as build_child checks them), then the budgets: without interning the SHAREs
        if ((members & ~facts.valid) != 0 || pruned_before_build(space, *node, Prim::Contraction, usage, flops, params)) {
            rules.pruned();
            continue;
        }
        uint64_t g = fnv1a("Contraction");
        for_each(members, [&](size_t k) { g = combine(combine(g, dims[k]->hash), uint64_t{roles[k]}); });
        Step step{Prim::Contraction, group, {}, {}, {}, g};
        for_each(members, [&](size_t k) {
            const Dim* d = dims[k];
            const Dim* lhs = space.store.unary(DimKind::ShareL, d, d->size, {}, g);
            const Dim* rhs = space.store.unary(DimKind::ShareR, d, d->size, {}, g);
            if (inner & bit(k)) step.produced.push_back(lhs);
            else step.expanded.push_back(lhs);
            step.produced.push_back(rhs);
        });
        if (auto c = make_child(space, node, std::move(step), usage, flops, params)) out.push_back(c);
    }
}

}  // namespace syno
