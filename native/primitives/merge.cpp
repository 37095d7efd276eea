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
