#include "priors.hpp"

#include <algorithm>
#include <unordered_set>

#include "rules.hpp"

namespace syno {

OuterKind outer_kind(const Dim* d) {
    int shares = 0;
    while (d->is(DimKind::ShareL)) d = d->a, ++shares;
    if (d->is(DimKind::Iterator) || d->is(DimKind::MergeL) || d->is(DimKind::MergeR)) return OuterKind::Output;
    if (d->is_bare_reduce() && shares > 0) return OuterKind::LowRank;
    return OuterKind::Other;
}

namespace {

// The data side of every SHARE the node's contractions made (inner and outer).
std::vector<const Dim*> shares_of(const NodeState& node) {
    std::vector<const Dim*> out;
    for (const Step* s : node.path()) {
        if (s->prim != Prim::Contraction) continue;
        for (const Dim* d : s->produced)
            if (d->is(DimKind::ShareL)) out.push_back(d);
        for (const Dim* d : s->expanded) out.push_back(d);
    }
    return out;
}

double largest_over_mappings(const Space& space, const std::vector<Size>& factors) {
    double worst = 0;
    for (size_t v = 0; v < space.ctx.valuations.size(); ++v) {
        double p = 1;
        for (const Size& s : factors) p *= space.ctx.approx(s, static_cast<int>(v));
        worst = std::max(worst, p);
    }
    return worst;
}

}  // namespace

double largest_value(const Space& space, const Size& s) { return largest_over_mappings(space, {s}); }

double outer_product(const Space& space, const NodeState& node, const std::vector<const Dim*>& extra_outer) {
    std::vector<Size> factors;
    auto add = [&](const Dim* share_data) {
        if (outer_kind(share_data) != OuterKind::LowRank) factors.push_back(share_data->size);
    };
    for (const Step* s : node.path())
        if (s->prim == Prim::Contraction)
            for (const Dim* e : s->expanded) add(e->a);  // e is the outer SHARE's data side; e->a the coordinate
    for (const Dim* d : extra_outer) add(d);
    return largest_over_mappings(space, factors);
}

double pooling_factor(const Space& space, const NodeState& node) {
    // Reductions below some SHARE are weighted; the others are pure pooling.
    std::unordered_set<const Dim*> weighted, seen;
    std::vector<const Dim*> stack = shares_of(node);
    while (!stack.empty()) {
        const Dim* d = stack.back();
        stack.pop_back();
        if (!d || !seen.insert(d).second) continue;
        if (d->is_bare_reduce()) weighted.insert(d);
        stack.push_back(d->a);
        stack.push_back(d->b);
    }
    std::vector<Size> pooled;
    for (const Step* s : node.path())
        if (s->prim == Prim::Reduce && !weighted.contains(s->produced[0])) pooled.push_back(s->produced[0]->size);
    return largest_over_mappings(space, pooled);
}

bool contraction_possible(const Space& space, const NodeState& node) {
    const Options& o = space.options;
    int cap = o.max_count[static_cast<int>(Prim::Contraction)];
    return node.contractions < o.max_weights && (cap < 0 || node.counts[static_cast<int>(Prim::Contraction)] < cap) &&
           node.depth < o.max_depth;
}

bool channel_split_twin(const Space& space, int position, const Dim* d) {
    const auto& channels = space.options.channel_inputs;
    if (std::find(channels.begin(), channels.end(), position) == channels.end()) return false;
    if (!d->is(DimKind::Split) || d->a->is(DimKind::Split) || d->b->is(DimKind::Split)) return false;
    return d->b->size.lex_less(d->a->size);
}

std::vector<std::string> prior_violations(const Space& space, const NodeState& final_node) {
    const Options& o = space.options;
    std::vector<std::string> out;
    auto name = [](RuleId r) { return std::string(kRules[r].name); };
    bool io = false, kind = false, lowrank = false;
    for (const Step* s : final_node.path()) {
        if (s->prim != Prim::Contraction) continue;
        size_t inner = 0;
        for (const Dim* d : s->produced) inner += d->is(DimKind::ShareL);
        io |= inner == 0 || s->expanded.empty();
        for (const Dim* e : s->expanded) {
            OuterKind k = outer_kind(e->a);
            kind |= k == OuterKind::Other;
            if (k == OuterKind::LowRank && o.prior_lowrank_size > 0)
                lowrank |= largest_over_mappings(space, {e->size}) != o.prior_lowrank_size;
        }
    }
    if (o.prior_weight_io && io) out.push_back(name(PriorWeightInputOutput));
    if (o.prior_outer_kinds && kind) out.push_back(name(PriorOuterKind));
    if (o.prior_max_outer > 0 && outer_product(space, final_node, {}) > o.prior_max_outer)
        out.push_back(name(PriorOuterProduct));
    if (lowrank) out.push_back(name(PriorLowRankSize));
    if (o.prior_max_pooling > 0 && pooling_factor(space, final_node) > o.prior_max_pooling)
        out.push_back(name(PriorPooling));
    if (final_node.is_final() && final_node.final_info->flops < o.min_flops) out.push_back(name(PriorFlopsFloor));
    if (final_node.is_final())
        for (size_t k = 0, i = 0; i < space.input.size(); ++i) {
            if (space.input[i].fixed_output >= 0) continue;
            if (channel_split_twin(space, static_cast<int>(i), final_node.final_info->input[k++])) {
                out.push_back(name(ChannelSplitOrder));
                break;
            }
        }
    return out;
}

}  // namespace syno
