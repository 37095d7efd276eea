// The lowering planner: reorders a lowered program's view steps, and moves onto a weight the views that act on
// that weight's coordinates alone, so that each step does only the needed work without changing what the
// program computes (docs/architecture.md §2, "Planner"). `flops` (the paper's metric) is counted before it.
#pragma once
#include <vector>

namespace syno {

struct Program;
struct ProgramStep;
struct ProgramTensor;

// 1. Within each run of view steps between two reduce/contract steps, a stable list schedule over the steps'
//    data dependencies: selections (stride) first, then reshapes (split, merge, expand), then rolls (shift),
//    then expansions (unfold), so a roll or an unfold copies the smallest tensor and unfolds stay next to the
//    contraction that may fuse them into a convolution.
// 2. Views before the outer product (weight views). A contraction with weight w brings into T the weight-only
//    coordinates of w (those T does not hold: an outer SHARE, e.g. C_out). A view step of the run right after
//    it whose source coordinates are all weight-only (directly, or made by views already moved) is applied to
//    w before the contraction instead (ProgramTensor::views; the contraction's `out` takes the view's result
//    in the view's place, so T after the run is the same tensor with the same dims in the same order). Exact:
//    the product is elementwise along those coordinates (out[.., c, ..] = T[..] * w[.., c, ..] with c in w
//    only), so a view of c commutes with it; gradients flow through the view to the parameter.
//    Not moved: a view with a source coordinate T also holds (a shared letter, or a coordinate merged with
//    T's: the product must exist first); views after a later reduce/contract (the coordinate may have met
//    another operand); EXPAND (it adds a broadcast coordinate to T, not to w); an unfold that the
//    unfold + unfold + contract pattern fuses into a convolution (moved, it would grow the outer product by
//    the window instead of reading T once). The decision depends only on the steps from the contraction on,
//    so a partial node's tail is planned alike (bounds.cpp).
// Reduce and contract steps keep their order. `flops` stays the canonical count (lower.cpp counts it before
// planning); the planned contractions' letters may differ (a stride moved onto the weight shrinks them, an unfold
// grows the product by its window instead of copying it), which the cost model (cost.hpp) counts.
// Not done: the contraction order of several weights (contracting two weights first): it needs a weight-with-
// weight contraction in the IR; see docs/architecture.md §2 "Planner" for why and how often it would apply.
void plan(Program& program);

// The weight's coordinates after its views (ProgramTensor::views), in order: what its contraction sees.
std::vector<int> viewed_dims(const ProgramTensor& weight);

// `dims` after the view step `s` (split/unfold in place, merge: b removed and a replaced, shift/stride renamed).
void apply_view(std::vector<int>& dims, const ProgramStep& s);

}  // namespace syno
