// The lowering planner: reorders a lowered program's view steps, moves onto a weight the views that act on that
// weight's coordinates alone, and multiplies weights together first where that is smaller, so that each step
// does only the needed work without changing what the program computes (docs/architecture.md §2, "Planner").
// `flops` (the paper's metric) is counted before it.
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
//    the window instead of reading T once).
// 3. Contraction order of several weights. Two adjacent contractions T.w_j then .w_k (after 2: the views that
//    separated them are on w_j) are computed as T.(w_j.w_k) when that order has the smaller largest intermediate
//    (max of the two results), or an equal one and fewer FLOPs (§2 rule) -- opt_einsum's criterion over the two
//    orders. w_j's views end with `contract w_k` (rename: w_k's renames of w_j's coordinates; out: the product's
//    letters that T or the result needs, the others summed there), and one step contracts T with that product,
//    T's renames composed. Repeated from the left, so a run of contractions folds its weights into the first.
//    Exact: einsum is associative when each letter is summed once all operands holding it are multiplied (the
//    product sums only letters in neither T nor the result). Not applied: a program with an EXPAND (broadcast
//    letters of T become constant factors, which the product would square); contractions separated by a reduce
//    or by a view of T's coordinates; the order (T.w_k).w_j, which is never valid in sampled programs (w_k's
//    shares rename coordinates that T.w_j made).
// Reduce steps keep their place. `flops` stays the canonical count (lower.cpp counts it before planning); the
// planned contractions' letters differ (a stride moved onto a weight shrinks them, an unfold grows the product by
// its window instead of copying it, a product of weights replaces the outer product), which the cost model
// (cost.hpp) counts. Decisions depend on the steps from the first contraction involved on (coordinate sets, not
// T's layout), so a partial node's tail is planned alike (bounds.cpp).
void plan(Program& program);

// The weight's coordinates after its views (ProgramTensor::views), in order: what its contraction sees.
std::vector<int> viewed_dims(const ProgramTensor& weight);

// `dims` after the view step `s` (split/unfold in place, merge: b removed and a replaced, shift/stride renamed).
void apply_view(std::vector<int>& dims, const ProgramStep& s);

}  // namespace syno
