// may_reach: the shape-distance pre-check of a candidate child, before its coordinates are interned.
#include <algorithm>

#include "space.hpp"

namespace syno {

ReachCheck::ReachCheck(const Space& space, const NodeState& parent)
    : space_(space), parent_(parent), summary_(summarize(parent)) {}

bool ReachCheck::operator()(const std::vector<const Dim*>& consumed, const std::vector<Size>& produced, Prim prim) {
    // The count limit, as build_child checks it, but before any coordinate is interned (memory).
    int limit = space_.options.max_count[static_cast<int>(prim)];
    if (limit >= 0 && parent_.counts[static_cast<int>(prim)] >= limit) return false;
    for (const Size& p : produced)
        if (!space_.valid_extent(p)) return false;
    return distance_allows(consumed, produced, prim);
}

bool ReachCheck::distance_allows(const std::vector<const Dim*>& consumed, const std::vector<Size>& produced,
                                 Prim prim) {
    if (!space_.options.distance_pruning) return true;
    ShapeSummary& s = candidate_;
    s.data.assign(summary_.data.begin(), summary_.data.end());
    s.reduces.assign(summary_.reduces.begin(), summary_.reduces.end());
    s.contractions = summary_.contractions;
    s.reducing = summary_.reducing;
    s.reductions = summary_.reductions;
    for (const Dim* d : consumed) {
        if (d->is(DimKind::ShareR)) continue;
        auto it = std::find(s.data.begin(), s.data.end(), d->size);
        if (it != s.data.end()) s.data.erase(it);
        if (d->is_bare_reduce()) {
            auto r = std::find(s.reduces.begin(), s.reduces.end(), d->size);
            if (r != s.reduces.end()) s.reduces.erase(r);
        }
    }
    for (const Size& p : produced) s.data.push_back(p);
    if (prim == Prim::Reduce)
        for (const Size& p : produced) s.reduces.push_back(p);
    if (prim != Prim::Reduce) s.reducing = false;
    else ++s.reductions;
    if (prim == Prim::Contraction) ++s.contractions;
    int d = shape_distance(space_, s, scratch_);
    return d < kUnreachable && parent_.depth + 1 + d <= space_.options.max_depth;
}

bool may_reach(const Space& space, const NodeState& parent, const std::vector<const Dim*>& consumed,
               const std::vector<Size>& produced, Prim prim) {
    return ReachCheck(space, parent)(consumed, produced, prim);
}

}  // namespace syno
