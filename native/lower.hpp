// Lowering a final operator to the kernel IR ("program", docs/architecture.md §2) for one valuation:
// forward steps on one running data tensor (ordered by the planner, plan.hpp), exact FLOPs, the cost of the
// planned steps (cost.hpp), and the index expressions of every tensor.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cost.hpp"
#include "space.hpp"

namespace syno {

struct Expr {
    std::string op;      // it, red, const, add, sub, mul, div, mod, pad
    int64_t value = 0;   // it/red index, const value, mul/div/mod operand, pad extent
    std::vector<Expr> args;
};

// The kind of a program step. step_op_name gives its name in the program Python reads ("split", ...).
enum class StepOp { Split, Merge, Shift, Stride, Unfold, Expand, Reduce, Contract };
const char* step_op_name(StepOp op);

struct ProgramStep {
    StepOp op;
    std::vector<int> src, dst;
    int64_t window = 0, stride = 0;
    bool mean = false;
    int weight = -1;
    std::vector<std::pair<int, int>> rename;
    std::vector<int> out;
};

struct ProgramTensor {
    std::vector<int> dims;
    std::vector<int64_t> shape;
    double fan_in = 1;   // 2 / (initial variance): see Lowerer::initial_scales
    std::vector<ProgramStep> views;   // weights: view steps applied to the parameter before its contraction (plan.hpp)
};

struct Program {
    ProgramTensor input, output;
    std::vector<ProgramTensor> weights;
    std::map<int, int64_t> sizes;
    std::vector<ProgramStep> steps;
    std::vector<int> free_dims;          // pass-through dims (batch): their size may vary at run time
    double flops = 0, params = 0, peak_elements = 0;
    std::vector<int64_t> iterator_sizes, reduction_sizes;
    std::vector<bool> mean;
    std::vector<Expr> input_expr;
    std::vector<std::vector<Expr>> weight_exprs;
    Cost cost;                           // of the planned steps (cost.hpp)
};

Program lower(const Space& space, const NodeState& final_node, int valuation);

// The steps of a node that is not final, forward, on the data tensor at its cut: the input holds the fixed
// (pass-through) coordinates and the frontier's data coordinates but its bare reductions (any completion sums
// those before the cut); reduce steps as lower() places them; planned. Sets dims, sizes, weights' dims, steps
// and free_dims only (no index expressions, FLOPs or cost): what cost_bound (bounds.hpp) walks.
Program lower_partial(const Space& space, const NodeState& node, int valuation);

// Reductions numbered by first appearance in the input coordinates (in spec order), then in the weights':
// so in a convolution the window reductions are (kh, kw) in the order of (H, W).
std::map<const Dim*, int> reduction_order(const Space& space, const NodeState& node);

// Weight layout: the order of a weight's coordinates (output-iterator-derived first, then reductions in
// creation order), so a conv-equivalent weight is [C_out, C_in, kh, kw].
std::vector<int> layout_key(const Dim* d, const std::map<const Dim*, int>& reduction_ordinal);

}  // namespace syno
