// Sampling and enumeration.
// Sampling: descent i uses its own random stream derived from (mix64(seed), i) -- the seed is mixed first, since
// combine(seed, i) of small seeds is nearly a shift of i (seed 1's stream i was seed 0's stream i + 64, so two
// seeds shared operators) -- and at every node the order in which
// children are tried is drawn from (that stream, node hash) BEFORE looking at the dead-end memo, so the memo
// only skips subtrees without operators: the result of descent i never depends on other descents, on thread
// count or on scheduling. Children are tried "two-step": a primitive type uniformly, then one of its children.
// FLOPs strata (flops_bins > 0, with a finite max_flops): uniform descents pile up at the cheapest operators (74%
// under 0.1x the replaced layer in the default space), so descent i targets one of `bins` log-uniform FLOPs bins
// over [lo, max_flops] (lo = min_flops, or max_flops / kSpan without a floor; the first bin also holds what lies
// below lo), the least served bin first (ties in a seed-derived order): it accepts only operators of its bin
// and skips children whose FLOPs lower bound (flops_bound) is above the bin or whose upper bound (flops_upper)
// is below it. Dead-end memos are per
// bin; a bin whose subtree is exhausted, or that keeps missing, gets no more draws (then descents are uniform).
// Work spared, never results: within a call each node's children are generated once (ChildrenMemo), and
// descents that collection can no longer reach are skipped (Surplus). An MCTS rollout (48 descents from one node)
// ran 2 to 3 times faster for it (issue 34, item 12).
#include <algorithm>
#include <atomic>
#include <cmath>
#include <chrono>
#include <exception>
#include <mutex>
#include <system_error>
#include <thread>
#include <unordered_map>

#include "bounds.hpp"
#include "hash.hpp"
#include "hash_set.hpp"
#include "space.hpp"

namespace syno {

namespace {

struct Rng {
    uint64_t state;
    uint64_t next() { return state = mix64(state); }
    uint64_t below(uint64_t n) { return next() % n; }
};

std::vector<size_t> two_step_order(const std::vector<NodePtr>& kids, uint64_t seed) {
    std::vector<std::vector<size_t>> by_type(static_cast<int>(Prim::Count));
    for (size_t i = 0; i < kids.size(); ++i) by_type[static_cast<int>(kids[i]->step.prim)].push_back(i);
    std::vector<std::vector<size_t>*> types;
    for (auto& t : by_type)
        if (!t.empty()) types.push_back(&t);
    Rng rng{seed};
    std::vector<size_t> order;
    order.reserve(kids.size());
    while (!types.empty()) {
        size_t ti = rng.below(types.size());
        auto& bucket = *types[ti];
        size_t ci = rng.below(bucket.size());
        order.push_back(bucket[ci]);
        bucket.erase(bucket.begin() + static_cast<long>(ci));
        if (bucket.empty()) types.erase(types.begin() + static_cast<long>(ti));
    }
    return order;
}

struct Strata {
    static constexpr double kSpan = 100;  // FLOPs range stratified without a floor: [max_flops / kSpan, max_flops]
    int bins = 0;                         // 0: off (uniform descents)
    double log_lo = 0, log_hi = 0;

    Strata(const Options& o, int requested) {
        if (requested <= 0 || !std::isfinite(o.max_flops) || o.max_flops <= 0) return;
        double lo = o.min_flops > 0 ? o.min_flops : o.max_flops / kSpan;
        if (lo >= o.max_flops) return;
        bins = requested;
        log_lo = std::log(lo);
        log_hi = std::log(o.max_flops);
    }
    int of(double flops) const {
        if (flops <= 0) return 0;
        double x = (std::log(flops) - log_lo) / (log_hi - log_lo) * bins;
        return std::clamp(static_cast<int>(std::floor(x)), 0, bins - 1);
    }
    // Every operator of bin b has at least this many FLOPs.
    double lower(int b) const { return b == 0 ? 0 : std::exp(log_lo + (log_hi - log_lo) * b / bins) * (1 - 1e-9); }
    // Every operator of bin b has fewer FLOPs than this.
    double upper(int b) const {
        return b + 1 >= bins ? INFINITY : std::exp(log_lo + (log_hi - log_lo) * (b + 1) / bins) * (1 + 1e-9);
    }
};

// The children of the nodes one sample call has expanded, by node (not by hash: a node reached by another route
// has another path). Descents from one prefix pass through the same nodes again and again (3 to 6 expansions a
// node in an MCTS rollout), and children are a pure function of the node, so what a call draws is unchanged.
// Each entry holds its node, so no other node can take its address while the memo lives; the dims of the
// memoized children stay until the memo is cleared (sample() then lets its batch scope free them).
class ChildrenMemo {
public:
    Space::Children children(const Space& space, const NodePtr& node) {
        if (node->is_final() || node->depth <= Space::kCachedDepth) return space.children(node);  // the space's
        {
            std::lock_guard lock(mutex_);
            auto it = memo_.find(node.get());
            if (it != memo_.end()) return it->second.second;
        }
        auto kids = space.children(node);
        std::lock_guard lock(mutex_);
        auto [it, fresh] = memo_.try_emplace(node.get(), node, kids);
        if (fresh) held_ += kids->size() + 1;
        return it->second.second;  // (another thread's, when it came first: the same children)
    }
    size_t held() const { return held_; }  // nodes memoized (between batches: no descent runs)
    void clear() { memo_.clear(); held_ = 0; }

private:
    std::mutex mutex_;
    std::unordered_map<const NodeState*, std::pair<NodePtr, Space::Children>> memo_;
    size_t held_ = 0;
};

// Descents of a batch that come after others that already make up the call's count are never collected
// (collection goes in index order and stops at the count): they are skipped, and those under way abandoned, so
// that a rollout whose first descent finds its operator does not run the other 15 of the batch. What the call
// returns (operators, attempts, stop reason) is unchanged: only work that nothing reads is spared.
class Surplus {
public:
    Surplus(uint64_t need, uint64_t batch) : need_(need), from_(batch) {}
    // Whether descent i can no longer be collected.
    bool past(uint64_t i) const { return i >= from_.load(std::memory_order_relaxed); }
    // Descent i found `hash`, not drawn by an earlier batch.
    void found(uint64_t hash, uint64_t i) {
        std::lock_guard lock(mutex_);
        auto it = std::find_if(first_.begin(), first_.end(), [&](const auto& f) { return f.first == hash; });
        if (it == first_.end()) first_.emplace_back(hash, i);
        else it->second = std::min(it->second, i);  // collected at its first draw
        if (first_.size() < need_) return;
        std::vector<uint64_t> at;
        for (const auto& f : first_) at.push_back(f.second);
        std::nth_element(at.begin(), at.begin() + static_cast<long>(need_ - 1), at.end());
        from_.store(std::min(from_.load(), at[need_ - 1] + 1));  // the count is met at that descent
    }

private:
    const uint64_t need_;
    std::atomic<uint64_t> from_;
    std::mutex mutex_;
    std::vector<std::pair<uint64_t, uint64_t>> first_;  // distinct new operators: (hash, first descent)
};

struct Deadline {
    std::chrono::steady_clock::time_point at;
    bool enabled;
    std::atomic<bool>* hit;
    bool passed() const {
        if (!enabled) return false;
        if (hit->load(std::memory_order_relaxed)) return true;
        if (std::chrono::steady_clock::now() < at) return false;
        hit->store(true);
        return true;
    }
};

// One descent: depth-first with backtracking, at most `budget` expansions. Dead ends found by this descent
// go to its own memo; the call's memo is only read here and is merged between batches, so a descent's
// result depends on (seed, index, earlier batches of the same call), never on threads, scheduling, or
// anything sampled before in the same space.
struct Descent {
    const Space& space;
    ChildrenMemo& memo;
    const DeadSet& call_dead;
    uint64_t stream;
    const Deadline& deadline;
    const Surplus& surplus;
    uint64_t index;  // in its batch
    uint64_t budget;
    const Strata& strata;
    int target;  // the FLOPs bin this descent draws from, or -1 (strata off)
    HashSet dead;
    uint64_t expansions = 0;
    bool gave_up = false;

    bool is_dead(uint64_t h) const { return dead.contains(h) || call_dead.contains(h); }
    // Proven: no operator below is in the bin (flops_bound is a lower bound, flops_upper an upper bound).
    bool outside_bin(const NodeState& n) const {
        if (target < 0) return false;
        if (n.is_final()) return strata.of(n.final_info->flops) != target;
        return n.flops_bound > strata.upper(target) || (target > 0 && flops_upper(space, n) < strata.lower(target));
    }
    // Likely: the operators below (past the reduction stage) are too cheap for the bin if no STRIDE grows the
    // data and each remaining contraction costs about 2 x the frontier's elements. A guide, not a proof: a
    // subtree skipped on it is not memoized as dead.
    bool likely_below_bin(const NodeState& n) const {
        if (target <= 0 || n.is_final() || n.reducing) return false;
        const Options& o = space.options;
        double estimate = n.flops_bound;
        int left = std::max(0, o.max_weights - n.contractions);
        for (size_t v = 0; v < space.ctx.valuations.size(); ++v) {
            double numel = 1;
            for (const Dim* d : n.frontier)
                if (!d->is(DimKind::ShareR)) numel *= space.ctx.approx(d->size, static_cast<int>(v));
            for (int i : space.fixed_inputs) numel *= space.ctx.approx(space.input[i].size, static_cast<int>(v));
            estimate += 2.0 * left * numel;
        }
        return estimate < strata.lower(target);
    }

    // `proven`: the subtree holds no operator of the bin (then it is memoized as dead).
    NodePtr run(const NodePtr& node, bool& proven) {
        proven = false;
        if (node->is_final()) {
            proven = outside_bin(*node);
            return proven ? nullptr : node;
        }
        if (is_dead(node->hash)) return proven = true, nullptr;
        if (++expansions > budget || surplus.past(index)) { gave_up = true; return nullptr; }
        auto children = memo.children(space, node);
        const auto& kids = *children;
        bool all_proven = true;
        for (size_t i : two_step_order(kids, combine(stream, node->hash))) {
            if (!kids[i]->is_final() && is_dead(kids[i]->hash)) continue;
            if (outside_bin(*kids[i])) continue;
            if (likely_below_bin(*kids[i])) { all_proven = false; continue; }
            bool empty = false;
            if (auto found = run(kids[i], empty)) return found;
            if (gave_up || deadline.passed()) return nullptr;  // abandoned, not dead: nothing is memoized
            all_proven = all_proven && empty;
        }
        if (all_proven) dead.insert(node->hash);
        proven = all_proven;
        return nullptr;
    }
    NodePtr run(const NodePtr& node) {
        bool proven = false;
        return run(node, proven);
    }
};

// Runs `work` on `threads` threads (this one included). A thread that cannot start (the system's limit) is an
// error saying so, after the started ones are joined: never std::terminate from a joinable std::thread.
template <typename Work>
void run_pool(Work& work, uint64_t threads) {
    std::vector<std::thread> pool;
    std::system_error start_failure(std::error_code{}, "");
    bool failed = false;
    for (uint64_t t = 1; t < threads; ++t) {
        try {
            pool.emplace_back(work);
        } catch (const std::system_error& e) {
            start_failure = std::system_error(e.code(), "could not start sampling thread " + std::to_string(t + 1) +
                                                            " of " + std::to_string(threads) + " (lower `threads`)");
            failed = true;
            break;
        }
    }
    work();
    for (auto& t : pool) t.join();
    if (failed) throw start_failure;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

SampleResult sample(const Space& space, const NodePtr& prefix, int count, uint64_t seed, int threads,
                    uint64_t max_attempts, double time_limit, uint64_t budget, int flops_bins) {
    auto t0 = std::chrono::steady_clock::now();
    SampleResult result;
    threads = std::max(1, threads);
    // The call is one walk; each batch is a DimScope: once its operators are pinned, the coordinates its
    // descents made are freed (memory stays bounded by a batch, not by the call).
    DimStore::Walk walk(space.store);
    DimScope call_scope(space.store, 1);  // what the last rounds left (fewer than the cycle's threshold)
    DimScope batches(space.store);
    ChildrenMemo memo;  // (declared after the scopes: cleared before they close, on every way out)
    HashSet seen;
    const Strata strata(space.options, flops_bins);
    // Dead-end memos: one per FLOPs bin, and one for uniform descents (the only one when strata are off).
    const int uniform = strata.bins;
    std::vector<std::unique_ptr<DeadSet>> call_dead;
    for (int b = 0; b <= uniform; ++b) call_dead.push_back(std::make_unique<DeadSet>());
    const uint64_t offset = mix64(seed ^ 0x5354524154ULL);
    // Per bin: descents and the new operators they found. A bin found far less often than the best one (its
    // operators are rare, or out of reach within `budget`) is starved: it gets no more draws.
    constexpr uint64_t kTrial = 64, kStarvedRatio = 8;
    constexpr size_t kMemoCap = 1 << 14;  // nodes (about 40 MB): an MCTS rollout holds up to about 10,000
    std::vector<uint64_t> hits(strata.bins, 0), tries(strata.bins, 0);
    const uint64_t batch = 16;  // fixed: results must not depend on the thread count
    uint64_t next_index = 0;
    std::atomic<bool> timed_out{false};
    Deadline deadline{t0 + std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(time_limit)),
                      time_limit > 0, &timed_out};
    while (true) {
        if (static_cast<int>(result.operators.size()) >= count) { result.stop_reason = "count"; break; }
        // Targets of this batch (decided between batches: deterministic): the bins with operators left below the
        // prefix and not starved, the least served first; uniform descents once none is left.
        std::vector<int> targets;
        bool exhausted = call_dead[uniform]->contains(prefix->hash);
        // Rates are (hits + 1) / (tries + 1): a bin is not judged on its first misses.
        auto faster = [&](int x, int y) { return (hits[x] + 1) * (tries[y] + 1) > (hits[y] + 1) * (tries[x] + 1); };
        int best = 0;  // the bin found most often per descent
        for (int b = 1; b < strata.bins; ++b)
            if (faster(b, best)) best = b;
        for (int b = 0; b < strata.bins; ++b) {
            bool starved = tries[b] >= kTrial &&
                           (hits[b] + 1) * kStarvedRatio * (tries[best] + 1) < (hits[best] + 1) * (tries[b] + 1);
            if (!call_dead[b]->contains(prefix->hash) && !starved) targets.push_back(b);
        }
        bool all_bins_dead = strata.bins > 0;
        for (int b = 0; b < strata.bins; ++b) all_bins_dead = all_bins_dead && call_dead[b]->contains(prefix->hash);
        if (exhausted || all_bins_dead) { result.stop_reason = "exhausted"; break; }
        std::sort(targets.begin(), targets.end(), [&](int x, int y) {
            uint64_t kx = (x + offset) % strata.bins, ky = (y + offset) % strata.bins;
            return hits[x] != hits[y] ? hits[x] < hits[y] : kx < ky;
        });
        if (targets.empty()) targets.push_back(uniform);
        if (next_index >= max_attempts) { result.stop_reason = "attempts"; break; }
        if (timed_out.load() || (time_limit > 0 && seconds_since(t0) > time_limit)) { result.stop_reason = "time"; break; }
        uint64_t n = std::min(batch, max_attempts - next_index);
        std::vector<NodePtr> found(n);
        std::vector<HashSet> dead(n);
        std::vector<int> bins(n);
        for (uint64_t i = 0; i < n; ++i) bins[i] = targets[i % targets.size()];
        std::atomic<uint64_t> cursor{0};
        Surplus surplus(static_cast<uint64_t>(count) - result.operators.size(), n);
        std::exception_ptr failure;  // an exception escaping a thread would terminate the interpreter
        std::mutex failure_mutex;
        auto work = [&] {
            try {
                DimStore::Walk joined(space.store, walk.id());
                for (uint64_t i; (i = cursor.fetch_add(1)) < n;) {
                    if (surplus.past(i)) continue;
                    int bin = bins[i];
                    Descent d{space,   memo, *call_dead[bin], combine(mix64(seed), next_index + i), deadline,
                              surplus, i,    budget,          strata, bin == uniform ? -1 : bin,         {}};
                    found[i] = d.run(prefix);
                    dead[i] = std::move(d.dead);
                    if (found[i] && !seen.contains(found[i]->hash)) surplus.found(found[i]->hash, i);
                }
            } catch (...) {
                std::lock_guard lock(failure_mutex);
                if (!failure) failure = std::current_exception();
                cursor.store(n);  // the others stop too
            }
        };
        run_pool(work, std::min<uint64_t>(static_cast<uint64_t>(threads), n));
        if (failure) std::rethrow_exception(failure);
        for (uint64_t i = 0; i < n; ++i) dead[i].for_each([&](uint64_t h) { call_dead[bins[i]]->insert(h); });
        // Collect in index order: deterministic whatever the thread count.
        for (uint64_t i = 0; i < n && static_cast<int>(result.operators.size()) < count; ++i) {
            ++result.attempts;
            bool fresh = found[i] && seen.insert(found[i]->hash);
            if (bins[i] != uniform) ++tries[bins[i]], hits[bins[i]] += fresh;
            if (fresh) {
                pin_node(*found[i]);
                result.operators.push_back(found[i]);
            } else {
                ++result.failed;
            }
        }
        found.clear();  // the rest refer to dims the scope frees
        // The memo keeps its nodes' dims: they are freed when it holds too many (memory bounded by the cap's
        // worth of nodes, as before by a batch's) and at the end of the call.
        if (memo.held() > kMemoCap) {
            memo.clear();
            batches.cycle();
        }
        next_index += n;
    }
    memo.clear();
    batches.close();
    call_scope.close();
    result.seconds = seconds_since(t0);
    return result;
}

EnumerateResult enumerate(const Space& space, const NodePtr& from, int max_depth, uint64_t max_nodes, double time_limit,
                          uint64_t max_operators) {
    auto t0 = std::chrono::steady_clock::now();
    EnumerateResult r;
    r.stop_reason = "exhausted";
    // Depth-first; every expanded node opens a DimScope that closes when the stack is back to where it was
    // (its subtree is done): the coordinates made below it are freed then, except those of kept operators
    // and cached children (pinned). Memory is bounded by the path, the stack and the hash sets.
    DimStore::Walk walk(space.store);
    struct Open {
        size_t stack_size;
        std::unique_ptr<DimScope> scope;
    };
    DimScope call_scope(space.store, 1);  // whatever the skipped (small) subtree scopes left
    std::vector<Open> scopes;
    HashSet visited, operators;
    std::vector<NodePtr> stack{from};
    visited.insert(from->hash);
    uint64_t expanded = 0;
    auto close_done = [&] {
        while (!scopes.empty() && scopes.back().stack_size >= stack.size()) scopes.pop_back();
    };
    while (!stack.empty()) {
        close_done();
        NodePtr node = std::move(stack.back());
        stack.pop_back();
        size_t depth = static_cast<size_t>(node->depth);
        if (r.nodes_per_depth.size() <= depth) r.nodes_per_depth.resize(depth + 1), r.finals_per_depth.resize(depth + 1);
        if (node->is_final()) {
            ++r.finals_per_depth[depth];
            if (operators.insert(node->hash)) {
                ++r.operator_count;
                r.operator_hashes.push_back(node->hash);
                if (r.operators.size() < max_operators) {
                    pin_node(*node);
                    r.operators.push_back(node);
                }
            }
            continue;
        }
        ++r.nodes_per_depth[depth];
        if (++expanded > max_nodes) { r.stop_reason = "limit"; break; }
        if ((expanded & 255) == 0 && time_limit > 0 && seconds_since(t0) > time_limit) { r.stop_reason = "time"; break; }
        scopes.push_back({stack.size(), std::make_unique<DimScope>(space.store)});
        auto children = space.children(node);
        const auto& kids = *children;
        for (auto it = kids.rbegin(); it != kids.rend(); ++it) {
            const NodePtr& k = *it;
            if (!k->is_final() && k->depth > max_depth) continue;
            if (visited.insert(k->hash)) stack.push_back(k);
        }
    }
    stack.clear();  // before the scopes close: nothing may refer to what they free
    while (!scopes.empty()) scopes.pop_back();
    call_scope.close();
    r.seconds = seconds_since(t0);
    return r;
}

}  // namespace syno
