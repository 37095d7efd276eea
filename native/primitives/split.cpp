// SPLIT (read bottom-up): two coordinates l, r become one coordinate l * |r| + r above them.
#include "common.hpp"

namespace syno {

void generate_split(const Space& space, const NodePtr& node, std::vector<NodePtr>& out) {
    ReachCheck reach(space, *node);
    auto& rules = space.rules;
    auto dims = data_dims(space, *node);
    for (const Dim* l : dims) {
        if (rules.check(SplitChainsRight, l->is(DimKind::Split))) continue;
        for (const Dim* r : dims) {
            if (l == r) continue;
            bool undoes_merge = l->is(DimKind::MergeL) && r->is(DimKind::MergeR) && l->a == r->a;
            if (rules.check(SplitUndoesMerge, undoes_merge)) continue;
            if (rules.check(SplitOfReductions, l->is_bare_reduce() && r->is_bare_reduce())) continue;
            if (rules.check(ViewsCommuteWithContraction, commutes_with_latest_contraction(*node, {l, r}))) continue;
            if (pruned_early(space, reach, {l, r}, {l->size * r->size}, Prim::Split)) continue;
            const Dim* above = space.store.binary(DimKind::Split, l, r, l->size * r->size);
            Step step{Prim::Split, {l, r}, {above}};
            if (auto c = make_child(space, node, std::move(step), {})) out.push_back(c);
        }
    }
}

}  // namespace syno
