#include "plan.hpp"

#include <algorithm>

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

}  // namespace

void plan(Program& program) {
    auto& steps = program.steps;
    size_t begin = 0;
    for (size_t i = 0; i <= steps.size(); ++i) {
        if (i == steps.size() || is_barrier(steps[i])) {
            if (i - begin > 1) schedule(steps, begin, i);
            begin = i + 1;
        }
    }
}

}  // namespace syno
