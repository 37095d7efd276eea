// MERGE b (read bottom-up): one coordinate d becomes two above it, d / b (lhs) and d mod b (rhs).
#include <cmath>

#include "common.hpp"

namespace syno {

namespace {

// merge-large-block-above-unfold, decided on structure so that every valuation agrees: a block with a
// primary factor is large against any window (windows are coefficient-only); between coefficient-only sizes,
// compare at the coefficients' spec values ("k=3"), part of the space's signature; a coefficient without one
// compares by exponents (block = window * a monomial with no negative exponent).
bool window_fits_block(const SizeContext& ctx, const Size& window, const Size& block) {
    if (ctx.primary_degree(block) > 0) return true;
    Size q = block / window;
    bool dominated = true, defaults = true;
    double ratio = 1;
    for (int i = 0; i < ctx.count(); ++i) {
        if (!q.exponent[i]) continue;
        dominated &= q.exponent[i] > 0;
        const auto& value = ctx.variables[i].default_value;
        if (!value) defaults = false;
        else ratio *= std::pow(static_cast<double>(*value), q.exponent[i]);
    }
    return defaults ? ratio >= 1 : dominated;
}

}  // namespace

void generate_merge(const Space& space, const NodePtr& node, std::vector<NodePtr>& out) {
    ReachCheck reach(space, *node);
    auto& rules = space.rules;
    for (const Dim* d : data_dims(space, *node)) {
        if (rules.check(MergeAboveSplit, d->is(DimKind::Split))) continue;
        if (rules.check(MergeChainsRight, d->is(DimKind::MergeL))) continue;
        if (rules.check(MergeOfReduction, d->is_bare_reduce())) continue;
        if (rules.check(ShareLhsViewedBelow, d->is(DimKind::ShareL))) continue;
        if (rules.check(ViewsCommuteWithContraction, commutes_with_latest_contraction(*node, {d}))) continue;
        for (const Size& block : space.enumerate_divisors(*node, d->size)) {
            bool approximately_redundant = d->is(DimKind::Unfold) && window_fits_block(space.ctx, d->b->size, block);
            if (space.options.canonical_rules && rules.check(MergeLargeBlockAboveUnfold, approximately_redundant)) continue;
            Size major = d->size / block;
            std::array<int8_t, kMaxVariables> usage{};
            for (int i = 0; i < space.ctx.count(); ++i)
                usage[i] = static_cast<int8_t>(
                    (std::abs(major.exponent[i]) + std::abs(block.exponent[i]) - std::abs(d->size.exponent[i])) / 2);
            if (pruned_early(space, reach, {d}, {major, block}, Prim::Merge)) continue;
            const Dim* lhs = space.store.unary(DimKind::MergeL, d, major, block);
            const Dim* rhs = space.store.unary(DimKind::MergeR, d, block, block);
            Step step{Prim::Merge, {d}, {lhs, rhs}, {}, block};
            if (auto c = make_child(space, node, std::move(step), usage)) out.push_back(c);
        }
    }
}

}  // namespace syno
