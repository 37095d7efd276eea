// Canonicalization rules: each is a named rejection ("this construction has a canonical twin", or, for the
// heuristic ones, "this construction is known to be useless"). The registry lists them all; every space
// counts, per rule, how often it was tried and how often it rejected.
#pragma once
#include <array>
#include <atomic>
#include <cstdint>

namespace syno {

enum class Prim : uint8_t { Reduce, Split, Merge, Shift, Stride, Unfold, Expand, Contraction, Finalize, Count };
const char* prim_name(Prim p);

enum RuleId : int {
    // Views in general
    WeightsNeverViewed,
    ViewsCommuteWithContraction,
    ShareLhsViewedBelow,
    // REDUCE
    ReduceOrder,
    EqualReductionsInterchangeable,
    // SPLIT
    SplitChainsRight,
    SplitUndoesMerge,
    SplitOfReductions,
    // MERGE
    MergeAboveSplit,
    MergeChainsRight,
    MergeOfReduction,
    // SHIFT
    ShiftOfReduction,
    ShiftChain,
    ShiftOnUnordered,
    // STRIDE
    StrideChain,
    // UNFOLD
    UnfoldReducesAtMostOne,
    UnfoldWindowNotBareReduction,
    UnfoldOrder,
    // EXPAND
    ExpandOnlyRepeats,
    // CONTRACTION
    NoExpandReduce,
    ContractionNeedsTwoShares,
    IndependentContractionsOrdered,
    // FINALIZE
    UnorderedInputNotShifted,
    RuleCount
};

struct Rule {
    const char* name;
    Prim prim;
    bool canonical;      // true: a canonical twin exists; false: a quality heuristic (documented as such)
    const char* reason;
};

extern const std::array<Rule, RuleCount> kRules;

class RuleCounters {
public:
    // Counts one application of `rule`; returns `rejects` so call sites read `if (c.check(R, pred)) continue;`
    bool check(RuleId rule, bool rejects) {
        tried_[rule].fetch_add(1, std::memory_order_relaxed);
        if (rejects) {
            rejected_[rule].fetch_add(1, std::memory_order_relaxed);
            rejected_at_depth_[depth_slot()].fetch_add(1, std::memory_order_relaxed);
        }
        return rejects;
    }
    // The depth of the node whose children are being generated on this thread (for per-depth rates).
    static int& current_depth() {
        thread_local int depth = 0;
        return depth;
    }
    static constexpr int kDepthSlots = 32;
    static int depth_slot() { return current_depth() < kDepthSlots ? current_depth() : kDepthSlots - 1; }
    uint64_t rejected_at_depth(int d) const { return rejected_at_depth_[d].load(); }
    uint64_t tried(RuleId r) const { return tried_[r].load(); }
    uint64_t rejected(RuleId r) const { return rejected_[r].load(); }

private:
    std::array<std::atomic<uint64_t>, RuleCount> tried_{};
    std::array<std::atomic<uint64_t>, RuleCount> rejected_{};
    std::array<std::atomic<uint64_t>, kDepthSlots> rejected_at_depth_{};
};

}  // namespace syno
