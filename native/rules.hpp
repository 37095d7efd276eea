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
    MergeLargeBlockAboveUnfold,
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
    ChannelSplitOrder,
    // Space priors (priors.hpp): not canonical, each an option of the space, off in the core by default
    PriorWeightInputOutput,
    PriorOuterKind,
    PriorOuterProduct,
    PriorLowRankSize,
    PriorPooling,
    PriorFlopsFloor,
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
        Slot& s = slots_[slot_index()];
        s.tried[rule].fetch_add(1, std::memory_order_relaxed);
        if (rejects) {
            s.rejected[rule].fetch_add(1, std::memory_order_relaxed);
            s.rejected_at_depth[depth_slot()].fetch_add(1, std::memory_order_relaxed);
        }
        return rejects;
    }
    // Counts `tried` applications of `rule`, `rejected` of them rejecting: what `check` counts one by one, for a
    // caller that tallies many checks first (an atomic add per check is a cost on hot paths).
    void add(RuleId rule, uint64_t tried, uint64_t rejected) {
        if (!tried) return;
        Slot& s = slots_[slot_index()];
        s.tried[rule].fetch_add(tried, std::memory_order_relaxed);
        if (rejected) {
            s.rejected[rule].fetch_add(rejected, std::memory_order_relaxed);
            s.rejected_at_depth[depth_slot()].fetch_add(rejected, std::memory_order_relaxed);
        }
    }
    // The depth of the node whose children are being generated on this thread (for per-depth rates).
    static int& current_depth() {
        thread_local int depth = 0;
        return depth;
    }
    static constexpr int kDepthSlots = 32;
    static int depth_slot() { return current_depth() < kDepthSlots ? current_depth() : kDepthSlots - 1; }
    uint64_t tried(RuleId r) const { return sum([&](const Slot& s) { return s.tried[r].load(); }); }
    uint64_t rejected(RuleId r) const { return sum([&](const Slot& s) { return s.rejected[r].load(); }); }
    uint64_t rejected_at_depth(int d) const { return sum([&](const Slot& s) { return s.rejected_at_depth[d].load(); }); }

private:
    // One slot per thread (by a thread-local index), cache-line aligned: counting must not make threads
    // fight over shared cache lines.
    struct alignas(64) Slot {
        std::array<std::atomic<uint64_t>, RuleCount> tried{};
        std::array<std::atomic<uint64_t>, RuleCount> rejected{};
        std::array<std::atomic<uint64_t>, kDepthSlots> rejected_at_depth{};
    };
    static constexpr int kSlots = 16;
    static int slot_index() {
        static std::atomic<int> next{0};
        thread_local int index = next.fetch_add(1) % kSlots;
        return index;
    }
    template <typename F>
    uint64_t sum(F f) const {
        uint64_t total = 0;
        for (auto& s : slots_) total += f(s);
        return total;
    }
    std::array<Slot, kSlots> slots_{};
};

}  // namespace syno
