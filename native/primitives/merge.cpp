// MERGE b (read bottom-up): one coordinate d becomes two above it, d / b (lhs) and d mod b (rhs).
#include "common.hpp"

namespace syno {

void generate_merge(const Space& space, const NodePtr& node, std::vector<NodePtr>& out) {
    auto& rules = space.rules;
    for (const Dim* d : data_dims(space, *node)) {
        if (rules.check(MergeAboveSplit, d->is(DimKind::Split))) continue;
        if (rules.check(MergeChainsRight, d->is(DimKind::MergeL))) continue;
        if (rules.check(MergeOfReduction, d->is_bare_reduce())) continue;
        if (rules.check(ShareLhsViewedBelow, d->is(DimKind::ShareL))) continue;
        if (rules.check(ViewsCommuteWithContraction, commutes_with_latest_contraction(*node, {d}))) continue;
        for (const Size& block : space.enumerate_divisors(*node, d->size)) {
            bool approximately_redundant = false;
            if (d->is(DimKind::Unfold)) {
                approximately_redundant = true;  // the window is small against the block in every mapping
                for (size_t v = 0; v < space.ctx.valuations.size(); ++v)
                    approximately_redundant &= space.ctx.approx(d->b->size, static_cast<int>(v)) <=
                                               space.ctx.approx(block, static_cast<int>(v));
            }
            if (space.options.canonical_rules && rules.check(MergeLargeBlockAboveUnfold, approximately_redundant)) continue;
            Size major = d->size / block;
            std::array<int8_t, kMaxVariables> usage{};
            for (int i = 0; i < space.ctx.count(); ++i)
                usage[i] = static_cast<int8_t>(
                    (std::abs(major.exponent[i]) + std::abs(block.exponent[i]) - std::abs(d->size.exponent[i])) / 2);
            if (pruned_early(space, *node, {d}, {major, block}, Prim::Merge)) continue;
            const Dim* lhs = space.store.unary(DimKind::MergeL, d, major, block);
            const Dim* rhs = space.store.unary(DimKind::MergeR, d, block, block);
            Step step{Prim::Merge, {d}, {lhs, rhs}, {}, block};
            if (auto c = make_child(space, node, std::move(step), usage)) out.push_back(c);
        }
    }
}

}  // namespace syno
