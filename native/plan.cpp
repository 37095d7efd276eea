#include "plan.hpp"

#include <algorithm>
#include <stdexcept>

#include "int_set.hpp"
#include "lower.hpp"

namespace syno {

namespace {

int priority(StepOp op) {
    if (op == StepOp::Stride) return 0;  // selections first: every later copy is smaller
    if (op == StepOp::Split) return 1;
    if (op == StepOp::Merge) return 2;
    if (op == StepOp::Expand) return 3;
    if (op == StepOp::Shift) return 4;   // a roll copies T: after the selections (and right before a dependent stride)
    return 5;                            // unfold: expands T; last, next to the contraction that may make it a conv
}

bool is_barrier(const ProgramStep& s) { return s.op == StepOp::Reduce || s.op == StepOp::Contract; }

// A stable list schedule of steps[begin, end) (view steps only): repeatedly the ready step of lowest priority,
// earliest first. A step is ready once every step producing one of its source dims is scheduled.
void schedule(std::vector<ProgramStep>& steps, size_t begin, size_t end) {
    std::vector<ProgramStep> run(steps.begin() + static_cast<long>(begin), steps.begin() + static_cast<long>(end));
    size_t n = run.size();
    std::vector<std::vector<size_t>> needs(n);
    for (size_t j = 0; j < n; ++j)
        for (size_t i = 0; i < j; ++i)
            for (int d : run[j].src)
                if (std::find(run[i].dst.begin(), run[i].dst.end(), d) != run[i].dst.end()) needs[j].push_back(i);
    std::vector<bool> done(n, false);
    for (size_t k = 0; k < n; ++k) {
        size_t best = n;
        for (size_t j = 0; j < n; ++j) {
            if (done[j]) continue;
            bool ready = std::all_of(needs[j].begin(), needs[j].end(), [&](size_t i) { return done[i]; });
            if (ready && (best == n || priority(run[j].op) < priority(run[best].op))) best = j;
        }
        done[best] = true;
        steps[begin + k] = run[best];
    }
}

// An unfold that the cost walker and the generators fuse with its neighbours into one convolution
// (unfold, unfold, contract): left on T.
bool in_conv_pattern(const std::vector<ProgramStep>& steps, size_t j) {
    auto is = [&](size_t i, StepOp op) { return i < steps.size() && steps[i].op == op; };
    return (is(j + 1, StepOp::Unfold) && is(j + 2, StepOp::Contract)) ||
           (j > 0 && is(j - 1, StepOp::Unfold) && is(j + 1, StepOp::Contract));
}

// Point 2 of plan.hpp: the views of the run after each contraction that act on weight-only coordinates alone
// are moved onto the weight (in their order), and the contraction's `out` takes their results in place.
void move_weight_views(Program& p) {
    auto& steps = p.steps;
    std::vector<int> t = p.input.dims;
    for (size_t i = 0; i < steps.size(); ++i) {
        if (steps[i].op != StepOp::Contract) {
            apply_view(t, steps[i]);
            continue;
        }
        for (auto [from, to] : steps[i].rename) std::replace(t.begin(), t.end(), from, to);
        ProgramTensor& w = p.weights[static_cast<size_t>(steps[i].weight)];
        IntSet only;  // coordinates of the product that come from w alone
        for (int d : viewed_dims(w))
            if (std::find(t.begin(), t.end(), d) == t.end()) only.insert(d);
        size_t j = i + 1;
        while (j < steps.size() && steps[j].op != StepOp::Contract && steps[j].op != StepOp::Reduce) {
            const ProgramStep v = steps[j];
            bool movable = v.op != StepOp::Expand && !v.src.empty() &&
                           !(v.op == StepOp::Unfold && in_conv_pattern(steps, j)) &&
                           std::all_of(v.src.begin(), v.src.end(), [&](int d) { return only.count(d) > 0; });
            for (int d : v.src) only.erase(d);
            if (!movable) {
                ++j;
                continue;
            }
            only.insert(v.dst.begin(), v.dst.end());
            apply_view(steps[i].out, v);
            w.views.push_back(v);
            steps.erase(steps.begin() + static_cast<long>(j));
        }
        t = steps[i].out;
    }
}

int renamed(const std::vector<std::pair<int, int>>& rename, int d) {
    for (auto [from, to] : rename)
        if (from == d) return to;
    return d;
}

double elements(const Program& p, const std::vector<int>& dims) {
    IntSet once(dims.begin(), dims.end());
    double n = 1;
    for (int d : once) n *= static_cast<double>(p.sizes.at(d));
    return n;
}

std::vector<int> joined(std::vector<int> a, const std::vector<int>& b) {
    for (int d : b)
        if (std::find(a.begin(), a.end(), d) == a.end()) a.push_back(d);
    return a;
}

// Point 3 of plan.hpp: two adjacent contractions T.w_j then .w_k become T.(w_j.w_k) when that has the smaller
// (largest intermediate, FLOPs by the §2 rule): w_j's views end with `contract w_k` (its rename: w_k's renames of
// w_j's coordinates; its out: the product's letters that T or the result needs), and one step contracts T with
// the product (T's renames composed). Repeated, so a run of contractions folds its weights from the left.
void contract_weights_first(Program& p) {
    auto& steps = p.steps;
    for (const ProgramStep& s : steps)
        if (s.op == StepOp::Expand) return;  // a broadcast T would make some letters constant factors: not handled
    std::vector<int> t = p.input.dims;
    size_t i = 0;
    while (i < steps.size()) {
        if (steps[i].op != StepOp::Contract || i + 1 >= steps.size() || steps[i + 1].op != StepOp::Contract) {
            apply_view(t, steps[i++]);
            continue;
        }
        const ProgramStep& cj = steps[i];
        const ProgramStep& ck = steps[i + 1];
        std::vector<int> tj, tt, vj, vjj;  // T after cj's renames, and after both; w_j, and renamed by ck
        for (int d : t) tj.push_back(renamed(cj.rename, d));
        for (int d : tj) tt.push_back(renamed(ck.rename, d));
        vj = viewed_dims(p.weights[static_cast<size_t>(cj.weight)]);
        for (int d : vj) vjj.push_back(renamed(ck.rename, d));
        std::vector<int> wk = viewed_dims(p.weights[static_cast<size_t>(ck.weight)]);
        std::vector<int> oj_renamed;
        for (int d : cj.out) oj_renamed.push_back(renamed(ck.rename, d));
        std::vector<int> letters = joined(vjj, wk), ow;
        for (int d : letters)
            if (std::find(tt.begin(), tt.end(), d) != tt.end() || std::find(ck.out.begin(), ck.out.end(), d) != ck.out.end())
                ow.push_back(d);
        double result = elements(p, ck.out);
        std::pair<double, double> canonical{std::max(elements(p, cj.out), result),
                                            2 * elements(p, joined(tj, vj)) + 2 * elements(p, joined(oj_renamed, wk))};
        std::pair<double, double> first{std::max(elements(p, ow), result),
                                        2 * elements(p, letters) + 2 * elements(p, joined(tt, ow))};
        if (!(first < canonical)) {
            apply_view(t, steps[i++]);
            continue;
        }
        ProgramStep view{StepOp::Contract};
        view.weight = ck.weight;
        for (auto [from, to] : ck.rename)
            if (std::find(vj.begin(), vj.end(), from) != vj.end()) view.rename.emplace_back(from, to);
        view.out = ow;
        ProgramStep both{StepOp::Contract};
        both.weight = cj.weight;
        for (auto [from, to] : cj.rename) both.rename.emplace_back(from, renamed(ck.rename, to));
        for (auto [from, to] : ck.rename)
            if (std::find(t.begin(), t.end(), from) != t.end() && std::find(tj.begin(), tj.end(), from) != tj.end())
                both.rename.emplace_back(from, to);
        both.out = ck.out;
        p.weights[static_cast<size_t>(cj.weight)].views.push_back(view);
        steps[i] = both;
        steps.erase(steps.begin() + static_cast<long>(i) + 1);
    }
}

}  // namespace

void apply_view(std::vector<int>& dims, const ProgramStep& s) {
    auto at = [&](int d) {
        auto it = std::find(dims.begin(), dims.end(), d);
        if (it == dims.end()) throw std::logic_error("internal error: a view of a coordinate the tensor lacks");
        return it;
    };
    switch (s.op) {
        case StepOp::Split:
        case StepOp::Unfold: {
            auto it = at(s.src[0]);
            *it = s.dst[0];
            dims.insert(it + 1, s.dst[1]);
            return;
        }
        case StepOp::Merge:
            dims.erase(at(s.src[1]));
            *at(s.src[0]) = s.dst[0];
            return;
        case StepOp::Shift:
        case StepOp::Stride: *at(s.src[0]) = s.dst[0]; return;
        case StepOp::Expand: dims.push_back(s.dst[0]); return;
        case StepOp::Reduce: dims.erase(at(s.src[0])); return;
        case StepOp::Contract: dims = s.out; return;
    }
    throw std::logic_error(std::string("internal error: apply_view of a '") + step_op_name(s.op) + "' step");
}

std::vector<int> viewed_dims(const ProgramTensor& weight) {
    std::vector<int> dims = weight.dims;
    for (const ProgramStep& v : weight.views) apply_view(dims, v);
    return dims;
}

void plan(Program& program) {
    auto& steps = program.steps;
    size_t begin = 0;
    for (size_t i = 0; i <= steps.size(); ++i) {
        if (i == steps.size() || is_barrier(steps[i])) {
            if (i - begin > 1) schedule(steps, begin, i);
            begin = i + 1;
        }
    }
    move_weight_views(program);
    contract_weights_first(program);
}

}  // namespace syno
