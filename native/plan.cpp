#include "plan.hpp"

#include <algorithm>
#include <set>
#include <stdexcept>

#include "lower.hpp"

namespace syno {

namespace {

int priority(const std::string& op) {
    if (op == "stride") return 0;  // selections first: every later copy is smaller
    if (op == "split") return 1;
    if (op == "merge") return 2;
    if (op == "expand") return 3;
    if (op == "shift") return 4;   // a roll copies T: after the selections (and right before a dependent stride)
    return 5;                      // unfold: expands T; last, next to the contraction that may make it a conv
}

bool is_barrier(const ProgramStep& s) { return s.op == "reduce" || s.op == "contract"; }

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
    auto op = [&](size_t i) { return i < steps.size() ? steps[i].op : std::string(); };
    return (op(j + 1) == "unfold" && op(j + 2) == "contract") || (j > 0 && op(j - 1) == "unfold" && op(j + 1) == "contract");
}

// Point 2 of plan.hpp: the views of the run after each contraction that act on weight-only coordinates alone
// are moved onto the weight (in their order), and the contraction's `out` takes their results in place.
void move_weight_views(Program& p) {
    auto& steps = p.steps;
    std::vector<int> t = p.input.dims;
    for (size_t i = 0; i < steps.size(); ++i) {
        if (steps[i].op != "contract") {
            apply_view(t, steps[i]);
            continue;
        }
        for (auto [from, to] : steps[i].rename) std::replace(t.begin(), t.end(), from, to);
        ProgramTensor& w = p.weights[static_cast<size_t>(steps[i].weight)];
        std::set<int> only;  // coordinates of the product that come from w alone
        for (int d : viewed_dims(w))
            if (std::find(t.begin(), t.end(), d) == t.end()) only.insert(d);
        size_t j = i + 1;
        while (j < steps.size() && steps[j].op != "contract" && steps[j].op != "reduce") {
            const ProgramStep v = steps[j];
            bool movable = v.op != "expand" && !v.src.empty() && !(v.op == "unfold" && in_conv_pattern(steps, j)) &&
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

}  // namespace

void apply_view(std::vector<int>& dims, const ProgramStep& s) {
    auto at = [&](int d) {
        auto it = std::find(dims.begin(), dims.end(), d);
        if (it == dims.end()) throw std::logic_error("internal error: a view of a coordinate the tensor lacks");
        return it;
    };
    if (s.op == "split" || s.op == "unfold") {
        auto it = at(s.src[0]);
        *it = s.dst[0];
        dims.insert(it + 1, s.dst[1]);
    } else if (s.op == "merge") {
        dims.erase(at(s.src[1]));
        *at(s.src[0]) = s.dst[0];
    } else if (s.op == "shift" || s.op == "stride") {
        *at(s.src[0]) = s.dst[0];
    } else if (s.op == "expand") {
        dims.push_back(s.dst[0]);
    } else if (s.op == "reduce") {
        dims.erase(at(s.src[0]));
    } else {
        throw std::logic_error("internal error: apply_view of a '" + s.op + "' step");
    }
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
}

}  // namespace syno
