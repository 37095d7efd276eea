// FINALIZE: the frontier's data coordinates become the input tensor (every size-respecting assignment to
// the input spec's coordinates is its own operator), its weight coordinates become the weights.
#include <algorithm>
#include <map>

#include "../hash.hpp"
#include "../lower.hpp"
#include "../priors.hpp"
#include "common.hpp"

namespace syno {

namespace {

std::shared_ptr<FinalInfo> make_final_info(const Space& space, const NodeState& node, std::vector<const Dim*> input) {
    auto info = std::make_shared<FinalInfo>();
    info->input = std::move(input);
    // Weights in forward order: the last contraction generated is the first executed.
    auto path = node.path();
    for (auto it = path.rbegin(); it != path.rend(); ++it) {
        if ((*it)->prim != Prim::Contraction) continue;
        std::vector<const Dim*> weight;
        for (const Dim* d : (*it)->produced)
            if (d->is(DimKind::ShareR)) weight.push_back(d);
        info->weights.push_back(weight);
        info->weight_groups.push_back((*it)->group);
    }
    // Layout within each weight needs the reduction numbering, which needs the input and weights.
    auto reduction_ordinal = reduction_order(space, NodeState{.final_info = info});
    for (auto& weight : info->weights)
        std::stable_sort(weight.begin(), weight.end(), [&](const Dim* x, const Dim* y) {
            return layout_key(x, reduction_ordinal) < layout_key(y, reduction_ordinal);
        });
    return info;
}

uint64_t operator_hash(const NodeState& node, const FinalInfo& info) {
    uint64_t h = combine(fnv1a("Operator"), node.hash);
    for (const Dim* d : info.input) h = combine(h, d->hash);
    return h;
}

void assign(const Space& space, const NodePtr& node, const std::vector<const Dim*>& data,
            const std::vector<int>& desired, std::vector<const Dim*>& chosen, std::vector<bool>& used,
            std::vector<NodePtr>& out) {
    size_t k = chosen.size();
    if (k == desired.size()) {
        auto info = make_final_info(space, *node, chosen);
        auto child = std::make_shared<NodeState>(*node);
        child->parent = node;
        child->step = Step{Prim::Finalize, {}, {}};
        child->final_info = info;
        // Exact FLOPs, params and memory, summed over the mappings.
        for (size_t v = 0; v < space.ctx.valuations.size(); ++v) {
            Program p = lower(space, *child, static_cast<int>(v));
            info->flops += p.flops;
            info->params += p.params;
            info->memory = std::max(info->memory, 4 * p.peak_elements);
            info->cost += p.cost.total(space.options.cost_profile);
            info->cost_flops += p.cost.flops;
            info->materialized += p.cost.materialized;
            info->peak = std::max(info->peak, p.cost.peak);
        }
        const Options& o = space.options;
        if (!o.structural && (info->flops > o.max_flops || info->params > o.max_params ||
            info->params < o.min_params || info->memory > o.max_memory || info->cost > o.max_cost))
            return;
        if (!o.structural && space.rules.check(PriorFlopsFloor, info->flops < o.min_flops)) return;
        child->hash = operator_hash(*node, *info);
        child->distance = 0;
        out.push_back(child);
        return;
    }
    const InputDim& want = space.input[desired[k]];
    for (size_t i = 0; i < data.size(); ++i) {
        if (used[i] || !(data[i]->size == want.size)) continue;
        if (space.rules.check(UnorderedInputNotShifted, want.unordered && data[i]->is(DimKind::Shift))) continue;
        if (!space.options.structural && !space.options.channel_inputs.empty() &&
            space.rules.check(ChannelSplitOrder, channel_split_twin(space, desired[k], data[i])))
            continue;
        used[i] = true;
        chosen.push_back(data[i]);
        assign(space, node, data, desired, chosen, used, out);
        chosen.pop_back();
        used[i] = false;
    }
}

}  // namespace

void generate_finalize(const Space& space, const NodePtr& node, std::vector<NodePtr>& out) {
    if (node->contractions < space.options.min_weights) return;
    std::vector<const Dim*> data;
    for (const Dim* d : node->frontier)
        if (!d->is(DimKind::ShareR)) data.push_back(d);
    std::vector<int> desired;
    for (size_t i = 0; i < space.input.size(); ++i)
        if (space.input[i].fixed_output < 0) desired.push_back(static_cast<int>(i));
    if (data.size() != desired.size()) return;
    // unweighted-pooling-limit: the shares are final here, whatever the input assignment
    const Options& o = space.options;
    if (!o.structural && o.prior_max_pooling > 0 &&
        space.rules.check(PriorPooling, pooling_factor(space, *node) > o.prior_max_pooling))
        return;
    // A structural space generates children whatever their sizes: lower only a path valid at its valuations.
    if (space.options.structural)
        for (const Step* step : node->path())
            if (!invalid_sizes(space, *step).empty()) return;
    std::vector<const Dim*> chosen;
    std::vector<bool> used(data.size(), false);
    assign(space, node, data, desired, chosen, used, out);
}

}  // namespace syno
