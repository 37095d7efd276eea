// Small helpers shared by the primitive generators.
#pragma once
#include <array>
#include <cstdlib>
#include <vector>

#include "../space.hpp"

namespace syno {

// Frontier coordinates that views may touch: everything but weight coordinates (rule weights-never-viewed).
inline std::vector<const Dim*> data_dims(const Space& space, const NodeState& n) {
    std::vector<const Dim*> out;
    for (const Dim* d : n.frontier)
        if (!space.rules.check(WeightsNeverViewed, d->is(DimKind::ShareR))) out.push_back(d);
    return out;
}

// views-commute-with-contraction: after a contraction, a view must touch a coordinate that depends on it.
inline bool commutes_with_latest_contraction(const NodeState& n, std::initializer_list<const Dim*> dims) {
    if (n.contractions == 0) return false;
    for (const Dim* d : dims)
        if (d->depends_on(n.latest_group)) return false;
    return true;
}

inline std::array<int8_t, kMaxVariables> abs_usage(const Size& s, const SizeContext& ctx, bool primary_only = false) {
    std::array<int8_t, kMaxVariables> u{};
    for (int i = 0; i < ctx.count(); ++i)
        if (!primary_only || ctx.is_primary(i)) u[i] = static_cast<int8_t>(std::abs(s.exponent[i]));
    return u;
}

// A candidate pruned before make_child was called, counted as make_child counts a pruned child.
inline void count_pruned(const Space& space) {
    int slot = RuleCounters::depth_slot();
    space.depth_counters.canonical[slot].fetch_add(1, std::memory_order_relaxed);
    space.depth_counters.pruned[slot].fetch_add(1, std::memory_order_relaxed);
}

// Distance pre-check (may_reach, by the node's ReachCheck) before any coordinate is interned; a failure counts as a
// pruned candidate.
inline bool pruned_early(const Space& space, ReachCheck& reach, const std::vector<const Dim*>& consumed,
                         const std::vector<Size>& produced, Prim prim) {
    if (reach(consumed, produced, prim)) return false;
    count_pruned(space);
    return true;
}

}  // namespace syno
