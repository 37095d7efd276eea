// STRIDE s (read bottom-up): the coordinate above is d * s, of size n * s. Strides are coefficients.
#include "common.hpp"

namespace syno {

void generate_stride(const Space& space, const NodePtr& node, std::vector<NodePtr>& out) {
    ReachCheck reach(space, *node);
    auto& rules = space.rules;
    std::vector<Size> strides;
    for (const Size& s : space.enumerate_sizes(*node, true)) {
        bool positive = true;
        for (int i = 0; i < space.ctx.count(); ++i) positive &= s.exponent[i] >= 0;
        if (positive) strides.push_back(s);
    }
    if (strides.empty()) return;
    for (const Dim* d : data_dims(space, *node)) {
        if (rules.check(StrideChain, d->is(DimKind::Stride))) continue;
        if (rules.check(ViewsCommuteWithContraction, commutes_with_latest_contraction(*node, {d}))) continue;
        for (const Size& s : strides) {
            if (pruned_early(space, reach, {d}, {d->size * s}, Prim::Stride)) continue;
            Step step{Prim::Stride, {d}, {space.store.unary(DimKind::Stride, d, d->size * s, s)}, {}, s};
            if (auto c = make_child(space, node, std::move(step), abs_usage(s, space.ctx))) out.push_back(c);
        }
    }
}

}  // namespace syno
