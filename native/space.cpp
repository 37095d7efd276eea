#include "space.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>
#include <stdexcept>

#include "bounds.hpp"
#include "describe.hpp"
#include "hash.hpp"
#include "priors.hpp"

namespace syno {

NodePtr build_child(const Space& space, const NodePtr& parent, Step step, std::array<int8_t, kMaxVariables> usage_delta,
                    double flops_delta, double params_delta);

bool DeadSet::contains(uint64_t h) const {
    auto& m = mutex_[h % kShards];
    std::lock_guard lock(m);
    return sets_[h % kShards].contains(h);
}

void DeadSet::insert(uint64_t h) {
    std::lock_guard lock(mutex_[h % kShards]);
    sets_[h % kShards].insert(h);
}

size_t DeadSet::size() const {
    size_t n = 0;
    for (int i = 0; i < kShards; ++i) {
        std::lock_guard lock(mutex_[i]);
        n += sets_[i].size();
    }
    return n;
}

namespace {

std::atomic<uint64_t> next_space_id{1};

void add_variable(std::vector<Variable>& vars, const std::string& spec_text, bool primary) {
    ParsedSpec spec = parse_spec(spec_text);
    for (auto& v : vars)
        if (v.name == spec.name)
            throw SpecError(spec_text, 0, "a variable named " + echo(spec.name) + " only once (it is declared twice)");
    Variable v;
    v.name = spec.name;
    v.primary = primary;
    v.default_value = spec.value;
    if (spec.max_occurrences) v.max_occurrences = *spec.max_occurrences;
    vars.push_back(v);
}

}  // namespace

Space::Space(const std::string& input_shape, const std::string& output_shape, const std::vector<std::string>& primary,
             const std::vector<std::string>& coefficients, const std::vector<std::map<std::string, int64_t>>& mappings,
             const Options& opts, const std::vector<std::string>& fixed)
    : options(opts), id(next_space_id.fetch_add(1, std::memory_order_relaxed)) {
    std::vector<Variable> vars;
    for (auto& s : primary) add_variable(vars, s, true);
    for (auto& s : coefficients) add_variable(vars, s, false);
    auto in_dims = parse_shape(input_shape);
    auto out_dims = parse_shape(output_shape);
    // Variables used by the shapes but not declared are primary, with the default allowance.
    for (auto* dims : {&in_dims, &out_dims})
        for (auto& d : *dims)
            for (auto& [name, e] : d.factors) {
                bool known = false;
                for (auto& v : vars) known |= v.name == name;
                if (!known) vars.push_back(Variable{name, true, 3, std::nullopt, false});
            }
    if (vars.size() > kMaxVariables)
        throw std::invalid_argument("at most " + std::to_string(kMaxVariables) + " variables are supported, got " +
                                    std::to_string(vars.size()));
    std::stable_sort(vars.begin(), vars.end(), [](const Variable& a, const Variable& b) {
        if (a.primary != b.primary) return a.primary;
        return a.name < b.name;
    });
    for (auto& name : fixed) {
        bool found = false;
        for (auto& v : vars)
            if (v.name == name) v.fixed = found = true;
        if (!found) throw std::invalid_argument("fixed variable " + echo(name) + " is not a variable of the shapes");
    }
    ctx.variables = vars;

    // Valuations: one per mapping (placeholder); a variable without a value takes its spec's value.
    std::vector<std::map<std::string, int64_t>> maps = mappings;
    if (maps.empty()) maps.emplace_back();
    for (size_t m = 0; m < maps.size(); ++m) {
        for (auto& [key, value] : maps[m]) {
            if (ctx.index_of(key) < 0)
                throw std::invalid_argument("mapping " + std::to_string(m) + " names " + echo(key) +
                                            ", which is not a variable of the space");
            if (value < 1)
                throw std::invalid_argument("mapping " + std::to_string(m) + " gives " + echo(key) + "=" +
                                            std::to_string(value) + "; sizes must be positive");
        }
        std::vector<int64_t> values;
        for (auto& v : ctx.variables) {
            auto it = maps[m].find(v.name);
            if (it != maps[m].end()) values.push_back(it->second);
            else if (v.default_value) values.push_back(*v.default_value);
            else
                throw std::invalid_argument("variable " + echo(v.name) + " has no value in mapping " + std::to_string(m) +
                                            " and no default (write its value in its spec: 'name=<value>')");
        }
        ctx.valuations.push_back(values);
    }

    for (size_t j = 0; j < out_dims.size(); ++j) {
        output.push_back(make_size(ctx, out_dims[j], output_shape));
        output_unordered.push_back(out_dims[j].unordered);
        if (!ctx.is_valid_extent(output.back(), 1))
            throw std::invalid_argument("output dimension " + std::to_string(j) + " of " + echo(output_shape) + " (" +
                                        ctx.to_string(output.back()) + ") is not a positive integer in every mapping");
    }
    for (size_t i = 0; i < in_dims.size(); ++i) {
        InputDim d{make_size(ctx, in_dims[i], input_shape), in_dims[i].unordered, -1};
        if (!ctx.is_valid_extent(d.size, 1))
            throw std::invalid_argument("input dimension " + std::to_string(i) + " of " + echo(input_shape) + " (" +
                                        ctx.to_string(d.size) + ") is not a positive integer in every mapping");
        input.push_back(d);
    }
    // Pass-through pairs: a single variable that is fixed, or declared with zero occurrences, appearing in
    // both shapes.
    std::vector<bool> output_taken(output.size(), false);
    for (size_t i = 0; i < input.size(); ++i) {
        if (in_dims[i].factors.size() != 1 || in_dims[i].factors[0].second != 1) continue;
        int var = ctx.index_of(in_dims[i].factors[0].first);
        const Variable& v = ctx.variables[var];
        if (!(v.fixed || (v.primary && v.max_occurrences == 0))) continue;
        for (size_t j = 0; j < output.size(); ++j)
            if (!output_taken[j] && output[j] == input[i].size) {
                output_taken[j] = true;
                input[i].fixed_output = static_cast<int>(j);
                fixed_inputs.push_back(static_cast<int>(i));
                break;
            }
    }
    for (size_t j = 0; j < output.size(); ++j)
        iterators.push_back(store.iterator(static_cast<int>(j), output[j], output_unordered[j]));

    auto r = std::make_shared<NodeState>();
    for (size_t j = 0; j < output.size(); ++j)
        if (!output_taken[j]) r->frontier.push_back(iterators[j]);
    std::sort(r->frontier.begin(), r->frontier.end(), dim_less);
    r->hash = frontier_hash(r->frontier, r->expansions);
    r->distance = shape_distance(*this, *r);
    root = r;
}

bool Space::valid_extent(const Size& s) const {
    int vars = 0;
    for (int i = 0; i < ctx.count(); ++i) vars += s.exponent[i] != 0;
    return vars <= options.max_size_variables && admissible(s);
}

bool Space::admissible(const Size& s) const {
    if (options.structural) return ctx.is_legal(s);
    // A pure function of the size, asked for every candidate's new sizes (merge blocks, split products: tens per
    // expanded node) and exact integer arithmetic under every mapping each time: remembered per thread, by space.
    struct Entry {
        uint64_t space = 0, lo = 0, hi = 0;
        bool verdict = false;
    };
    static constexpr size_t kEntries = 1024;
    thread_local std::array<Entry, kEntries> memo{};
    uint64_t lo, hi;
    static_assert(sizeof s.exponent == sizeof lo + sizeof hi);
    std::memcpy(&lo, s.exponent.data(), sizeof lo);
    std::memcpy(&hi, s.exponent.data() + sizeof lo, sizeof hi);
    Entry& e = memo[mix64(lo ^ mix64(hi ^ id)) % kEntries];
    if (e.space != id || e.lo != lo || e.hi != hi) e = {id, lo, hi, ctx.is_valid_extent(s)};
    return e.verdict;
}

double Space::sum_over_mappings(const Size& s) const {
    double total = 0;
    for (size_t v = 0; v < ctx.valuations.size(); ++v) total += ctx.approx(s, static_cast<int>(v));
    return total;
}

bool Space::within_allowance(const NodeState& n, const std::array<int8_t, kMaxVariables>& extra) const {
    for (int i = 0; i < ctx.count(); ++i)
        if (n.usage[i] + extra[i] > ctx.variables[i].max_occurrences) return false;
    return true;
}

std::vector<Size> Space::enumerate_sizes(const NodeState& n, bool coefficient_only) const {
    std::vector<Size> out;
    int count = ctx.count();
    std::vector<int> lo(count), hi(count);
    for (int i = 0; i < count; ++i) {
        int remaining = ctx.variables[i].max_occurrences - n.usage[i];
        if (ctx.variables[i].primary) {
            lo[i] = 0;
            hi[i] = coefficient_only ? 0 : std::min(remaining, options.max_primary_degree);
        } else {
            lo[i] = -std::min(remaining, options.max_coefficient_degree);
            hi[i] = std::min(remaining, options.max_coefficient_degree);
        }
        if (hi[i] < lo[i]) hi[i] = lo[i] = 0;
    }
    Size s;
    for (int i = 0; i < count; ++i) s.exponent[i] = static_cast<int8_t>(lo[i]);
    while (true) {
        if (!s.is_one() && ctx.primary_degree(s) <= options.max_primary_degree && admissible(s)) out.push_back(s);
        int i = 0;
        while (i < count && s.exponent[i] == hi[i]) { s.exponent[i] = static_cast<int8_t>(lo[i]); ++i; }
        if (i == count) break;
        ++s.exponent[i];
    }
    return out;
}

std::vector<Size> Space::enumerate_divisors(const NodeState& n, const Size& of) const {
    std::vector<Size> out;
    int count = ctx.count();
    std::vector<int> lo(count), hi(count);
    for (int i = 0; i < count; ++i) {
        if (ctx.variables[i].primary) { lo[i] = 0; hi[i] = std::max<int>(0, of.exponent[i]); }
        else { lo[i] = -options.max_coefficient_degree; hi[i] = options.max_coefficient_degree; }
    }
    Size b;
    for (int i = 0; i < count; ++i) b.exponent[i] = static_cast<int8_t>(lo[i]);
    while (true) {
        Size q = of / b;
        if (!b.is_one() && ctx.primary_degree(b) <= options.max_primary_degree && admissible(b) &&
            admissible(q)) {
            std::array<int8_t, kMaxVariables> usage{};
            for (int i = 0; i < count; ++i)
                usage[i] = static_cast<int8_t>((std::abs(q.exponent[i]) + std::abs(b.exponent[i]) - std::abs(of.exponent[i])) / 2);
            if (within_allowance(n, usage)) out.push_back(b);
        }
        int i = 0;
        while (i < count && b.exponent[i] == hi[i]) { b.exponent[i] = static_cast<int8_t>(lo[i]); ++i; }
        if (i == count) break;
        ++b.exponent[i];
    }
    return out;
}

NodePtr make_child(const Space& space, const NodePtr& parent, Step step, std::array<int8_t, kMaxVariables> usage_delta,
                   double flops_delta, double params_delta) {
    int slot = RuleCounters::depth_slot();
    space.depth_counters.canonical[slot].fetch_add(1, std::memory_order_relaxed);
    NodePtr child = build_child(space, parent, std::move(step), usage_delta, flops_delta, params_delta);
    if (!child) space.depth_counters.pruned[slot].fetch_add(1, std::memory_order_relaxed);
    return child;
}

bool pruned_before_build(const Space& space, const NodeState& parent, Prim prim,
                         const std::array<int8_t, kMaxVariables>& usage_delta, double flops_delta, double params_delta) {
    const Options& o = space.options;
    int p = static_cast<int>(prim);
    if (o.max_count[p] >= 0 && parent.counts[p] + 1 > o.max_count[p]) return true;
    if (!space.within_allowance(parent, usage_delta)) return true;
    if (parent.depth + 1 > o.max_depth) return true;
    if (!o.structural && o.flops_pruning && parent.flops_bound + flops_delta > o.max_flops) return true;
    return !o.structural && parent.params + params_delta > o.max_params;
}

NodePtr build_child(const Space& space, const NodePtr& parent, Step step, std::array<int8_t, kMaxVariables> usage_delta,
                    double flops_delta, double params_delta) {
    const Options& o = space.options;
    int prim = static_cast<int>(step.prim);
    if (pruned_before_build(space, *parent, step.prim, usage_delta, flops_delta, params_delta)) return nullptr;
    for (const Dim* d : step.produced)
        if (!space.valid_extent(d->size)) return nullptr;

    auto child = std::make_shared<NodeState>();
    NodeState& c = *child;
    c.frontier.reserve(parent->frontier.size() + step.produced.size());
    for (const Dim* d : parent->frontier)
        if (std::find(step.consumed.begin(), step.consumed.end(), d) == step.consumed.end()) c.frontier.push_back(d);
    for (const Dim* d : step.produced) c.frontier.push_back(d);
    std::sort(c.frontier.begin(), c.frontier.end(), dim_less);
    c.expansions = parent->expansions;
    for (const Dim* d : step.expanded) c.expansions.push_back(d);
    std::sort(c.expansions.begin(), c.expansions.end(), dim_less);
    c.hash = frontier_hash(c.frontier, c.expansions);
    c.depth = parent->depth + 1;
    c.counts = parent->counts;
    ++c.counts[prim];
    c.usage = parent->usage;
    for (int i = 0; i < kMaxVariables; ++i) c.usage[i] = static_cast<int8_t>(c.usage[i] + usage_delta[i]);
    c.reducing = parent->reducing && step.prim == Prim::Reduce;
    c.last_reduction = parent->last_reduction;
    c.reductions = parent->reductions;
    c.contractions = parent->contractions;
    c.latest_group = parent->latest_group;
    c.latest_leader = parent->latest_leader;
    c.flops_bound = parent->flops_bound + flops_delta;
    c.params = parent->params + params_delta;
    c.parent = parent;
    if (step.prim == Prim::Reduce) {
        c.last_reduction = step.param;
        ++c.reductions;
    }
    if (step.prim == Prim::Contraction) {
        ++c.contractions;
        c.latest_group = step.group;
        c.latest_leader = step.consumed.front()->hash;
    }
    c.step = std::move(step);
    c.distance = shape_distance(space, c);
    if (o.distance_pruning && c.depth + c.distance > o.max_depth) return nullptr;  // also when unreachable
    return child;
}

Space::Children Space::children(const NodePtr& node) const {
    if (node->is_final()) return std::make_shared<const std::vector<NodePtr>>();
    bool cached = node->depth <= kCachedDepth;
    if (cached) {
        std::lock_guard lock(children_cache_mutex);
        auto it = children_cache.find(node->hash);
        if (it != children_cache.end()) return it->second;
    }
    auto unique = std::make_shared<const std::vector<NodePtr>>(generate_children(node));
    if (cached) {
        for (const NodePtr& c : *unique) pin_node(*c);
        std::lock_guard lock(children_cache_mutex);
        children_cache.emplace(node->hash, unique);
    }
    return unique;
}

std::vector<NodePtr> Space::generate_children(const NodePtr& node) const {
    std::vector<NodePtr> all;
    RuleCounters::current_depth() = node->depth;
    depth_counters.expanded[RuleCounters::depth_slot()].fetch_add(1, std::memory_order_relaxed);
    // Every operator below costs more than max_cost: no children (checked here, once per expanded node, rather
    // than on every child built: the bound lowers the node's path)
    if (!options.structural && options.cost_pruning && std::isfinite(options.max_cost) &&
        cost_bound(*this, *node) > options.max_cost)
        return all;
    // unweighted-pooling-limit (priors.hpp): once no CONTRACTION can come, the unweighted reductions only grow
    if (!options.structural && options.prior_max_pooling > 0 && !contraction_possible(*this, *node) &&
        rules.check(PriorPooling, pooling_factor(*this, *node) > options.prior_max_pooling))
        return all;
    // At the depth limit only FINALIZE (which adds no depth) can succeed: skip building doomed candidates.
    if (node->depth < options.max_depth) {
        if (node->reducing) generate_reduce(*this, node, all);
        generate_split(*this, node, all);
        generate_merge(*this, node, all);
        generate_shift(*this, node, all);
        generate_stride(*this, node, all);
        generate_unfold(*this, node, all);
        generate_expand(*this, node, all);
        generate_contraction(*this, node, all);
    }
    generate_finalize(*this, node, all);
    // Children equal up to interchangeable reductions have equal hashes: keep the first of each.
    std::vector<NodePtr> unique;
    std::unordered_set<uint64_t> seen;
    for (auto& c : all) {
        bool duplicate = !seen.insert(c->hash).second;
        if (!rules.check(EqualReductionsInterchangeable, duplicate)) unique.push_back(c);
    }
    return unique;
}

namespace {

std::string valuation_text(const Space& space, const Size& s, int v) {
    std::string out;
    for (int i = 0; i < space.ctx.count(); ++i) {
        if (!s.exponent[i]) continue;
        if (!out.empty()) out += ", ";
        out += space.ctx.variables[i].name + "=" + std::to_string(space.ctx.valuations[v][i]);
    }
    return out;
}

}  // namespace

std::string invalid_sizes(const Space& space, const Step& step) {
    const SizeContext& ctx = space.ctx;
    for (size_t v = 0; v < ctx.valuations.size(); ++v) {
        int vi = static_cast<int>(v);
        for (const Dim* d : step.produced) {
            auto x = ctx.value(d->size, vi);
            if (!ctx.is_legal(d->size) || !x || *x < 1)
                return "size " + ctx.to_string(d->size) + " is not a positive integer at " +
                       valuation_text(space, d->size, vi) + " (mapping " + std::to_string(v) + ")";
        }
        if (step.prim == Prim::Unfold) {
            const Size& k = step.consumed[1]->size;
            auto x = ctx.value(k, vi);
            if (x && *x % 2 == 0)
                return "the UNFOLD window " + ctx.to_string(k) + " = " + std::to_string(*x) + " is even at " +
                       valuation_text(space, k, vi) + " (mapping " + std::to_string(v) +
                       "); an UNFOLD needs an odd window";
        }
    }
    return "";
}

ReplayResult replay(const Space& space, const std::vector<uint64_t>& keys) {
    ReplayResult r;
    NodePtr node = space.root;
    for (size_t i = 0; i < keys.size(); ++i) {
        NodePtr next;
        Space::Children children = space.children(node);  // held: a range-for over *temporary would dangle
        for (const NodePtr& c : *children)
            if (c->hash == keys[i]) next = c;
        r.failed_step = static_cast<int>(i);
        if (!next) {
            r.reason = "is not a canonical child in this space";
            return r;
        }
        if (!next->is_final()) {
            r.reason = invalid_sizes(space, next->step);
            if (!r.reason.empty()) {
                r.invalid_size = true;
                r.reason = "(" + describe_step(space, next->step) + "): " + r.reason;
                return r;
            }
        }
        node = next;
    }
    r.failed_step = -1;
    r.node = node;
    return r;
}

}  // namespace syno
