// Shape distance: a lower bound on the primitives still needed to turn the frontier into a final operator
// (its data coordinates become exactly the input's non-pass-through coordinates). It must be SOUND: never
// above the true number, under every option. The bound is the minimum over the ways the path may continue
// (c = how many more CONTRACTIONs it uses), each computed as if every other primitive were available: a
// bound for a relaxed space is a bound for the real one, so count limits (max_counts, including 0), size
// allowances, coefficient degrees and budgets only ever make the true distance larger.
//
// Counting coordinates. Match frontier data coordinates to input coordinates of equal size (a maximum
// matching M); u = unmatched frontier coordinates, v = unmatched input coordinates. A final node has u = v = 0.
// What one step can lower (bottom-up; pass-through and unordered dims change nothing: pass-through pairs
// are outside both sides, and sizes ignore order):
//     primitive            consumes  produces  u lowered by  v lowered by
//     SPLIT, UNFOLD           2         1          <= 2          <= 1
//     MERGE                   1         2          <= 1          <= 2
//     SHIFT, STRIDE           1         1          <= 1          <= 1
//     EXPAND                  1         0          <= 1             0
//     REDUCE                  0         1             0          <= 1
//     CONTRACTION           group     inner       any           0   (outer SHAREs drop coordinates; inner
//                                                                     SHAREs keep their sizes)
//   views(u, v) = max(ceil(u/2), ceil(v/2), ceil((u+v)/3)) lower-bounds the views needed.
//   c = 0: views(u, v).
//   c = 1: outer SHAREs cannot drop a bare reduction (no-expand-reduce, never switched off), and an inner one
//     keeps its size, so right after the contraction u >= r, where r = bare reductions left unmatched by
//     matching them alone. Every view lowers (r, v) by the amounts in the table, so views(r, v) can fall by
//     at most 1 per view before the contraction, and bounds the views after it: 1 + views(r, v).
//   c >= 2: a bare reduction can be inner-shared by one contraction and dropped by the next, so only
//     v counts: c + ceil(v/2). c >= min_weights - contractions, c <= max_weights - contractions.
// Counting elements. numel(frontier) must become numel(input); q = their quotient, a monomial. Every
// coordinate size is legal (no negative primary exponent; a size without primaries has no negative
// exponent), so per variable the primitives that can move q's exponent are:
//     raise a primary:        REDUCE (a new domain)
//     lower a primary:        EXPAND, CONTRACTION (outer SHARE)          (windows and strides have none)
//     raise a coefficient:    REDUCE, STRIDE, EXPAND, CONTRACTION        (dividing by e.g. s^-1*C)
//     lower a coefficient:    REDUCE, UNFOLD, EXPAND, CONTRACTION
//   A needed move whose primitives are all unavailable (count limit 0, reduction stage over, no contraction
//   left) makes that continuation unreachable; q != 1 needs at least one step.
#include <algorithm>

#include "space.hpp"

namespace syno {

namespace {

int ceil_div(int a, int b) { return (a + b - 1) / b; }

int views(int u, int v) { return std::max({ceil_div(u, 2), ceil_div(v, 2), ceil_div(u + v, 3)}); }

using Counts = DistanceScratch::Counts;

void add(Counts& counts, const Size& s) {
    for (auto& [size, c] : counts)
        if (size == s) { ++c; return; }
    counts.emplace_back(s, 1);
}

// Size of a maximum matching by equal size: the sum over sizes of the smaller count.
int matching(const Counts& have, const Counts& want) {
    int matched = 0;
    for (auto& [s, c] : have)
        for (auto& [t, k] : want)
            if (s == t) matched += std::min(c, k);
    return matched;
}

// Which exponent moves of q the remaining primitives allow, with or without another contraction.
struct Moves {
    bool raise_primary, lower_primary, raise_coefficient, lower_coefficient;
};

bool feasible(const SizeContext& ctx, const Size& q, const Moves& m) {
    for (int i = 0; i < ctx.count(); ++i) {
        int e = q.exponent[i];  // > 0: the frontier has too much of variable i; going up must lower it
        bool primary = ctx.is_primary(i);
        if (e < 0 && !(primary ? m.raise_primary : m.raise_coefficient)) return false;
        if (e > 0 && !(primary ? m.lower_primary : m.lower_coefficient)) return false;
    }
    return true;
}

}  // namespace

int shape_distance(const Space& space, const ShapeSummary& n, DistanceScratch& scratch) {
    const Options& o = space.options;
    auto available = [&](Prim p) { return o.max_count[static_cast<int>(p)] != 0; };

    Counts& have = scratch.have;
    Counts& reduces = scratch.reduces;
    const Counts& want = scratch.want;
    if (scratch.desired < 0) {
        scratch.want.clear();
        scratch.numel_want = Size{};
        scratch.desired = 0;
        for (auto& in : space.input)
            if (in.fixed_output < 0)
                add(scratch.want, in.size), ++scratch.desired, scratch.numel_want = scratch.numel_want * in.size;
    }
    const int desired = scratch.desired;
    have.clear(), reduces.clear();
    for (const Size& d : n.data) add(have, d);
    for (const Size& r : n.reduces) add(reduces, r);
    int matched = matching(have, want);
    int u = static_cast<int>(n.data.size()) - matched;
    int v = desired - matched;
    int r = static_cast<int>(n.reduces.size()) - matching(reduces, want);

    Size numel_have;
    for (const Size& d : n.data) numel_have = numel_have * d;
    Size q = numel_have / scratch.numel_want;
    bool reduce = n.reducing && n.reductions < o.max_reductions && available(Prim::Reduce);
    bool expand = available(Prim::Expand);
    Moves view_moves{reduce, expand, reduce || available(Prim::Stride) || expand,
                     reduce || available(Prim::Unfold) || expand};
    Moves contraction_moves{reduce, true, true, true};
    int numel_steps = q.is_one() ? 0 : 1;

    int contractions_left = o.max_weights - n.contractions;
    int contractions_needed = std::max(0, o.min_weights - n.contractions);
    int best = kUnreachable;
    if (contractions_needed == 0 && feasible(space.ctx, q, view_moves))
        best = std::max(views(u, v), numel_steps);
    if (feasible(space.ctx, q, contraction_moves)) {
        if (contractions_left >= 1 && contractions_needed <= 1) best = std::min(best, 1 + views(r, v));
        if (contractions_left >= 2) best = std::min(best, std::max(2, contractions_needed) + ceil_div(v, 2));
    }
    return best;
}

ShapeSummary summarize(const NodeState& n) {
    ShapeSummary s{{}, {}, n.contractions, n.reducing, n.reductions};
    for (const Dim* d : n.frontier) {
        if (!d->is(DimKind::ShareR)) s.data.push_back(d->size);
        if (d->is_bare_reduce()) s.reduces.push_back(d->size);
    }
    return s;
}

int shape_distance(const Space& space, const ShapeSummary& n) {
    DistanceScratch scratch;
    return shape_distance(space, n, scratch);
}

int shape_distance(const Space& space, const NodeState& n) { return shape_distance(space, summarize(n)); }

}  // namespace syno
