#include "node.hpp"

#include "hash.hpp"

namespace syno {

std::vector<const Step*> NodeState::path() const {
    std::vector<const Step*> steps;
    for (const NodeState* n = this; n->parent; n = n->parent.get()) steps.push_back(&n->step);
    return {steps.rbegin(), steps.rend()};
}

void pin_node(const NodeState& node) {
    auto pin_all = [](const std::vector<const Dim*>& dims) {
        for (const Dim* d : dims) DimStore::pin(d);
    };
    // An ancestor already pinned has its own ancestors pinned.
    for (const NodeState* n = &node; n && !n->pinned.raise(); n = n->parent.get()) {
        pin_all(n->frontier);
        pin_all(n->expansions);
        pin_all(n->step.consumed);
        pin_all(n->step.produced);
        pin_all(n->step.expanded);
        if (n->final_info) {
            pin_all(n->final_info->input);
            for (auto& w : n->final_info->weights) pin_all(w);
        }
    }
}

uint64_t frontier_hash(const std::vector<const Dim*>& frontier, const std::vector<const Dim*>& expansions) {
    uint64_t h = fnv1a("Frontier");
    for (const Dim* d : frontier) h = combine(h, d->hash);
    h = combine(h, fnv1a("Expansions"));
    for (const Dim* d : expansions) h = combine(h, d->hash);
    return h;
}

}  // namespace syno
