// Budget bounds: what every operator of a space must cost at least, and can cost at most, found from the spec and
// the options alone (no search). A budget outside them proves the space empty at once.
#pragma once
#include "space.hpp"

namespace syno {

struct BudgetBounds {
    // Summed over the mappings, as the budgets are. Lower bounds hold for every operator; upper bounds too.
    double min_flops = 0, max_flops = 0;
    double min_params = 0, max_params = 0;
    double min_memory = 0;  // bytes of the largest intermediate
    double min_cost = 0;    // planned cost (cost.hpp, total): what max_cost is checked against up front
};
BudgetBounds budget_bounds(const Space& space);

// A lower bound on the planned cost (cost.hpp, total summed over the mappings) of every final operator below
// `node`, which is not final; bounds.cpp proves it. The space does not expand a node whose bound exceeds
// max_cost (Options::cost_pruning), as it never builds one whose flops_bound exceeds max_flops.
double cost_bound(const Space& space, const NodeState& node);

// An upper bound on the FLOPs (summed over the mappings) of every final operator below `node`; bounds.cpp proves
// it. What FLOPs-stratified sampling (sample.cpp) uses to skip subtrees too cheap for the bin it draws from.
double flops_upper(const Space& space, const NodeState& node);

}  // namespace syno
