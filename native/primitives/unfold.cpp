// UNFOLD (read bottom-up): a main coordinate m and an odd window w of size k become m + w - k/2 above them,
// zero outside the main extent (same padding).
#include <cmath>

#include "common.hpp"

namespace syno {

namespace {

// A window is coefficient-only (structure). The search also wants it odd and at most max_unfold_window at
// the space's valuations; a structural (replay) space leaves oddness to replay's size check.
bool is_window(const Space& space, const Dim* w) {
    if (space.ctx.has_primary(w->size)) return false;
    if (space.options.structural) return true;
    for (size_t v = 0; v < space.ctx.valuations.size(); ++v) {
        auto k = space.ctx.value(w->size, static_cast<int>(v));
        if (!k || *k % 2 == 0 || *k > space.options.max_unfold_window) return false;
    }
    return true;
}

// A search-time filter on the space's valuations (a window wider than its main extent is still well defined).
bool ratio_ok(const Space& space, const Dim* m, const Dim* w) {
    if (space.options.structural) return true;
    for (size_t v = 0; v < space.ctx.valuations.size(); ++v)
        if (space.ctx.approx(m->size, static_cast<int>(v)) <
            space.options.min_unfold_ratio * space.ctx.approx(w->size, static_cast<int>(v)))
            return false;
    return true;
}

}  // namespace

void generate_unfold(const Space& space, const NodePtr& node, std::vector<NodePtr>& out) {
    ReachCheck reach(space, *node);
    auto& rules = space.rules;
    auto dims = data_dims(space, *node);
    for (const Dim* m : dims) {
        if (rules.check(UnfoldReducesAtMostOne, m->ends_in_reduce)) continue;
        for (const Dim* w : dims) {
            if (m == w || !is_window(space, w) || !ratio_ok(space, m, w)) continue;
            if (space.options.canonical_rules && rules.check(UnfoldWindowNotBareReduction, w->is_bare_reduce())) continue;
            bool out_of_order = m->is(DimKind::Unfold) && w->size.lex_less(m->b->size);
            if (rules.check(UnfoldOrder, out_of_order)) continue;
            if (rules.check(ViewsCommuteWithContraction, commutes_with_latest_contraction(*node, {m, w}))) continue;
            if (pruned_early(space, reach, {m, w}, {m->size}, Prim::Unfold)) continue;
            Step step{Prim::Unfold, {m, w}, {space.store.binary(DimKind::Unfold, m, w, m->size)}};
            if (auto c = make_child(space, node, std::move(step), {})) out.push_back(c);
        }
    }
}

}  // namespace syno
