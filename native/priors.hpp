// Space priors: quality restrictions of the original Syno (design notes §3.3, §8), as named, measured options.
// Unlike the canonical rules they remove operators that have no twin; each is SOUND in the sense that it prunes
// during the walk only where no completion can satisfy it, and is otherwise checked at FINALIZE:
// * weight-shares-input-and-output: decided by the CONTRACTION alone (its inner and outer SHAREs never change).
// * outer-kind / outer-product / low-rank-size: decided by the CONTRACTION's outer coordinates, whose structure
//   below is fixed; the outer-product total only grows with later contractions, so exceeding it is final.
// * unweighted-pooling: the product of the reductions with no SHARE above them only grows once no CONTRACTION
//   can come (a later SHARE could still weight a reduction): pruned then, and checked exactly at FINALIZE.
// * flops-floor (Options::min_flops): no upper bound on a node's completions is known: FINALIZE only.
// A structural (replay) space ignores them all: they choose what the search proposes, not what loads.
#pragma once
#include <string>
#include <vector>

#include "space.hpp"

namespace syno {

// What an outer SHARE's coordinate becomes (bottom-up, through the SHAREs of later weights): an output
// coordinate, directly or through MERGEs ("outer product"); a coordinate a later weight contracts ("low rank");
// or anything else (a SPLIT, SHIFT, STRIDE, UNFOLD of a weight coordinate: the original never generated them).
enum class OuterKind { Output, LowRank, Other };
OuterKind outer_kind(const Dim* d);

// The size's value at the mapping where it is largest.
double largest_value(const Space& space, const Size& s);

// Product of the non-low-rank outer coordinates of the node's contractions, largest over the mappings.
double outer_product(const Space& space, const NodeState& node, const std::vector<const Dim*>& extra_outer);

// Product of the domains of the reductions no SHARE lies above (unweighted pooling), largest over the mappings.
double pooling_factor(const Space& space, const NodeState& node);

// Whether the node can still gain a CONTRACTION below it (its shares are not final yet).
bool contraction_possible(const Space& space, const NodeState& node);

// channel-split-order: input coordinate `position` is a channel (Options::channel_inputs) fed by a SPLIT of two
// non-SPLIT coordinates in the non-canonical order (inner lexicographically below outer). Its twin, the SPLIT in
// the other order, is the same operator on channels permuted (a fixed permutation), and passes every rule.
bool channel_split_twin(const Space& space, int position, const Dim* d);

// The priors a final operator violates, by rule name, under the space's prior options (on or off: every prior
// with a threshold set is evaluated; weight-io and outer-kind only when their switch is on).
std::vector<std::string> prior_violations(const Space& space, const NodeState& final_node);

}  // namespace syno
