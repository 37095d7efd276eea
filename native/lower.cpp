#include "lower.hpp"

#include "plan.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <set>
#include <stdexcept>

namespace syno {

std::vector<int> layout_key(const Dim* d, const std::map<const Dim*, int>& reduction_ordinal) {
    switch (d->kind) {
        case DimKind::Iterator: return {0, d->index};
        case DimKind::Reduce: return {1, reduction_ordinal.at(d)};
        case DimKind::MergeL: { auto k = layout_key(d->a, reduction_ordinal); k.push_back(0); return k; }
        case DimKind::MergeR: { auto k = layout_key(d->a, reduction_ordinal); k.push_back(1); return k; }
        default: return layout_key(d->a, reduction_ordinal);
    }
}

std::map<const Dim*, int> reduction_order(const Space& space, const NodeState& node) {
    std::map<const Dim*, int> order;
    std::function<void(const Dim*)> visit = [&](const Dim* d) {
        if (d->is_bare_reduce()) { order.emplace(d, static_cast<int>(order.size())); return; }
        if (d->a) visit(d->a);
        if (d->b) visit(d->b);
    };
    for (const Dim* d : node.final_info->input) visit(d);
    for (auto& w : node.final_info->weights)
        for (const Dim* d : w) visit(d);
    for (const Step* s : node.path())  // reductions reached from nowhere else (none in practice)
        if (s->prim == Prim::Reduce && !order.count(s->produced[0])) order.emplace(s->produced[0], static_cast<int>(order.size()));
    (void)space;
    return order;
}

namespace {

class Lowerer {
public:
    Lowerer(const Space& space, const NodeState& node, int valuation)
        : space_(space), node_(node), v_(valuation), path_(node.path()), reduction_ordinal_(node.is_final() ? reduction_order(space, node) : std::map<const Dim*, int>{}) {}

    Program run() {
        const FinalInfo& f = *node_.final_info;
        weight_groups_ = f.weight_groups;
        // Input tensor: the spec order, pass-through coordinates included.
        size_t next = 0;
        for (auto& in : space_.input) {
            const Dim* d = in.fixed_output >= 0 ? space_.iterators[in.fixed_output] : f.input[next++];
            t_.push_back(id(d));
            p_.input.dims.push_back(id(d));
            p_.input.shape.push_back(size(d));
            if (in.fixed_output >= 0) p_.free_dims.push_back(id(d));
        }
        // Weights: their coordinates are named by the SHARE outputs.
        for (auto& w : f.weights) {
            ProgramTensor t;
            for (const Dim* r : w) {
                t.dims.push_back(id(r->a));
                t.shape.push_back(size(r->a));
            }
            p_.weights.push_back(t);
        }
        build_expressions();
        reduce_bare();
        for (auto it = path_.rbegin(); it != path_.rend(); ++it) {
            apply(**it);
            reduce_bare();
        }
        for (size_t j = 0; j < space_.iterators.size(); ++j) {
            const Dim* d = space_.iterators[j];
            p_.output.dims.push_back(id(d));
            p_.output.shape.push_back(size(d));
        }
        std::set<int> have(t_.begin(), t_.end()), want(p_.output.dims.begin(), p_.output.dims.end());
        if (have != want || t_.size() != p_.output.dims.size())
            throw std::logic_error("internal error: lowering did not end at the output coordinates");
        for (auto& w : p_.weights) {
            double n = 1;
            for (auto s : w.shape) n *= static_cast<double>(s);
            p_.params += n;
        }
        for (size_t i = 0; i < dims_.size(); ++i) p_.sizes[static_cast<int>(i)] = size_of_id(static_cast<int>(i));
        plan(p_);  // reorders view steps only: FLOPs (counted above, in canonical order) are unchanged
        p_.cost = plan_cost(p_);
        return std::move(p_);  // (the Lowerer is done with it)
    }

    // The steps below a partial node, on the data tensor at its cut (lower_partial in lower.hpp).
    Program run_partial() {
        for (auto& in : space_.input)
            if (in.fixed_output >= 0) {
                int d = id(space_.iterators[in.fixed_output]);
                t_.push_back(d);
                p_.free_dims.push_back(d);
            }
        for (const Dim* d : node_.frontier)
            if (!d->is(DimKind::ShareR) && !d->is_bare_reduce()) t_.push_back(id(d));
        p_.input.dims = t_;
        for (auto it = path_.rbegin(); it != path_.rend(); ++it) {  // weights in forward order, as run() has them
            if ((*it)->prim != Prim::Contraction) continue;
            ProgramTensor w;
            for (const Dim* d : (*it)->produced)
                if (d->is(DimKind::ShareR)) w.dims.push_back(id(d->a));
            p_.weights.push_back(w);
            weight_groups_.push_back((*it)->group);
        }
        for (auto it = path_.rbegin(); it != path_.rend(); ++it) {
            apply(**it);
            reduce_bare();
        }
        p_.output.dims = t_;
        for (size_t i = 0; i < dims_.size(); ++i) p_.sizes[static_cast<int>(i)] = size_of_id(static_cast<int>(i));
        plan(p_);
        return std::move(p_);  // (the Lowerer is done with it)
    }

private:
    int id(const Dim* d) {  // (a program has tens of coordinates: a scan beats a hash)
        auto it = std::find(dims_.begin(), dims_.end(), d);
        if (it != dims_.end()) return static_cast<int>(it - dims_.begin());
        dims_.push_back(d), sizes_.push_back(kUnsized);
        return static_cast<int>(dims_.size()) - 1;
    }
    int64_t size(const Dim* d) const {
        auto v = space_.ctx.value(d->size, v_);
        if (!v) throw std::logic_error("internal error: a non-integral size reached lowering");
        return *v;
    }
    double numel(const std::vector<int>& dims) {
        double n = 1;
        for (int d : dims) n *= static_cast<double>(size_of_id(d));
        return n;
    }
    int64_t size_of_id(int i) {
        int64_t& s = sizes_.at(static_cast<size_t>(i));  // (out of range: an internal error)
        if (s == kUnsized) s = size(dims_[static_cast<size_t>(i)]);
        return s;
    }
    void track_peak(double elements) { p_.peak_elements = std::max(p_.peak_elements, elements); }
    size_t position(int d) const {
        auto it = std::find(t_.begin(), t_.end(), d);
        if (it == t_.end()) throw std::logic_error("internal error: coordinate missing from the data tensor");
        return static_cast<size_t>(it - t_.begin());
    }

    // Sums away every bare reduction now present in the data tensor (as early as possible: fewest FLOPs).
    void reduce_bare() {
        for (size_t i = 0; i < t_.size();) {
            const Dim* d = dim_of(t_[i]);
            if (d->is_bare_reduce()) {
                ProgramStep s{StepOp::Reduce, {t_[i]}};
                if (node_.is_final()) s.mean = !weight_reductions_.count(reduction_ordinal_.at(d));
                p_.flops += numel(t_);
                p_.steps.push_back(s);
                t_.erase(t_.begin() + static_cast<long>(i));
            } else {
                ++i;
            }
        }
    }
    const Dim* dim_of(int i) const {
        if (i < 0 || static_cast<size_t>(i) >= dims_.size()) throw std::logic_error("internal error: unknown coordinate id");
        return dims_[static_cast<size_t>(i)];
    }

    void apply(const Step& s) {
        switch (s.prim) {
            case Prim::Reduce:
            case Prim::Finalize: return;
            case Prim::Split: {  // forward: one coordinate into (lhs, rhs)
                int x = id(s.produced[0]), l = id(s.consumed[0]), r = id(s.consumed[1]);
                size_t at = position(x);
                t_[at] = l;
                t_.insert(t_.begin() + static_cast<long>(at) + 1, r);
                p_.steps.push_back({StepOp::Split, {x}, {l, r}});
                return;
            }
            case Prim::Merge: {  // forward: (lhs, rhs) into one coordinate
                int l = id(s.produced[0]), r = id(s.produced[1]), o = id(s.consumed[0]);
                t_.erase(t_.begin() + static_cast<long>(position(r)));
                t_[position(l)] = o;
                p_.steps.push_back({StepOp::Merge, {l, r}, {o}});
                return;
            }
            case Prim::Shift: {
                int x = id(s.produced[0]), o = id(s.consumed[0]);
                t_[position(x)] = o;
                p_.steps.push_back({StepOp::Shift, {x}, {o}});
                return;
            }
            case Prim::Stride: {
                int x = id(s.produced[0]), o = id(s.consumed[0]);
                t_[position(x)] = o;
                ProgramStep st{StepOp::Stride, {x}, {o}};
                st.stride = *space_.ctx.value(s.param, v_);
                p_.steps.push_back(st);
                return;
            }
            case Prim::Unfold: {
                int x = id(s.produced[0]), m = id(s.consumed[0]), w = id(s.consumed[1]);
                size_t at = position(x);
                t_[at] = m;
                t_.insert(t_.begin() + static_cast<long>(at) + 1, w);
                ProgramStep st{StepOp::Unfold, {x}, {m, w}};
                st.window = size(s.consumed[1]);
                p_.steps.push_back(st);
                track_peak(numel(t_));
                return;
            }
            case Prim::Expand: {
                int x = id(s.consumed[0]);
                t_.push_back(x);
                p_.steps.push_back({StepOp::Expand, {}, {x}});
                return;
            }
            case Prim::Contraction: contract(s); return;
            default: throw std::logic_error("internal error: unknown primitive in lowering");
        }
    }

    void contract(const Step& s) {
        int weight = static_cast<int>(std::find(weight_groups_.begin(), weight_groups_.end(), s.group) -
                                      weight_groups_.begin());
        ProgramStep st{StepOp::Contract};
        st.weight = weight;
        for (const Dim* d : s.produced)
            if (d->is(DimKind::ShareL)) {
                int from = id(d), to = id(d->a);
                st.rename.emplace_back(from, to);
                t_[position(from)] = to;
            }
        std::vector<int> letters = t_;
        for (int w : p_.weights[weight].dims)
            if (std::find(letters.begin(), letters.end(), w) == letters.end()) letters.push_back(w);
        p_.flops += 2 * numel(letters);
        std::vector<int> out;
        for (int d : letters)
            if (!dim_of(d)->is_bare_reduce()) out.push_back(d);
        st.out = out;
        t_ = out;
        track_peak(numel(t_));
        p_.steps.push_back(st);
    }

    // Index expressions (the oracle of docs/architecture.md §1).
    Expr value(const Dim* d) {
        auto c = [](int64_t x) { return Expr{"const", x, {}}; };
        switch (d->kind) {
            case DimKind::Iterator: return {"it", d->index, {}};
            case DimKind::Reduce: return {"red", reduction_ordinal_.at(d), {}};
            case DimKind::Shift: return {"mod", size(d), {Expr{"add", 0, {value(d->a), c(1)}}}};
            case DimKind::Stride: return {"mul", *space_.ctx.value(d->param, v_), {value(d->a)}};
            case DimKind::Split:
                return {"add", 0, {Expr{"mul", size(d->b), {value(d->a)}}, value(d->b)}};
            case DimKind::Unfold:
                return {"pad", size(d),
                        {Expr{"sub", 0, {Expr{"add", 0, {value(d->a), value(d->b)}}, c(size(d->b) / 2)}}}};
            case DimKind::MergeL: return {"div", *space_.ctx.value(d->param, v_), {value(d->a)}};
            case DimKind::MergeR: return {"mod", *space_.ctx.value(d->param, v_), {value(d->a)}};
            case DimKind::ShareL:
            case DimKind::ShareR: return value(d->a);
        }
        throw std::logic_error("internal error: unknown coordinate kind");
    }
    void collect_reductions(const Expr& e, std::set<int>& into) {
        if (e.op == "red") into.insert(static_cast<int>(e.value));
        for (auto& a : e.args) collect_reductions(a, into);
    }
    void build_expressions() {
        for (const Dim* it : space_.iterators) p_.iterator_sizes.push_back(size(it));
        std::vector<const Dim*> reductions(reduction_ordinal_.size());
        for (auto& [d, i] : reduction_ordinal_) reductions[i] = d;
        for (const Dim* r : reductions) p_.reduction_sizes.push_back(size(r));
        size_t next = 0;
        for (auto& in : space_.input) {
            const Dim* d = in.fixed_output >= 0 ? space_.iterators[in.fixed_output] : node_.final_info->input[next++];
            p_.input_expr.push_back(value(d));
        }
        for (auto& w : node_.final_info->weights) {
            std::vector<Expr> exprs;
            for (const Dim* r : w) {
                exprs.push_back(value(r));
                collect_reductions(exprs.back(), weight_reductions_);
            }
            p_.weight_exprs.push_back(exprs);
        }
        for (size_t i = 0; i < reductions.size(); ++i) p_.mean.push_back(!weight_reductions_.count(static_cast<int>(i)));
        initial_scales();
    }

    // Kaiming-like start for any number of weights: out sums x * w_0 * ... * w_{m-1} over the summed (not
    // averaged) reduction domains, of total size R; unit gain asks prod_k Var(w_k) = 2 / R. Each weight
    // takes the m-th root: Var(w_k) = (2 / R)^(1/m), reported as fan_in = 2 / Var. One conv: fan_in = C_in k^2.
    void initial_scales() {
        if (p_.weights.empty()) return;
        double summed = 1;
        for (size_t i = 0; i < p_.reduction_sizes.size(); ++i)
            if (!p_.mean[i]) summed *= static_cast<double>(p_.reduction_sizes[i]);
        double m = static_cast<double>(p_.weights.size());
        double variance = std::pow(2.0 / summed, 1.0 / m);
        for (auto& w : p_.weights) w.fan_in = 2.0 / variance;
    }

    const Space& space_;
    const NodeState& node_;
    int v_;
    std::vector<const Step*> path_;
    std::map<const Dim*, int> reduction_ordinal_;
    // Coordinate ids: the dims by id (with each id's size, computed once: numel asks for it at every step)
    static constexpr int64_t kUnsized = -1;
    std::vector<const Dim*> dims_;
    std::vector<int64_t> sizes_;
    std::set<int> weight_reductions_;
    std::vector<uint64_t> weight_groups_;  // the weights' contraction groups, in forward order
    std::vector<int> t_;
    Program p_;
};

}  // namespace

const char* step_op_name(StepOp op) {
    switch (op) {
        case StepOp::Split: return "split";
        case StepOp::Merge: return "merge";
        case StepOp::Shift: return "shift";
        case StepOp::Stride: return "stride";
        case StepOp::Unfold: return "unfold";
        case StepOp::Expand: return "expand";
        case StepOp::Reduce: return "reduce";
        case StepOp::Contract: return "contract";
    }
    return "unknown";  // not a StepOp (a corrupted value): the callers' internal errors name it so
}

Program lower(const Space& space, const NodeState& final_node, int valuation) {
    if (!final_node.is_final()) throw std::invalid_argument("only a final operator can be lowered");
    return Lowerer(space, final_node, valuation).run();
}

Program lower_partial(const Space& space, const NodeState& node, int valuation) {
    if (node.is_final()) throw std::invalid_argument("lower_partial takes a node that is not final");
    return Lowerer(space, node, valuation).run_partial();
}

}  // namespace syno
