// What generate_contraction computes once per node instead of once per candidate group (3^n groups of the n data
// coordinates, nearly all rejected): the coordinates' facts as bit masks, their values by mapping, the rule tallies
// and the shape distance's verdicts. Internal to contraction.cpp.
#pragma once
#include <algorithm>
#include <bit>
#include <stdexcept>

#include "../priors.hpp"
#include "common.hpp"

namespace syno::contraction {

using Mask = uint64_t;  // a set of data coordinates, bit k for coordinate k

inline Mask bit(size_t k) { return Mask{1} << k; }

// Calls f(k) for each coordinate of `m`, in order.
template <typename F>
void for_each(Mask m, F f) {
    for (; m; m &= m - 1) f(static_cast<size_t>(std::countr_zero(m)));
}

// Per node: the data coordinates' facts (as masks), and the values the candidates' budgets and priors multiply.
struct NodeFacts {
    std::vector<const Dim*> dims;
    size_t mappings;
    Mask bare_reduce = 0, depends = 0, valid = 0;  // bare reductions; depending on the latest contraction; sizes
                                                   // that are valid extents (a SHARE's size)
    Mask other = 0, low_rank = 0, wrong_rank = 0;  // as an outer SHARE's coordinate (priors.hpp OuterKind); low
                                                   // rank of another size than prior_lowrank_size
    std::vector<std::array<int8_t, kMaxVariables>> usage;  // primary exponents' magnitudes
    std::vector<double> value;        // value[k * mappings + v]: coordinate k's size at mapping v (approx)
    std::vector<double> fixed_value;  // the pass-through inputs' sizes, by mapping then input
    std::vector<double> outer_base;   // product of the node's contractions' non-low-rank outer sizes, by mapping
    // No exponent of a product of any of the coordinates' sizes, in any order, can leave the range (sum of the
    // magnitudes at most kMaxExponent): the shape distance is then the same whatever order it multiplies them in.
    bool order_free = true;

    NodeFacts(const Space& space, const NodeState& node, std::vector<const Dim*> data, bool outer_needed)
        : dims(std::move(data)), mappings(space.ctx.valuations.size()) {
        if (dims.size() >= 64) throw std::length_error("a CONTRACTION over more than 63 data coordinates");
        const Options& o = space.options;
        std::array<int, kMaxVariables> magnitude{};
        for (size_t k = 0; k < dims.size(); ++k) {
            for (int i = 0; i < kMaxVariables; ++i) magnitude[i] += std::abs(dims[k]->size.exponent[i]);
            const Dim* d = dims[k];
            OuterKind kind = outer_kind(d);
            if (d->is_bare_reduce()) bare_reduce |= bit(k);
            if (d->depends_on(node.latest_group)) depends |= bit(k);
            if (space.valid_extent(d->size)) valid |= bit(k);
            if (kind == OuterKind::Other) other |= bit(k);
            if (kind == OuterKind::LowRank) low_rank |= bit(k);
            if (kind == OuterKind::LowRank && largest_value(space, d->size) != o.prior_lowrank_size) wrong_rank |= bit(k);
            usage.push_back(abs_usage(d->size, space.ctx, true));
            for (size_t v = 0; v < mappings; ++v) value.push_back(space.ctx.approx(d->size, static_cast<int>(v)));
        }
        for (int m : magnitude) order_free = order_free && m <= kMaxExponent;
        for (size_t v = 0; v < mappings; ++v)
            for (int i : space.fixed_inputs) fixed_value.push_back(space.ctx.approx(space.input[i].size, static_cast<int>(v)));
        if (!outer_needed) return;
        // outer_product's factors of the path, multiplied in its order (the same doubles)
        std::vector<Size> factors;
        for (const Step* s : node.path())
            if (s->prim == Prim::Contraction)
                for (const Dim* e : s->expanded)
                    if (outer_kind(e->a) != OuterKind::LowRank) factors.push_back(e->a->size);
        for (size_t v = 0; v < mappings; ++v) {
            double p = 1;
            for (const Size& s : factors) p *= space.ctx.approx(s, static_cast<int>(v));
            outer_base.push_back(p);
        }
    }
    double at(size_t k, size_t v) const { return value[k * mappings + v]; }

    // outer_product(space, node, the outer coordinates `outer`): the same products, from the node's.
    double outer_product(Mask outer) const {
        double worst = 0;
        for (size_t v = 0; v < mappings; ++v) {
            double p = outer_base[v];
            for_each(outer & ~low_rank, [&](size_t k) { p *= at(k, v); });
            worst = std::max(worst, p);
        }
        return worst;
    }
    // FLOPs of the contraction of `group`'s einsum, exactly: every data coordinate alive at this cut is a letter
    // (bare reductions not in the group were already summed), as is every coordinate of the group.
    double flops(Mask group) const {
        Mask letters = group | ~bare_reduce;
        size_t fixed = fixed_value.size() / std::max<size_t>(mappings, 1);
        double total = 0;
        for (size_t v = 0; v < mappings; ++v) {
            double product = 1;
            for_each(letters & (bit(dims.size()) - 1), [&](size_t k) { product *= at(k, v); });
            for (size_t i = 0; i < fixed; ++i) product *= fixed_value[v * fixed + i];
            total += 2 * product;
        }
        return total;
    }
};

// The rule checks and pruned candidates of one node, tallied here and added to the space's counters once: the same
// counts as RuleCounters::check and count_pruned one by one (whose atomic adds, several per candidate, were a tenth
// of the time).
class Tally {
public:
    explicit Tally(const Space& space) : space_(space) {}
    Tally(const Tally&) = delete;
    Tally& operator=(const Tally&) = delete;
    ~Tally() {
        for (int r = 0; r < RuleCount; ++r) space_.rules.add(static_cast<RuleId>(r), tried_[r], rejected_[r]);
        int slot = RuleCounters::depth_slot();
        space_.depth_counters.canonical[slot].fetch_add(pruned_, std::memory_order_relaxed);
        space_.depth_counters.pruned[slot].fetch_add(pruned_, std::memory_order_relaxed);
    }
    bool check(RuleId rule, bool rejects) {
        ++tried_[rule];
        rejected_[rule] += rejects;
        return rejects;
    }
    void pruned() { ++pruned_; }  // count_pruned's count

private:
    const Space& space_;
    std::array<uint64_t, RuleCount> tried_{}, rejected_{};
    uint64_t pruned_ = 0;
};

// The shape distance's verdict on a group (ReachCheck::distance_allows) depends only on the sizes it takes from the
// node's data (its outer SHAREs': an inner SHARE keeps its size) and from its bare reductions (every member's), as
// multisets (when no product of them can overflow: NodeFacts::order_free), so it is computed once per such pair of
// coordinate sets, not once per group (3^n groups, 2^n outer sets).
class DistanceMemo {
public:
    explicit DistanceMemo(const NodeFacts& f) : n_(f.dims.size()) {
        for_each(f.bare_reduce, [&](size_t k) { reduce_bit_.push_back(k); });
        if (f.order_free && n_ + reduce_bit_.size() <= kMaxBits)
            verdicts_.assign(size_t{1} << (n_ + reduce_bit_.size()), kUnknown);
    }
    template <typename Compute>
    bool allows(Mask group, Mask outer, Compute compute) {
        if (verdicts_.empty()) return compute();
        size_t key = static_cast<size_t>(outer);
        for (size_t j = 0; j < reduce_bit_.size(); ++j) key |= size_t{(group >> reduce_bit_[j]) & 1} << (n_ + j);
        int8_t& verdict = verdicts_[key];
        if (verdict == kUnknown) verdict = compute() ? 1 : 0;
        return verdict == 1;
    }

private:
    static constexpr size_t kMaxBits = 16;
    static constexpr int8_t kUnknown = -1;
    size_t n_;
    std::vector<size_t> reduce_bit_;
    std::vector<int8_t> verdicts_;  // by (outer set, bare reductions in the group); empty: not kept
};

}  // namespace syno::contraction
