#include "node.hpp"

#include "hash.hpp"

namespace syno {

std::vector<const Step*> NodeState::path() const {
    std::vector<const Step*> steps;
    for (const NodeState* n = this; n->parent; n = n->parent.get()) steps.push_back(&n->step);
    return {steps.rbegin(), steps.rend()};
}

uint64_t frontier_hash(const std::vector<const Dim*>& frontier, const std::vector<const Dim*>& expansions) {
    uint64_t h = fnv1a("Frontier");
    for (const Dim* d : frontier) h = combine(h, d->hash);
    h = combine(h, fnv1a("Expansions"));
    for (const Dim* d : expansions) h = combine(h, d->hash);
    return h;
}

}  // namespace syno
