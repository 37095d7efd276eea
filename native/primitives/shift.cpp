// SHIFT (read bottom-up): the coordinate above is (d + 1) mod n. One fixed direction, everywhere.
#include "common.hpp"

namespace syno {

void generate_shift(const Space& space, const NodePtr& node, std::vector<NodePtr>& out) {
    ReachCheck reach(space, *node);
    auto& rules = space.rules;
    for (const Dim* d : data_dims(space, *node)) {
        if (rules.check(ShiftOfReduction, d->is_bare_reduce())) continue;
        if (space.options.canonical_rules && rules.check(ShiftChain, d->is(DimKind::Shift))) continue;
        if (rules.check(ShiftOnUnordered, d->unordered)) continue;
        if (rules.check(ShareLhsViewedBelow, d->is(DimKind::ShareL))) continue;
        if (rules.check(ViewsCommuteWithContraction, commutes_with_latest_contraction(*node, {d}))) continue;
        if (pruned_early(space, reach, {d}, {d->size}, Prim::Shift)) continue;
        Step step{Prim::Shift, {d}, {space.store.unary(DimKind::Shift, d, d->size)}};
        if (auto c = make_child(space, node, std::move(step), {})) out.push_back(c);
    }
}

}  // namespace syno
