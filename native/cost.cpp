#include "cost.hpp"

#include <algorithm>
#include <stdexcept>

#include "int_set.hpp"
#include "lower.hpp"
#include "plan.hpp"

namespace syno {

namespace {

// T as the PyTorch generator holds it: logical dims, the virtual (broadcast, not stored) ones, and whether the
// stored tensor is known to be contiguous (a reshape of a non-contiguous tensor copies).
class Walker {
public:
    // bound: count only from steps[from] on, and only what does not depend on T's layout (plan_cost_bound).
    Walker(const Program& p, size_t from, bool bound)
        : p_(p), dims_(p.input.dims), layout_(p.input.dims), from_(from), bound_(bound) {
        // the sizes by id, read at every step (ids are 0, 1, ...: a map lookup each time cost more than the walk)
        if (!p.sizes.empty() && p.sizes.begin()->first >= 0 && p.sizes.rbegin()->first < kDenseIds) {
            sizes_.assign(static_cast<size_t>(p.sizes.rbegin()->first) + 1, kUnknown);
            for (auto [d, n] : p.sizes) sizes_[static_cast<size_t>(d)] = static_cast<double>(n);
        }
        cost_.peak = numel(phys());
    }

    Cost run() {
        const auto& steps = p_.steps;
        for (size_t i = 0; i < steps.size(); ++i) {
            counting_ = i >= from_;
            if (counting_ && i + 2 < steps.size() && steps[i].op == StepOp::Unfold &&
                steps[i + 1].op == StepOp::Unfold && steps[i + 2].op == StepOp::Contract &&
                conv({&steps[i], &steps[i + 1]}, steps[i + 2])) {
                i += 2;
                continue;
            }
            if (counting_ && i + 1 < steps.size() && steps[i].op == StepOp::Unfold &&
                steps[i + 1].op == StepOp::Contract && conv({&steps[i]}, steps[i + 1])) {
                i += 1;
                continue;
            }
            first_ = bound_ && i == from_;
            if (counting_ && i + 1 < steps.size() && steps[i].op == StepOp::Shift &&
                steps[i + 1].op == StepOp::Stride && steps[i + 1].src[0] == steps[i].dst[0] &&
                !virtual_.count(steps[i].src[0])) {
                rename(steps[i].src[0], steps[i].dst[0]);  // roll + stride = one offset slice (a view)
                contiguous_ = false;
                rename(steps[i + 1].src[0], steps[i + 1].dst[0]);
                ++i;
                continue;
            }
            step(steps[i]);
        }
        // the output: broadcast dims stored and T permuted to the output order (a copy when the layout differs)
        std::vector<int> out = p_.output.dims;
        counting_ = !bound_;
        if (!virtual_.empty() || layout_ != out || !contiguous_) copy(numel(out), numel(out));
        end_run(false);
        return cost_;
    }

private:
    double size(int d) const {
        if (d >= 0 && static_cast<size_t>(d) < sizes_.size() && sizes_[static_cast<size_t>(d)] != kUnknown)
            return sizes_[static_cast<size_t>(d)];
        auto it = p_.sizes.find(d);
        if (it == p_.sizes.end()) throw std::logic_error("internal error: cost of an unknown coordinate");
        return static_cast<double>(it->second);
    }
    double numel(const std::vector<int>& ds) const {
        double n = 1;
        for (int d : ds) n *= size(d);
        return n;
    }
    std::vector<int> phys() const {
        std::vector<int> out;
        for (int d : dims_)
            if (!virtual_.count(d)) out.push_back(d);
        return out;
    }
    size_t at(int d) const { return static_cast<size_t>(std::find(dims_.begin(), dims_.end(), d) - dims_.begin()); }
    void write(double elements, double read) {  // one kernel writing `elements` and reading `read`
        if (!counting_) return;
        cost_.materialized += elements;
        cost_.read += read;
        cost_.kernels += 1;
        cost_.peak = std::max(cost_.peak, elements);
    }
    // A write that only materializes a view (a roll, padding, windows, a permute): a compiler fuses the copies of
    // one run of views into the kernel that writes the largest of them (end_run).
    void copy(double elements, double read) {
        if (!counting_) return;
        write(elements, read);
        cost_.copied += elements;
        cost_.copy_read += read;
        cost_.copy_kernels += 1;
        run_max_ = std::max(run_max_, elements);
        run_copies_ = true;
    }
    // The run of views ends at a consumer: a reduction reads it through the views (nothing written); anything
    // else reads the run's one fused copy.
    void gradient(double elements) {  // a weight's gradient: written by a training step only
        if (!counting_) return;
        write(elements, 0);
        cost_.gradients += elements;
        cost_.gradient_kernels += 1;
    }
    void end_run(bool into_reduction) {
        if (run_copies_ && !into_reduction) {
            cost_.fused_copied += run_max_;
            cost_.fused_copy_kernels += 1;
        }
        run_max_ = 0;
        run_copies_ = false;
    }
    void compute(double flops) {
        if (counting_) cost_.flops += flops;
    }
    // A copy made because of T's memory layout (a permute, or a non-contiguous operand): not in a bound.
    void relayout(double elements) {
        if (!bound_) copy(elements, elements);
    }
    // A copy: the stored tensor is now contiguous in T's (logical) order.
    void copied() {
        contiguous_ = true;
        layout_ = phys();
    }
    void rename(int from, int to) {
        dims_[at(from)] = to;
        std::replace(layout_.begin(), layout_.end(), from, to);
        if (virtual_.erase(from)) virtual_.insert(to);
    }
    void store(const std::vector<int>& ds) {  // unsqueeze + expand: a view, not contiguous any more
        for (int d : ds)
            if (virtual_.erase(d)) contiguous_ = false;
    }

    void step(const ProgramStep& s) {
        if (s.op == StepOp::Split) {
            size_t i = at(s.src[0]);
            bool v = virtual_.erase(s.src[0]) > 0;
            dims_[i] = s.dst[0];
            dims_.insert(dims_.begin() + static_cast<long>(i) + 1, s.dst[1]);
            if (v) virtual_.insert(s.dst.begin(), s.dst.end());
            auto l = std::find(layout_.begin(), layout_.end(), s.src[0]);
            if (l != layout_.end()) {
                *l = s.dst[0];
                layout_.insert(l + 1, s.dst[1]);
            }
        } else if (s.op == StepOp::Merge) {
            int a = s.src[0], b = s.src[1];
            bool both_virtual = virtual_.count(a) && virtual_.count(b);
            bool copy = false;
            if (!both_virtual) {
                store({a, b});
                auto ia = std::find(layout_.begin(), layout_.end(), a), ib = std::find(layout_.begin(), layout_.end(), b);
                copy = ia == layout_.end() || ib != ia + 1 || !contiguous_;  // flatten of a non-adjacent pair copies
                if (copy) relayout(numel(phys()));
            }
            virtual_.erase(a);
            virtual_.erase(b);
            dims_.erase(dims_.begin() + static_cast<long>(at(b)));
            dims_[at(a)] = s.dst[0];
            if (both_virtual) virtual_.insert(s.dst[0]);
            if (copy) {
                copied();
            } else if (!both_virtual) {
                layout_.erase(std::find(layout_.begin(), layout_.end(), b));
                std::replace(layout_.begin(), layout_.end(), a, s.dst[0]);
            }
        } else if (s.op == StepOp::Shift) {
            bool roll = !virtual_.count(s.src[0]);
            if (roll) copy(numel(phys()), numel(phys()));  // torch.roll copies T
            rename(s.src[0], s.dst[0]);
            if (roll) copied();
        } else if (s.op == StepOp::Stride) {
            if (!virtual_.count(s.src[0]) && s.stride != 1) contiguous_ = false;
            rename(s.src[0], s.dst[0]);
        } else if (s.op == StepOp::Unfold) {
            store({s.src[0]});
            double before = numel(phys());
            copy(before / size(s.src[0]) * (size(s.src[0]) + static_cast<double>(s.window) - 1), before);  // F.pad
            size_t i = at(s.src[0]);
            dims_[i] = s.dst[0];
            dims_.insert(dims_.begin() + static_cast<long>(i) + 1, s.dst[1]);
            copy(numel(phys()), numel(phys()));  // the window view is copied by whatever reads it next
            copied();
        } else if (s.op == StepOp::Expand) {
            dims_.push_back(s.dst[0]);
            virtual_.insert(s.dst[0]);
        } else if (s.op == StepOp::Reduce) {
            int d = s.src[0];
            end_run(true);
            if (!virtual_.count(d)) {
                std::vector<int> ph = phys();
                compute(numel(ph));
                write(numel(ph) / size(d), numel(ph));
            }
            bool stored = !virtual_.erase(d);
            dims_.erase(dims_.begin() + static_cast<long>(at(d)));
            if (stored) copied();
        } else if (s.op == StepOp::Contract) {
            contract(s);
        } else {
            throw std::logic_error(std::string("internal error: unknown step '") + step_op_name(s.op) +
                                   "' in the cost model");
        }
    }

    // What the weight the contraction reads costs, every training step: the parameter's gradient; its views
    // (the planner's, plan.hpp) as the generator emits them: a roll copies (unless fused with the stride that
    // follows it), an unfold writes its padding and windows, a merge of coordinates not adjacent is a copy
    // (layout: not in a bound), a product with another weight (plan.hpp point 3) computes and writes its result;
    // after a roll, an unfold or a product the viewed weight's gradient is a tensor of its own.
    // The counted terms depend on the weight's dims as a set (a partial node's weight order may differ).
    void weight_cost(const ProgramTensor& w) {
        double outer_max = run_max_;  // the weight's views are a run of their own
        bool outer_copies = run_copies_;
        run_max_ = 0;
        run_copies_ = false;
        weight_views_cost(w);
        end_run(false);
        run_max_ = outer_max;
        run_copies_ = outer_copies;
    }
    void weight_views_cost(const ProgramTensor& w) {
        gradient(numel(w.dims));  // the parameter's gradient
        std::vector<int> dims = w.dims;
        bool copied = false;
        for (size_t i = 0; i < w.views.size(); ++i) {
            const ProgramStep& v = w.views[i];
            bool fused = v.op == StepOp::Shift && i + 1 < w.views.size() && w.views[i + 1].op == StepOp::Stride &&
                         w.views[i + 1].src[0] == v.dst[0] && w.views[i + 1].stride >= 2;
            if (v.op == StepOp::Shift && !fused) copy(numel(dims), numel(dims)), copied = true;
            if (v.op == StepOp::Unfold) {
                copy(numel(dims) / size(v.src[0]) * (size(v.src[0]) + static_cast<double>(v.window) - 1), numel(dims));
                copied = true;
            }
            if (v.op == StepOp::Merge) {
                auto a = std::find(dims.begin(), dims.end(), v.src[0]), b = std::find(dims.begin(), dims.end(), v.src[1]);
                if (b != a + 1) relayout(numel(dims));
            }
            if (v.op == StepOp::Contract) {  // the product with another weight (plan.hpp point 3), its gradient after
                const ProgramTensor& other = p_.weights[static_cast<size_t>(v.weight)];
                weight_cost(other);
                std::vector<int> od = viewed_dims(other), mine = dims;
                for (auto [from, to] : v.rename) std::replace(mine.begin(), mine.end(), from, to);
                IntSet letters(mine.begin(), mine.end());
                letters.insert(od.begin(), od.end());
                double l = 1;
                for (int d : letters) l *= size(d);
                compute(2 * l);  // the §2 rule (>= both weights' elements: bounds.cpp's EXPAND case)
                write(numel(v.out), numel(mine) + numel(od));
                copied = true;
            }
            apply_view(dims, v);
            if (v.op == StepOp::Unfold) copy(numel(dims), numel(dims));
        }
        if (copied) gradient(numel(dims));
        // a strided weight's gradient is scattered into a zero-filled tensor of the parameter's size (so a weight
        // still writes at least twice its elements, which bounds.cpp's EXPAND case relies on)
        for (const ProgramStep& v : w.views)
            if (v.op == StepOp::Stride) {
                gradient(numel(w.dims));
                break;
            }
    }

    // T's stored dims x weight -> out (T's virtual dims the weight provides are left out; those it does not
    // provide stay virtual). One bmm: T copied to a contiguous operand unless it is one, the result written.
    void contract(const ProgramStep& s) {
        for (auto [from, to] : s.rename) rename(from, to);
        const ProgramTensor& weight = p_.weights[static_cast<size_t>(s.weight)];
        const std::vector<int> w = viewed_dims(weight);
        weight_cost(weight);
        IntSet wset(w.begin(), w.end()), oset(s.out.begin(), s.out.end());
        std::vector<int> tphys = phys();
        IntSet letters(tphys.begin(), tphys.end());
        letters.insert(w.begin(), w.end());
        IntSet still_virtual;
        for (int d : s.out)
            if (virtual_.count(d) && !wset.count(d)) still_virtual.insert(d);
        for (int d : s.out)
            if (!still_virtual.count(d)) letters.insert(d);
        bool summed = false;
        for (int d : tphys) summed |= wset.count(d) && !oset.count(d);
        double l = 1;
        for (int d : letters) l *= size(d);
        compute(summed ? 2 * l : l);
        std::vector<int> out_phys;
        for (int d : s.out)
            if (!still_virtual.count(d)) out_phys.push_back(d);
        // the generator's bmm operand: T's dims as (B, M, K) or (B, K, M) in its stored order when they are,
        // else permuted (B, M in the output's order); a copy unless T is stored contiguously in that order
        std::vector<int> b, m, k, n;
        for (int d : tphys) {
            if (wset.count(d) && oset.count(d)) b.push_back(d);
            else if (oset.count(d)) m.push_back(d);
            else if (wset.count(d)) k.push_back(d);
        }
        auto cat = [](std::vector<int> x, const std::vector<int>& y) { x.insert(x.end(), y.begin(), y.end()); return x; };
        bool as_is = tphys == cat(cat(b, m), k) || tphys == cat(cat(b, k), m);
        if (!as_is) {
            b.clear(), m.clear();
            for (int d : out_phys)
                if (std::find(tphys.begin(), tphys.end(), d) != tphys.end()) (wset.count(d) ? b : m).push_back(d);
        }
        for (int d : out_phys)
            if (wset.count(d) && std::find(tphys.begin(), tphys.end(), d) == tphys.end()) n.push_back(d);
        if (summed && !(as_is && contiguous_ && layout_ == tphys)) relayout(numel(tphys));
        if (summed) {
            end_run(false);
            write(numel(out_phys), numel(tphys) / conv_read_divisor(tphys, wset, oset) + numel(w));
        } else {  // a broadcast product, elementwise: a compiler fuses it with the run's views around it
            copy(numel(out_phys), numel(tphys) + numel(w));
        }
        dims_ = s.out;
        virtual_ = still_virtual;
        contiguous_ = true;
        if (!summed) layout_ = out_phys;  // the broadcast product is laid out in the output's order
        else if (cat(cat(b, n), m) == out_phys && cat(cat(b, m), n) != out_phys) layout_ = cat(cat(b, n), m);
        else layout_ = cat(cat(b, m), n);
    }

    // What a bound's first contraction reads less of T than it would if it were a convolution: unfolds of the
    // completion (or of the path) right before it may make it one, which reads T before them. Their windows are
    // at most two of T's summed letters, each of an odd size (space.cpp refuses even windows): the two largest such.
    double conv_read_divisor(const std::vector<int>& tphys, const IntSet& wset, const IntSet& oset) const {
        if (!first_) return 1;
        std::vector<double> ks;
        for (int d : tphys)
            if (wset.count(d) && !oset.count(d) && static_cast<long long>(size(d)) % 2 == 1) ks.push_back(size(d));
        std::sort(ks.rbegin(), ks.rend());
        double k = 1;
        for (size_t j = 0; j < ks.size() && j < 2; ++j) k *= ks[j];
        return k;
    }

    // unfold (unfold), contract summing every window against the weight and keeping every main dim: one conv1d
    // (conv2d) on T before the unfolds (codegen/torch_contract.py emit_conv), no im2col copy.
    bool conv(const std::vector<const ProgramStep*>& us, const ProgramStep& c) {
        IntSet srcs;
        for (const ProgramStep* u : us) {
            int s = u->src[0];
            if (srcs.count(s) || virtual_.count(s)) return false;
            for (int f : p_.free_dims)
                if (f == s) return false;
            srcs.insert(s);
        }
        auto r = [&](int d) {
            for (auto [from, to] : c.rename)
                if (from == d) return to;
            return d;
        };
        const ProgramTensor& weight = p_.weights[static_cast<size_t>(c.weight)];
        const std::vector<int> w = viewed_dims(weight);
        IntSet wset(w.begin(), w.end()), oset(c.out.begin(), c.out.end());
        IntSet windows, mains;
        for (const ProgramStep* u : us) {
            int m = r(u->dst[0]), win = r(u->dst[1]);
            if (!oset.count(m) || wset.count(m) || !wset.count(win) || oset.count(win)) return false;
            windows.insert(win);
            mains.insert(m);
        }
        IntSet tset;
        for (int d : phys())
            if (!srcs.count(d)) {
                int x = r(d);
                if (!wset.count(x) && !oset.count(x)) return false;
                tset.insert(x);
            }
        for (int d : w)
            if (!tset.count(d) && !oset.count(d) && !windows.count(d)) return false;
        if (!virtual_.empty()) {  // the generator keeps broadcast dims out of the conv only when unused by it
            for (int d : dims_)
                if (virtual_.count(d) && (wset.count(r(d)) || !oset.count(r(d)))) return false;
        }
        double letters = 1;
        IntSet all(tset);
        all.insert(w.begin(), w.end());
        all.insert(mains.begin(), mains.end());
        for (int d : c.out)
            if (!virtual_.count(d)) all.insert(d);
        for (int d : all) letters *= size(d);
        compute(2 * letters);
        weight_cost(weight);
        // the conv's input: T permuted to (M, B, K, spatial in T's order); its output (M, B, N, mains)
        std::vector<int> pre = phys(), mm, bb, kk, nn, sp;
        for (int d : pre) {
            if (srcs.count(d)) { sp.push_back(d); continue; }
            int x = r(d);
            if (wset.count(x) && oset.count(x)) bb.push_back(d);
            else if (oset.count(x)) mm.push_back(d);
            else kk.push_back(d);
        }
        std::vector<int> order = mm;
        order.insert(order.end(), bb.begin(), bb.end());
        order.insert(order.end(), kk.begin(), kk.end());
        order.insert(order.end(), sp.begin(), sp.end());
        if (!contiguous_ || layout_ != order) relayout(numel(pre));
        end_run(false);
        std::vector<int> out_phys;
        IntSet still_virtual;
        for (int d : dims_)
            if (virtual_.count(d)) still_virtual.insert(r(d));
        for (int d : c.out)
            if (!still_virtual.count(d)) out_phys.push_back(d);
        write(numel(out_phys), numel(pre) + numel(w));
        std::vector<int> res;
        for (int d : mm) res.push_back(r(d));
        for (int d : bb) res.push_back(r(d));
        for (int d : c.out)
            if (wset.count(d) && !tset.count(d) && !windows.count(d) && !still_virtual.count(d)) res.push_back(d);
        for (int d : sp)
            for (const ProgramStep* u : us)
                if (u->src[0] == d) res.push_back(r(u->dst[0]));
        dims_ = c.out;
        virtual_ = still_virtual;
        contiguous_ = true;
        layout_ = res;
        return true;
    }

    static constexpr int kDenseIds = 1 << 12;
    static constexpr double kUnknown = -1;
    const Program& p_;
    std::vector<double> sizes_;  // p_.sizes by id (kUnknown: none); empty when the ids are not small
    std::vector<int> dims_;
    IntSet virtual_;
    std::vector<int> layout_;  // stored dims in memory order (meaningful while contiguous_)
    bool contiguous_ = true;
    size_t from_;
    bool bound_;
    bool counting_ = true;
    Cost cost_;
    double run_max_ = 0;       // the largest copy of the current run of views
    bool first_ = false;       // at a bound's first step (from)
    bool run_copies_ = false;  // whether it has one
};

}  // namespace

Cost plan_cost(const Program& program) { return Walker(program, 0, false).run(); }

Cost plan_cost_bound(const Program& program, size_t from) { return Walker(program, from, true).run(); }

}  // namespace syno
