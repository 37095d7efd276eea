// REDUCE: a new summation variable; generated first (the reduction stage), in non-increasing domain order.
#include "common.hpp"

namespace syno {

void generate_reduce(const Space& space, const NodePtr& node, std::vector<NodePtr>& out) {
    if (node->reductions >= space.options.max_reductions) return;
    ReachCheck reach(space, *node);
    for (const Size& domain : space.enumerate_sizes(*node, false)) {
        if (space.rules.check(ReduceOrder, node->reductions > 0 && node->last_reduction.lex_less(domain))) continue;
        if (pruned_early(space, reach, {}, {domain}, Prim::Reduce)) continue;
        int multiplicity = 0;
        for (const Dim* d : node->frontier)
            if (d->is(DimKind::Reduce) && d->size == domain) ++multiplicity;
        Step step{Prim::Reduce, {}, {space.store.reduce(multiplicity, domain)}, {}, domain};
        if (auto c = make_child(space, node, std::move(step), abs_usage(domain, space.ctx))) out.push_back(c);
    }
}

}  // namespace syno
