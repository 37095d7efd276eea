// The operator space: sizes, options, the coordinate store, children generation, sampling, enumeration.
#pragma once
#include <functional>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "cost.hpp"
#include "dim.hpp"
#include "hash_set.hpp"
#include "node.hpp"
#include "rules.hpp"
#include "size.hpp"

namespace syno {

struct Options {
    int max_depth = 8;
    int max_reductions = 4;
    int max_weights = 2;          // contractions (one weight each)
    int min_weights = 1;
    int max_shares = 5;           // per contraction
    int max_primary_degree = 1;   // enumerated sizes (reduce domains, merge blocks)
    int max_coefficient_degree = 1;
    int max_size_variables = 3;   // distinct variables in any coordinate's size
    std::array<int, static_cast<int>(Prim::Count)> max_count{-1, -1, -1, 2, -1, -1, 0, -1, -1};
    int max_unfold_window = 30;
    double min_unfold_ratio = 1.0;   // main extent >= ratio * window (a window may span the whole extent)
    double max_flops = std::numeric_limits<double>::infinity();
    double min_flops = 0;
    double max_params = std::numeric_limits<double>::infinity();
    double min_params = 0;
    double max_memory = std::numeric_limits<double>::infinity();  // bytes of the largest intermediate
    double max_cost = std::numeric_limits<double>::infinity();    // planned cost (cost.hpp), summed over mappings
    double min_weight_params = 0;
    bool distance_pruning = true;
    bool flops_pruning = true;
    bool cost_pruning = true;     // prune nodes whose cost bound (bounds.hpp) exceeds max_cost
    CostProfile cost_profile;     // the coefficients of the planned cost (max_cost, cost bounds, finals' cost)
    bool canonical_rules = true;  // false only for ablations: heuristic rules off, canonical kept
    // A replay space: children are decided by structure alone (canonical rules, depth, counts, allowances,
    // legal exponents). The search-time filters on the space's own valuations (sizes >= 2, window limits,
    // min_unfold_ratio, min_weight_params, budgets) are off; replay() checks that sizes are valid instead.
    bool structural = false;
    // Space priors (priors.hpp): search-time restrictions, off here (substitute turns them on); a structural
    // space ignores them. Thresholds of 0 are off.
    bool prior_weight_io = false;   // every CONTRACTION has an inner and an outer SHARE
    bool prior_outer_kinds = false; // outer SHAREs feed the output (via MERGEs) or a later weight only
    double prior_max_outer = 0;     // product of the non-low-rank outer coordinates (largest mapping)
    int prior_lowrank_size = 0;     // size of every low-rank coordinate (largest mapping)
    double prior_max_pooling = 0;   // product of the unweighted reductions' domains (largest mapping)
    std::vector<int> channel_inputs;  // input positions that are channels: rule channel-split-order
};

struct InputDim {
    Size size;
    bool unordered = false;
    int fixed_output = -1;  // >= 0: passes straight through to this output position
};

// Remembers nodes known to have no final descendant (a sound memo: it only skips empty subtrees).
class DeadSet {
public:
    bool contains(uint64_t h) const;
    void insert(uint64_t h);
    size_t size() const;

private:
    static constexpr int kShards = 64;
    mutable std::array<std::mutex, kShards> mutex_;
    std::array<HashSet, kShards> sets_;
};

struct DepthCounters {
    std::array<std::atomic<uint64_t>, RuleCounters::kDepthSlots> canonical{}, pruned{}, expanded{};
};

struct Space {
    SizeContext ctx;
    Options options;
    std::vector<InputDim> input;          // the input spec, in order
    std::vector<Size> output;             // the output spec, in order
    std::vector<bool> output_unordered;
    std::vector<int> fixed_inputs;        // input positions that pass through
    std::vector<const Dim*> iterators;    // per output position (fixed ones included)
    mutable DimStore store;
    mutable RuleCounters rules;
    // Children of shallow nodes are computed once: every descent passes through them. Cached nodes are pinned
    // (dim.hpp): they outlive the walk that made them.
    static constexpr int kCachedDepth = 2;
    mutable std::mutex children_cache_mutex;
    mutable std::unordered_map<uint64_t, std::shared_ptr<const std::vector<NodePtr>>> children_cache;
    mutable DepthCounters depth_counters;
    NodePtr root;
    const uint64_t id;  // distinct for every Space of the process (a key of per-thread memos: admissible)
    std::vector<int> mapping_multiplicity;  // placeholders per valuation (valuations are the mappings)

    Space(const std::string& input_shape, const std::string& output_shape, const std::vector<std::string>& primary,
          const std::vector<std::string>& coefficients, const std::vector<std::map<std::string, int64_t>>& mappings,
          const Options& options, const std::vector<std::string>& fixed = {});

    // All canonical children (non-final and final), deduplicated by hash, in a deterministic order.
    using Children = std::shared_ptr<const std::vector<NodePtr>>;
    Children children(const NodePtr& node) const;
    std::vector<NodePtr> generate_children(const NodePtr& node) const;
    bool is_dead_candidate(const NodeState& child) const;  // distance/budget pruning verdict

    // Helpers for generators.
    bool valid_extent(const Size& s) const;
    bool admissible(const Size& s) const;  // search: valid (>= 2) under every valuation; structural: legal
    bool within_allowance(const NodeState& n, const std::array<int8_t, kMaxVariables>& extra) const;
    std::vector<Size> enumerate_sizes(const NodeState& n, bool coefficient_only) const;
    std::vector<Size> enumerate_divisors(const NodeState& n, const Size& of) const;
    double sum_over_mappings(const Size& s) const;
};

struct SampleResult {
    std::vector<NodePtr> operators;   // distinct (by hash), in draw order
    std::string stop_reason;          // "count", "exhausted", "attempts", "time"
    uint64_t attempts = 0;            // random descents drawn
    uint64_t failed = 0;              // descents that found no operator or a duplicate
    double seconds = 0;
};
SampleResult sample(const Space&, const NodePtr& prefix, int count, uint64_t seed, int threads, uint64_t max_attempts,
                    double time_limit, uint64_t budget, int flops_bins = 0);

struct EnumerateResult {
    std::vector<NodePtr> operators;   // distinct final operators (first max_operators kept)
    uint64_t operator_count = 0;
    std::vector<uint64_t> operator_hashes;  // every distinct operator, in discovery order (8 bytes each)
    std::vector<uint64_t> nodes_per_depth;
    std::vector<uint64_t> finals_per_depth;
    std::string stop_reason;          // "exhausted", "limit", "time"
    double seconds = 0;
};
EnumerateResult enumerate(const Space&, const NodePtr& from, int max_depth, uint64_t max_nodes, double time_limit,
                          uint64_t max_operators);

// Why the coordinates `step` creates are not valid sizes under the space's valuations ("" when they are):
// every size a positive integer, every UNFOLD window odd. What replay re-checks at a new valuation.
std::string invalid_sizes(const Space&, const Step&);

// Follows child keys from the root of a structural space (Options::structural) and checks each step's sizes.
struct ReplayResult {
    NodePtr node;              // the node reached (null on failure)
    int failed_step = -1;      // the step that failed, or -1
    bool invalid_size = false; // the step exists structurally but its sizes are not valid here
    std::string reason;
};
ReplayResult replay(const Space&, const std::vector<uint64_t>& keys);

// Generators (one file each under primitives/).
void generate_reduce(const Space&, const NodePtr&, std::vector<NodePtr>&);
void generate_split(const Space&, const NodePtr&, std::vector<NodePtr>&);
void generate_merge(const Space&, const NodePtr&, std::vector<NodePtr>&);
void generate_shift(const Space&, const NodePtr&, std::vector<NodePtr>&);
void generate_stride(const Space&, const NodePtr&, std::vector<NodePtr>&);
void generate_unfold(const Space&, const NodePtr&, std::vector<NodePtr>&);
void generate_expand(const Space&, const NodePtr&, std::vector<NodePtr>&);
void generate_contraction(const Space&, const NodePtr&, std::vector<NodePtr>&);
void generate_finalize(const Space&, const NodePtr&, std::vector<NodePtr>&);

// Shape distance: a lower bound on the steps from `node` to any final operator (kUnreachable if none).
constexpr int kUnreachable = 1 << 20;
struct ShapeSummary {
    std::vector<Size> data;     // sizes of the frontier's data coordinates (weights excluded)
    std::vector<Size> reduces;  // the subset of `data` that are bare reductions
    int contractions = 0;
    bool reducing = false;
    int reductions = 0;
};
ShapeSummary summarize(const NodeState&);
struct DistanceScratch {  // shape_distance's working vectors, for a caller that asks many times about one space
    using Counts = std::vector<std::pair<Size, int>>;
    Counts have, reduces;
    Counts want;              // the space's input sizes, counted once
    Size numel_want;
    int desired = -1;         // -1: `want` not counted yet
};
int shape_distance(const Space&, const ShapeSummary&, DistanceScratch&);
int shape_distance(const Space&, const ShapeSummary&);
int shape_distance(const Space&, const NodeState&);
// Cheap pre-check before building a child: can the child (parent minus `consumed` plus `produced` data
// sizes) still reach a final operator within the depth limit, and is the primitive's count limit not reached?
// Saves interning coordinates of dead children.
bool may_reach(const Space& space, const NodeState& parent, const std::vector<const Dim*>& consumed,
               const std::vector<Size>& produced, Prim prim);
// may_reach for the candidates of one node, which may have hundreds (CONTRACTION's groups): the node's summary is
// made once, and each candidate's in reused vectors. Holds `space` and `parent` by reference.
class ReachCheck {
public:
    ReachCheck(const Space& space, const NodeState& parent);
    bool operator()(const std::vector<const Dim*>& consumed, const std::vector<Size>& produced, Prim prim);
    // may_reach's shape-distance test alone, for a caller that checked the count limit and the produced sizes.
    bool distance_allows(const std::vector<const Dim*>& consumed, const std::vector<Size>& produced, Prim prim);

private:
    const Space& space_;
    const NodeState& parent_;
    ShapeSummary summary_, candidate_;
    DistanceScratch scratch_;
};

// Whether make_child prunes a child of `parent` by `prim` with these deltas on what it knows before building it:
// the primitive's count, the size allowance, the depth, the FLOPs and parameter budgets (then the sizes and the
// shape distance). For a generator that knows the deltas before interning the child's coordinates.
bool pruned_before_build(const Space& space, const NodeState& parent, Prim prim,
                         const std::array<int8_t, kMaxVariables>& usage_delta, double flops_delta, double params_delta);

// Builds a child from `parent` by replacing `step.consumed` with `step.produced` in the frontier. Returns
// nullptr when the child is pruned (depth, distance, budgets, invalid sizes).
NodePtr make_child(const Space& space, const NodePtr& parent, Step step, std::array<int8_t, kMaxVariables> usage_delta,
                   double flops_delta = 0, double params_delta = 0);

}  // namespace syno
