// The coordinate graph. A Dim is one coordinate; it points DOWN (towards the output) to the coordinates it
// is computed from, so a Dim's hash summarizes the whole subgraph below it. Dims are interned: a given
// (kind, children, parameters) exists once at a time per space.
//
// Reclamation (issue 15): a walk (enumerate, sample) interns millions of dims that nothing needs once it
// has left the subtree that made them. A DimStore::Walk tags the dims its threads create; a DimScope marks
// the store's clock and, when closed, frees the walk's dims created after the mark that are not pinned.
// Pinned dims live as long as the space: those of nodes handed out (operators, cached children) and every dim
// created outside a walk (root iterators, Node.children() from Python, replay). A dim found by a thread of
// another walk (or outside any walk) is pinned on the spot, so no one ever holds a dim that can be freed.
// Pinning is recursive (a live dim's children are live). Dims are compared by hash and ident only (never by
// address), so a reclaimed dim interned again compares exactly as before.
#pragma once
#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "size.hpp"

namespace syno {

enum class DimKind : uint8_t {
    Iterator,  // output coordinate i_j (a leaf)
    Reduce,    // reduction variable r_j (a leaf)
    Shift,     // above SHIFT:  (below + 1) mod n
    Stride,    // above STRIDE: below * s
    Split,     // above SPLIT:  lhs * |rhs| + rhs
    Unfold,    // above UNFOLD: main + window - k/2
    MergeL,    // above MERGE, lhs: below / b
    MergeR,    // above MERGE, rhs: below mod b
    ShareL,    // above SHARE, the data side
    ShareR,    // above SHARE, the weight side
};

const char* kind_name(DimKind k);

// A flag that copies as "not set": a copy of a pinned object is a new object, not yet handed out.
struct PinFlag {
    mutable std::atomic<bool> set{false};
    PinFlag() = default;
    PinFlag(const PinFlag&) {}
    PinFlag& operator=(const PinFlag&) { return *this; }
    bool test() const { return set.load(std::memory_order_acquire); }
    bool raise() const { return set.exchange(true, std::memory_order_acq_rel); }  // returns the old value
};

struct Dim {
    DimKind kind;
    Size size;
    const Dim* a = nullptr;  // below: Split lhs / Unfold main / the single coordinate below
    const Dim* b = nullptr;  // below: Split rhs / Unfold window
    int index = 0;           // Iterator: output position; Reduce: multiplicity among equal domains
    Size param;              // Merge block, Stride factor
    uint64_t group = 0;      // Share: the contraction group (hash of its shares)
    uint64_t hash = 0;       // structural; a Reduce's multiplicity is deliberately NOT hashed (equal
                             // reductions are interchangeable summation variables)
    uint64_t ident = 0;      // hash plus what `hash` leaves out (multiplicities): a deterministic tiebreak
    // Derived facts, fixed at creation.
    bool ends_in_reduce = false;     // every leaf below is a reduction
    bool unordered = false;          // a 1-to-1 image of an unordered output coordinate
    std::vector<uint64_t> groups;    // sorted contraction groups whose SHAREs lie below (data side)
    // Store bookkeeping (dim.cpp): creation order, creating walk (0: none), kept for the space's lifetime.
    uint64_t seq = 0;
    uint64_t owner = 0;
    PinFlag pinned;

    bool is(DimKind k) const { return kind == k; }
    bool is_bare_reduce() const { return kind == DimKind::Reduce; }
    bool depends_on(uint64_t g) const;
};

// Orders dims by hash, then by identity: deterministic whatever the thread schedule.
bool dim_less(const Dim* x, const Dim* y);

class DimStore {
public:
    DimStore() = default;
    DimStore(const DimStore&) = delete;
    DimStore& operator=(const DimStore&) = delete;

    const Dim* iterator(int index, const Size& size, bool unordered);
    const Dim* reduce(int multiplicity, const Size& size);
    const Dim* unary(DimKind kind, const Dim* below, const Size& size, const Size& param = {}, uint64_t group = 0);
    const Dim* binary(DimKind kind, const Dim* a, const Dim* b, const Size& size);
    size_t count() const;              // dims alive now
    uint64_t created() const;          // dims ever created (the clock)
    uint64_t reclaimed() const;        // dims freed by scopes

    // Keeps `d` and everything below it for the store's lifetime.
    static void pin(const Dim* d);

    // Tags the dims created by this thread while it lives as the walk's (a walk spans threads: a worker
    // joins with Walk(store, walk.id())). Not nestable on one thread for the same store.
    class Walk {
    public:
        explicit Walk(const DimStore& store);
        Walk(const DimStore& store, uint64_t id);
        ~Walk();
        Walk(const Walk&) = delete;
        Walk& operator=(const Walk&) = delete;
        uint64_t id() const { return id_; }

    private:
        const DimStore* previous_store_;
        uint64_t previous_id_;
        uint64_t id_;
    };

    // Frees, when closed, the current walk's unpinned dims created since it opened. Closing is skipped
    // (the dims stay for an enclosing scope) when fewer than `min_garbage` dims were created: a reclamation
    // locks every shard. Only valid while nothing unpinned made inside it is still referenced.
    class Scope {
    public:
        explicit Scope(const DimStore& store, uint64_t min_garbage = kMinGarbage);
        ~Scope() { close(); }
        Scope(const Scope&) = delete;
        Scope& operator=(const Scope&) = delete;
        void close();
        void cycle();  // close (if due) and reopen: for a loop whose rounds leave nothing unpinned behind

    private:
        const DimStore* store_;
        uint64_t mark_, owner_, min_garbage_;
        bool open_ = true;
    };
    static constexpr uint64_t kMinGarbage = 1 << 14;

private:
    const Dim* intern(Dim proto, uint64_t key);
    void reclaim(uint64_t mark, uint64_t owner) const;
    // Sharded by identity key so that sampling threads rarely contend.
    static constexpr int kShards = 64;
    struct Shard {
        std::mutex mutex;
        std::vector<std::unique_ptr<Dim>> dims;  // creation order (seq increasing): scopes free a suffix
        std::unordered_multimap<uint64_t, const Dim*> by_key;
    };
    mutable std::array<Shard, kShards> shards_;
    mutable std::atomic<uint64_t> clock_{0};
    mutable std::atomic<uint64_t> reclaimed_{0};
};

using DimScope = DimStore::Scope;

}  // namespace syno
