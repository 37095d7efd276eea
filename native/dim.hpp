// The coordinate graph. A Dim is one coordinate; it points DOWN (towards the output) to the coordinates it
// is computed from, so a Dim's hash summarizes the whole subgraph below it. Dims are interned: a given
// (kind, children, parameters) exists once per space.
#pragma once
#include <array>
#include <cstdint>
#include <deque>
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

    bool is(DimKind k) const { return kind == k; }
    bool is_bare_reduce() const { return kind == DimKind::Reduce; }
    bool depends_on(uint64_t g) const;
};

// Orders dims by hash, then by identity: deterministic whatever the thread schedule.
bool dim_less(const Dim* x, const Dim* y);

class DimStore {
public:
    const Dim* iterator(int index, const Size& size, bool unordered);
    const Dim* reduce(int multiplicity, const Size& size);
    const Dim* unary(DimKind kind, const Dim* below, const Size& size, const Size& param = {}, uint64_t group = 0);
    const Dim* binary(DimKind kind, const Dim* a, const Dim* b, const Size& size);
    size_t count() const;

private:
    const Dim* intern(Dim proto, uint64_t key);
    // Sharded by identity key so that sampling threads rarely contend.
    static constexpr int kShards = 64;
    struct Shard {
        std::mutex mutex;
        std::deque<Dim> dims;
        std::unordered_multimap<uint64_t, const Dim*> by_key;
    };
    mutable std::array<Shard, kShards> shards_;
};

}  // namespace syno
