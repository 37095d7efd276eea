// Search nodes. A node is a frontier of coordinates reached bottom-up from the output; it is immutable and
// shared. Its identity is the hash of its frontier; the path that produced it is kept for lowering.
#pragma once
#include <array>
#include <memory>
#include <string>
#include <vector>

#include "dim.hpp"
#include "rules.hpp"

namespace syno {

struct Step {
    Prim prim;
    std::vector<const Dim*> consumed;   // coordinates below (already in the graph)
    std::vector<const Dim*> produced;   // coordinates above (new frontier entries)
    std::vector<const Dim*> expanded;   // CONTRACTION: outer shares' data side, broadcast
    Size param;
    uint64_t group = 0;
};

struct NodeState;
using NodePtr = std::shared_ptr<const NodeState>;

struct FinalInfo {
    std::vector<const Dim*> input;                  // one per non-fixed input coordinate, in spec order
    std::vector<std::vector<const Dim*>> weights;   // in parameter order; each weight's dims in layout order
    std::vector<uint64_t> weight_groups;
    double flops = 0, params = 0, memory = 0;       // summed over mappings
    double cost = 0, materialized = 0, cost_flops = 0, peak = 0;  // planned cost (cost.hpp): summed; peak: max
};

struct NodeState {
    std::vector<const Dim*> frontier;    // sorted with dim_less; includes weight coordinates (ShareR)
    std::vector<const Dim*> expansions;  // coordinates consumed by EXPAND
    uint64_t hash = 0;
    int depth = 0;
    std::array<int, static_cast<int>(Prim::Count)> counts{};
    std::array<int8_t, kMaxVariables> usage{};
    bool reducing = true;                // still in the reduction stage
    Size last_reduction;                 // for reduce-order
    int reductions = 0;
    int contractions = 0;
    uint64_t latest_group = 0;
    uint64_t latest_leader = 0;
    double flops_bound = 0;              // exact FLOPs of the contractions so far, summed over mappings
    double params = 0;                   // weight elements so far, summed over mappings
    int distance = 0;                    // shape distance (lower bound on remaining steps)
    NodePtr parent;
    Step step;
    std::shared_ptr<const FinalInfo> final_info;
    PinFlag pinned;                      // its dims (and its ancestors') outlive every DimScope (dim.hpp)

    bool is_final() const { return final_info != nullptr; }
    std::vector<const Step*> path() const;  // root to this node
};

// Keeps every dim `node` and its ancestors refer to for the space's lifetime: for nodes that outlive the
// walk that made them (returned to the caller, cached).
void pin_node(const NodeState& node);

uint64_t frontier_hash(const std::vector<const Dim*>& frontier, const std::vector<const Dim*>& expansions);

}  // namespace syno
