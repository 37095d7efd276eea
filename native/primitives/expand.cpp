// EXPAND (read bottom-up): a coordinate the data does not depend on (broadcast). Bare EXPANDs are off by
// default (max_count[EXPAND] = 0); inside a CONTRACTION, outer SHAREs expand their data side.
#include "common.hpp"

namespace syno {

void generate_expand(const Space& space, const NodePtr& node, std::vector<NodePtr>& out) {
    if (space.options.max_count[static_cast<int>(Prim::Expand)] == 0) return;
    ReachCheck reach(space, *node);
    auto& rules = space.rules;
    for (const Dim* d : data_dims(space, *node)) {
        if (space.options.canonical_rules && rules.check(ExpandOnlyRepeats, !d->is(DimKind::MergeR))) continue;
        if (rules.check(ViewsCommuteWithContraction, commutes_with_latest_contraction(*node, {d}))) continue;
        if (pruned_early(space, reach, {d}, {}, Prim::Expand)) continue;
        Step step{Prim::Expand, {d}, {}, {d}};
        if (auto c = make_child(space, node, std::move(step), {})) out.push_back(c);
    }
}

}  // namespace syno
