// C++ unit tests for the native core (run with ctest). Plain checks with messages; no framework needed.
#include <cstdio>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "bounds.hpp"
#include "hash.hpp"
#include "hash_set.hpp"
#include "lower.hpp"
#include "priors.hpp"
#include "space.hpp"

using namespace syno;

static int failures = 0;
#define CHECK(cond)                                                                        \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            std::fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
            ++failures;                                                                    \
        }                                                                                  \
    } while (0)

template <typename F>
static bool throws_spec_error_at(F f, size_t position) {
    try {
        f();
    } catch (const SpecError& e) {
        return e.position == position;
    }
    return false;
}

static Space conv_space(int depth = 6) {
    Options o;
    o.max_depth = depth;
    return Space("[N, C_in, H, W]", "[N, C_out, H, W]", {"N: 0", "C_in: 2", "C_out: 2", "H: 2", "W: 2"}, {"k=3: 2"},
                 {{{"N", 2}, {"C_in", 4}, {"C_out", 4}, {"H", 8}, {"W", 8}}}, o);
}

static void test_hash_constants() {
    // FNV-1a reference values: the tags must hash identically on every platform.
    CHECK(fnv1a("") == 0xcbf29ce484222325ULL);
    CHECK(fnv1a("a") == 0xaf63dc4c8601ec8cULL);
    CHECK(mix64(0) == 0xe220a8397b1dcdafULL);
}

static void test_sizes() {
    Space s = conv_space();
    const SizeContext& ctx = s.ctx;
    Size h = ctx.variable(ctx.index_of("H")), k = ctx.variable(ctx.index_of("k"));
    Size hk = h * k;
    CHECK(ctx.to_string(hk) == "k*H");
    CHECK(ctx.value(hk, 0).value() == 24);
    CHECK(ctx.is_legal(h / k));           // H/k: a primary keeps it legal
    CHECK(!ctx.is_legal(Size{} / k));     // 1/k: an illegal coefficient
    CHECK(!ctx.is_valid_extent(h / k));   // 8/3 is not an integer
    CHECK((hk / k) == h);
    CHECK(Size{}.is_one());
}

static void test_parsing() {
    CHECK(parse_shape("[N, C_in: unordered, s^-1*H]").size() == 3);
    CHECK(parse_shape("[N, C_in: unordered, s^-1*H]")[1].unordered);
    CHECK(throws_spec_error_at([] { parse_shape("[N, C_in, H"); }, 11));
    CHECK(throws_spec_error_at([] { parse_shape("[N, , W]"); }, 4));
    CHECK(throws_spec_error_at([] { parse_spec("k=: 2"); }, 2));
    auto spec = parse_spec("s_1=2: 2");
    CHECK(spec.name == "s_1" && spec.value == 2 && spec.max_occurrences == 2);
}

static void test_interning() {
    Space s = conv_space();
    Size k = s.ctx.variable(s.ctx.index_of("k"));
    const Dim* r0 = s.store.reduce(0, k);
    const Dim* r1 = s.store.reduce(1, k);
    CHECK(r0 == s.store.reduce(0, k));            // interned
    CHECK(r0 != r1 && r0->hash == r1->hash);      // interchangeable reductions: same hash, distinct coordinates
    const Dim* a = s.store.binary(DimKind::Split, s.iterators[2], s.iterators[3], s.output[2] * s.output[3]);
    const Dim* b = s.store.binary(DimKind::Split, s.iterators[3], s.iterators[2], s.output[2] * s.output[3]);
    CHECK(a->hash != b->hash);                    // SPLIT is ordered
}

static void test_hash_set_matches_std() {
    HashSet compact;
    std::unordered_set<uint64_t> reference;
    uint64_t x = 1;
    for (int i = 0; i < 20000; ++i) {
        x = mix64(x);
        uint64_t h = i % 7 == 0 ? x % 64 : x;  // small values (0 included) collide in the low bits
        CHECK(compact.insert(h) == reference.insert(h).second);
    }
    CHECK(compact.size() == reference.size() && compact.contains(0) && !compact.contains(12345678901ULL));
    size_t seen = 0;
    compact.for_each([&](uint64_t h) { seen += reference.count(h); });
    CHECK(seen == reference.size());
}

static void test_dim_scope_reclaims() {
    Space s = conv_space(5);
    size_t start = s.store.count();
    const Dim* i1 = s.iterators[1];
    const Dim *kept, *freed_once, *shared;
    uint64_t freed_hash, freed_ident;
    {
        DimStore::Walk walk(s.store);
        {
            DimScope scope(s.store, 1);
            const Dim* r = s.store.reduce(0, i1->size);
            kept = s.store.unary(DimKind::Shift, r, r->size);
            freed_once = s.store.unary(DimKind::Shift, i1, i1->size);
            freed_hash = freed_once->hash, freed_ident = freed_once->ident;
            shared = s.store.unary(DimKind::Shift, s.iterators[2], s.iterators[2]->size);
            // Found by a thread outside the walk (like Node.children() from Python): pinned on the spot.
            const Dim* found = nullptr;
            std::thread([&] { found = s.store.unary(DimKind::Shift, s.iterators[2], s.iterators[2]->size); }).join();
            CHECK(found == shared && shared->pinned.test());
            DimStore::pin(kept);
            CHECK(kept->a->pinned.test());  // pinning is recursive
            CHECK(s.store.count() == start + 4);
        }
        CHECK(s.store.count() == start + 3);  // the unpinned one is freed, the pinned ones survive
        CHECK(s.store.reclaimed() == 1);
        CHECK(kept->a->kind == DimKind::Reduce && shared->a == s.iterators[2]);  // still valid
        DimScope again(s.store, 1);
        const Dim* back = s.store.unary(DimKind::Shift, i1, i1->size);  // interned anew: compares the same
        CHECK(back->hash == freed_hash && back->ident == freed_ident);
    }
    CHECK(s.store.count() == start + 3);

    // A walk frees what it made; operators it returns stay valid and identical to a walk in a fresh space.
    auto e = enumerate(s, s.root, 5, 1u << 30, 0, 50);
    CHECK(s.store.reclaimed() > 1 && 2 * s.store.count() < s.store.created());
    Space fresh = conv_space(5);
    auto f = enumerate(fresh, fresh.root, 5, 1u << 30, 0, 0);
    CHECK(e.operator_hashes == f.operator_hashes && e.operator_count > 50);
    size_t after_first = s.store.count();
    auto again = enumerate(s, s.root, 5, 1u << 30, 0, 0);  // a second walk leaves no more alive
    CHECK(again.operator_hashes == e.operator_hashes && s.store.count() <= after_first);
    for (auto& op : e.operators) {
        Program p = lower(s, *op, 0);
        CHECK(p.output.shape == (std::vector<int64_t>{2, 4, 8, 8}));
    }
    auto sampled = sample(s, s.root, 5, 3, 2, 10000, 0, 64);
    Space fresh2 = conv_space(5);
    auto sampled2 = sample(fresh2, fresh2.root, 5, 3, 1, 10000, 0, 64);
    CHECK(sampled.operators.size() == 5 && sampled2.operators.size() == 5);
    for (size_t i = 0; i < sampled.operators.size() && i < sampled2.operators.size(); ++i) {
        CHECK(sampled.operators[i]->hash == sampled2.operators[i]->hash);
        CHECK(lower(s, *sampled.operators[i], 0).flops == lower(fresh2, *sampled2.operators[i], 0).flops);
    }
}

static void test_distance_and_sampling() {
    Space s = conv_space();
    CHECK(s.root->distance >= 2);  // at least a reduction (for C_in) and a contraction
    auto one = sample(s, s.root, 10, 7, 1, 10000, 0, 64);
    Space fresh = conv_space();
    auto two = sample(fresh, fresh.root, 10, 7, 2, 10000, 0, 64);
    CHECK(one.operators.size() == 10 && two.operators.size() == 10);
    for (size_t i = 0; i < one.operators.size() && i < two.operators.size(); ++i)
        CHECK(one.operators[i]->hash == two.operators[i]->hash);
    for (auto& op : one.operators) {
        // Every prefix respects the bound: depth + distance <= final depth.
        for (const NodeState* n = op->parent.get(); n; n = n->parent.get()) CHECK(n->depth + n->distance <= op->depth);
        Program p = lower(s, *op, 0);
        CHECK(p.output.shape == (std::vector<int64_t>{2, 4, 8, 8}));
        CHECK(p.flops >= op->parent->flops_bound);
    }
}

static void test_enumeration_soundness_small() {
    Options with, without;
    with.max_depth = without.max_depth = 4;
    without.distance_pruning = false;
    auto make = [](const Options& o) {
        return Space("[N, H]", "[N, H]", {"N: 0", "H: 2"}, {"k=3: 2"}, {{{"N", 2}, {"H", 8}}}, o);
    };
    Space a = make(with), b = make(without);
    auto ea = enumerate(a, a.root, 4, 1u << 30, 0, 1u << 30);
    auto eb = enumerate(b, b.root, 4, 1u << 30, 0, 1u << 30);
    CHECK(ea.operator_count == eb.operator_count && ea.operator_count > 0);
}

static void test_exponent_overflow_is_never_a_wrap() {
    Space s = conv_space();
    const SizeContext& ctx = s.ctx;
    Size h = ctx.variable(ctx.index_of("H"));
    Size big = h;
    for (int i = 0; i < 126; ++i) big = big * h;                 // H^127: the largest exponent
    CHECK(big.exponent[ctx.index_of("H")] == 127 && !big.overflowed());
    Size over = big * h;                                         // H^128 would wrap to H^-128
    CHECK(over.overflowed() && !ctx.is_legal(over) && !ctx.value(over, 0) && !ctx.is_valid_extent(over));
    CHECK((over / h).overflowed());                              // an overflow stays one
    CHECK(ctx.to_string(over) == "H^(overflow)");
    std::string h257 = "[";
    for (int i = 0; i < 32; ++i) h257 += "H^8*";
    CHECK(throws_spec_error_at([&] { parse_shape(h257 + "H]"); }, 1));
    try {
        parse_shape(std::string("[N,\0 C]", 7));
        CHECK(false);
    } catch (const SpecError& e) {  // a NUL does not cut the message short
        CHECK(std::string(e.what()) == "\"[N,\\x00 C]\": expected a dimension (a variable name) at position 3");
    }
}

static void test_budget_bounds_hold() {
    Space s = conv_space(5);
    BudgetBounds b = budget_bounds(s);
    CHECK(b.min_flops > 0 && b.min_params > 0 && b.min_memory == 4 && b.max_flops > b.min_flops);
    auto e = enumerate(s, s.root, 5, 1u << 30, 30, 1u << 30);
    CHECK(!e.operators.empty());
    for (auto& op : e.operators) {
        CHECK(op->final_info->flops >= b.min_flops && op->final_info->flops <= b.max_flops);
        CHECK(op->final_info->params >= b.min_params && op->final_info->params <= b.max_params);
        CHECK(op->final_info->memory >= b.min_memory);
        CHECK(op->final_info->cost >= b.min_cost);
    }
}

static Space linear_space(const Options& o) {
    return Space("[N, C_in]", "[N, C_out]", {"N: 0", "C_in: 2", "C_out: 2"}, {"s=2: 2"},
                 {{{"N", 2}, {"C_in", 8}, {"C_out", 8}}}, o);
}

// Each prior: its counter moves, and the space with it on holds exactly the operators of the space without it
// that satisfy it (nothing satisfying is pruned, nothing violating is kept).
static void test_priors_are_exact_filters() {
    Options base;
    base.max_depth = 5;
    Space off = linear_space(base);
    auto all = enumerate(off, off.root, 5, 1u << 30, 0, 1u << 30);
    CHECK(all.operator_count > 100);
    std::vector<std::pair<Options, RuleId>> cases;
    Options o = base; o.prior_weight_io = true; cases.push_back({o, PriorWeightInputOutput});
    o = base; o.prior_max_pooling = 2; cases.push_back({o, PriorPooling});
    o = base; o.prior_max_outer = 4; cases.push_back({o, PriorOuterProduct});
    o = base; o.prior_outer_kinds = true; cases.push_back({o, PriorOuterKind});
    for (auto& [options, rule] : cases) {
        Space on = linear_space(options);
        auto kept = enumerate(on, on.root, 5, 1u << 30, 0, 1u << 30);
        CHECK(on.rules.rejected(rule) > 0);
        std::unordered_set<uint64_t> kept_hashes(kept.operator_hashes.begin(), kept.operator_hashes.end());
        // judge the unfiltered operators under the prior's options (a structural twin replays them there)
        Options judge = options;
        judge.structural = true;
        Space judge_space = linear_space(judge);
        size_t satisfying = 0;
        for (auto& op : all.operators) {
            std::vector<uint64_t> keys;
            for (const NodeState* x = op.get(); x->parent; x = x->parent.get()) keys.insert(keys.begin(), x->hash);
            auto r = replay(judge_space, keys);
            CHECK(r.node != nullptr);
            if (!r.node) continue;
            bool ok = prior_violations(judge_space, *r.node).empty();
            satisfying += ok;
            CHECK(ok == kept_hashes.contains(op->hash));
        }
        CHECK(satisfying == kept.operator_count);
    }
}

// Program steps carry a StepOp; step_op_name gives the names the program Python reads has always used.
static void test_step_op_names() {
    const std::vector<std::pair<StepOp, std::string>> names{
        {StepOp::Split, "split"}, {StepOp::Merge, "merge"}, {StepOp::Shift, "shift"}, {StepOp::Stride, "stride"},
        {StepOp::Unfold, "unfold"}, {StepOp::Expand, "expand"}, {StepOp::Reduce, "reduce"},
        {StepOp::Contract, "contract"}};
    for (auto& [op, name] : names) CHECK(step_op_name(op) == name);
    Options o;
    o.max_depth = 4;
    Space s = linear_space(o);
    auto r = enumerate(s, s.root, 4, 1u << 20, 0, 50);
    CHECK(!r.operators.empty());
    bool contracted = false;
    for (auto& op : r.operators) {
        Program p = lower(s, *op, 0);
        for (const ProgramStep& st : p.steps) contracted |= st.op == StepOp::Contract;
    }
    CHECK(contracted);  // every linear operator multiplies by a weight
}

int main() {
    test_hash_constants();
    test_sizes();
    test_parsing();
    test_interning();
    test_hash_set_matches_std();
    test_dim_scope_reclaims();
    test_distance_and_sampling();
    test_enumeration_soundness_small();
    test_exponent_overflow_is_never_a_wrap();
    test_budget_bounds_hold();
    test_priors_are_exact_filters();
    test_step_op_names();
    if (failures) std::printf("%d check(s) failed\n", failures);
    else std::printf("all native checks passed\n");
    return failures ? 1 : 0;
}
