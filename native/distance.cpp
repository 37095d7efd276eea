// Shape distance: a sound lower bound on the number of primitives still needed to turn the frontier's data
// coordinates into exactly the input coordinates. Derivation (docs/architecture.md has the table):
//   match frontier data coordinates to input coordinates of equal size (a maximum matching, M);
//   u = unmatched frontier coordinates, v = unmatched input coordinates.
//   One primitive changes at most: SPLIT/UNFOLD u by 2, v by 1; MERGE u by 1, v by 2; others u, v by 1;
//   so steps >= max(ceil(u/2), ceil(v/2), ceil((u+v)/3)).
//   A CONTRACTION never lowers v but may drop any number of coordinates (outer SHAREs): with one still
//   available the u-part of the bound is capped at 1. If a weight is still required, add that step.
//   If numel(frontier) != numel(input), at least one numel-changing primitive is needed.
#include <algorithm>
#include <map>

#include "space.hpp"

namespace syno {

namespace {

int ceil_div(int a, int b) { return (a + b - 1) / b; }

}  // namespace

int shape_distance(const Space& space, const ShapeSummary& n) {
    const std::vector<Size>& data = n.data;
    std::vector<Size> desired;
    for (auto& in : space.input)
        if (in.fixed_output < 0) desired.push_back(in.size);

    // Maximum matching by equal size = sum over sizes of min(counts).
    std::vector<std::pair<Size, int>> have, want;
    auto add = [](std::vector<std::pair<Size, int>>& v, const Size& s) {
        for (auto& [size, c] : v)
            if (size == s) { ++c; return; }
        v.emplace_back(s, 1);
    };
    for (const Size& d : data) add(have, d);
    for (const Size& s : desired) add(want, s);
    int matched = 0;
    for (auto& [s, c] : have)
        for (auto& [t, k] : want)
            if (s == t) matched += std::min(c, k);
    int u = static_cast<int>(data.size()) - matched;
    int v = static_cast<int>(desired.size()) - matched;

    auto views_only = [](int u, int v) { return std::max({ceil_div(u, 2), ceil_div(v, 2), ceil_div(u + v, 3)}); };
    int view_bound = views_only(u, v);

    Size numel_have, numel_want;
    for (const Size& d : data) numel_have = numel_have * d;
    for (const Size& s : desired) numel_want = numel_want * s;
    Size q = numel_have / numel_want;
    bool more_reductions = n.reducing && n.reductions < space.options.max_reductions;
    bool bare_expand = space.options.max_count[static_cast<int>(Prim::Expand)] != 0;
    bool strides = space.options.max_count[static_cast<int>(Prim::Stride)] != 0;
    if (!q.is_one()) {
        // Going up, numel grows only by STRIDE (coefficients) and REDUCE (reduction stage); it shrinks by
        // UNFOLD (coefficient windows), EXPAND and outer SHAREs.
        bool primary_excess = false;
        for (int i = 0; i < space.ctx.count(); ++i) {
            int e = q.exponent[i];
            if (space.ctx.is_primary(i)) {
                if (e < 0 && !more_reductions) return kUnreachable;
                if (e > 0) primary_excess = true;
            } else if (e < 0 && !strides && !more_reductions) {
                return kUnreachable;
            }
        }
        view_bound = std::max(view_bound, 1);
        // Views alone cannot remove a primary factor without a bare EXPAND.
        if (primary_excess && !bare_expand) view_bound = kUnreachable;
    }

    // Either no more contraction (views only), or at least one contraction: it never lowers v, and its
    // outer SHAREs can drop any unmatched coordinate except bare reductions (no-expand-reduce). So at best
    // the unmatched bare reductions remain: match reductions first to find how few that can be.
    int reduce_unmatched = 0;
    {
        std::vector<std::pair<Size, int>> red;
        for (const Size& r : n.reduces) add(red, r);
        for (auto& [r, c] : red) {
            int wanted = 0;
            for (auto& [t, k] : want)
                if (t == r) wanted = k;
            reduce_unmatched += std::max(0, c - wanted);
        }
    }
    bool contraction_left = n.contractions < space.options.max_weights;
    bool contraction_needed = n.contractions < space.options.min_weights;
    int with_contraction = contraction_left ? 1 + views_only(reduce_unmatched, v) : kUnreachable;
    if (contraction_needed) return with_contraction;
    return std::min(view_bound, with_contraction);
}

ShapeSummary summarize(const NodeState& n) {
    ShapeSummary s{{}, {}, n.contractions, n.reducing, n.reductions};
    for (const Dim* d : n.frontier) {
        if (!d->is(DimKind::ShareR)) s.data.push_back(d->size);
        if (d->is_bare_reduce()) s.reduces.push_back(d->size);
    }
    return s;
}

int shape_distance(const Space& space, const NodeState& n) { return shape_distance(space, summarize(n)); }

bool may_reach(const Space& space, const NodeState& parent, const std::vector<const Dim*>& consumed,
               const std::vector<Size>& produced, Prim prim) {
    for (const Size& p : produced)
        if (!space.valid_extent(p)) return false;
    if (!space.options.distance_pruning) return true;
    ShapeSummary s = summarize(parent);
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
    int d = shape_distance(space, s);
    return d < kUnreachable && parent.depth + 1 + d <= space.options.max_depth;
}

}  // namespace syno
