#include "rules.hpp"

namespace syno {

const char* prim_name(Prim p) {
    switch (p) {
        case Prim::Reduce: return "REDUCE";
        case Prim::Split: return "SPLIT";
        case Prim::Merge: return "MERGE";
        case Prim::Shift: return "SHIFT";
        case Prim::Stride: return "STRIDE";
        case Prim::Unfold: return "UNFOLD";
        case Prim::Expand: return "EXPAND";
        case Prim::Contraction: return "CONTRACTION";
        case Prim::Finalize: return "FINALIZE";
        default: return "?";
    }
}

// One line each: name, primitive guarded, canonical twin exists?, why.
const std::array<Rule, RuleCount> kRules = {{
    {"weights-never-viewed", Prim::Split, true,
     "a view of a weight coordinate is a relabelled weight: weights appear only on SHARE's rhs"},
    {"views-commute-with-contraction", Prim::Split, true,
     "a view on coordinates independent of the latest contraction commutes with it: do it below"},
    {"share-lhs-viewed-below", Prim::Merge, true,
     "SHIFT/MERGE of a SHARE's data side equals the same view below the SHARE with a relabelled weight"},
    {"reduce-order", Prim::Reduce, true,
     "reductions commute: generate them in non-increasing domain order"},
    {"equal-reductions-interchangeable", Prim::Reduce, true,
     "two reductions of equal domain are interchangeable: of two children equal up to swapping them, keep one"},
    {"split-chains-right", Prim::Split, true,
     "SPLIT(SPLIT(a,b),c) is SPLIT(a,SPLIT(b,c)): keep the right-leaning chain"},
    {"split-undoes-merge", Prim::Split, true,
     "SPLIT of the two halves of one MERGE is the identity"},
    {"split-of-reductions", Prim::Split, true,
     "SPLIT of two reductions is one reduction of the product domain"},
    {"merge-above-split", Prim::Merge, true,
     "MERGE directly above SPLIT is a reshape the SPLIT-above-MERGE order expresses"},
    {"merge-chains-right", Prim::Merge, true,
     "MERGE(MERGE(x)_lhs) is MERGE(MERGE(x)_rhs) with other blocks: keep the right-leaning chain"},
    {"merge-of-reduction", Prim::Merge, true,
     "MERGE of a reduction is two reductions"},
    {"merge-large-block-above-unfold", Prim::Merge, false,
     "approximate (paper Fig. 3c): MERGE(b) of an UNFOLD with window k <= b equals UNFOLDs of both halves "
     "at almost every point; decided on structure (a block with a primary factor is large; coefficient-only "
     "sizes compare at their spec values), so every valuation agrees"},
    {"shift-of-reduction", Prim::Shift, true,
     "a cyclic SHIFT of a summed coordinate does not change the sum"},
    {"shift-chain", Prim::Shift, false,
     "SHIFT of a SHIFT: larger shifts are not in the space (shift by one only)"},
    {"shift-on-unordered", Prim::Shift, true,
     "shifting a channel-like (unordered) coordinate is a relabelling of channels"},
    {"stride-chain", Prim::Stride, true,
     "STRIDE(STRIDE(x, s), t) is STRIDE(x, s*t)"},
    {"unfold-reduces-at-most-one", Prim::Unfold, true,
     "an UNFOLD whose main coordinate is only reduced sums its window twice"},
    {"unfold-window-not-bare-reduction", Prim::Unfold, false,
     "a window summed with no weight is a box blur (heuristic, as the original)"},
    {"unfold-order", Prim::Unfold, true,
     "stacked UNFOLDs commute: smaller windows nearer the output"},
    {"expand-only-repeats", Prim::Expand, false,
     "a bare EXPAND is useful only as a repeat (into a MERGE's rhs)"},
    {"no-expand-reduce", Prim::Contraction, true,
     "an outer SHARE of a reduction sums the weight alone: a smaller weight does the same"},
    {"contraction-needs-two-shares", Prim::Contraction, false,
     "a single SHARE is a per-coordinate scale (heuristic, as the original)"},
    {"independent-contractions-ordered", Prim::Contraction, true,
     "independent contractions commute: generate them in hash order"},
    {"unordered-input-not-shifted", Prim::Finalize, true,
     "an unordered input coordinate must not be shifted"},
    {"channel-split-order", Prim::Finalize, true,
     "a channel input (Options::channel_inputs) SPLIT as [inner, outer] is the [outer, inner] SPLIT on channels "
     "permuted: keep the lexicographic order"},
    {"weight-shares-input-and-output", Prim::Contraction, false,
     "prior (original): every weight has an inner SHARE (a data coordinate) and an outer one (a new coordinate)"},
    {"outer-kind", Prim::Contraction, false,
     "prior (original): an outer SHARE's coordinate becomes an output coordinate (through MERGEs) or one a later "
     "weight contracts (low rank), never a view's input"},
    {"outer-product-limit", Prim::Contraction, false,
     "prior (original maxExpansionMergeMultiplier): the outer coordinates that are not low rank multiply to at "
     "most prior_max_outer elements"},
    {"low-rank-size", Prim::Contraction, false,
     "prior (original ExpansionWeightsSharingDimSize): a low-rank coordinate has exactly prior_lowrank_size "
     "elements"},
    {"unweighted-pooling-limit", Prim::Finalize, false,
     "prior (original maxPoolingFactor): reductions with no SHARE above sum at most prior_max_pooling elements"},
    {"flops-floor", Prim::Finalize, false,
     "prior: an operator has at least min_flops FLOPs (substitute's min_flops_ratio)"},
}};

}  // namespace syno
