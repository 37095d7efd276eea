#include "dim.hpp"

#include <algorithm>

#include "hash.hpp"

namespace syno {

const char* kind_name(DimKind k) {
    switch (k) {
        case DimKind::Iterator: return "Iterator";
        case DimKind::Reduce: return "Reduce";
        case DimKind::Shift: return "Shift";
        case DimKind::Stride: return "Stride";
        case DimKind::Split: return "Split";
        case DimKind::Unfold: return "Unfold";
        case DimKind::MergeL: return "MergeL";
        case DimKind::MergeR: return "MergeR";
        case DimKind::ShareL: return "ShareL";
        case DimKind::ShareR: return "ShareR";
    }
    return "?";
}

bool Dim::depends_on(uint64_t g) const { return std::binary_search(groups.begin(), groups.end(), g); }

bool dim_less(const Dim* x, const Dim* y) {
    if (x->hash != y->hash) return x->hash < y->hash;
    return x->ident < y->ident;
}

namespace {

uint64_t structural_hash(const Dim& d) {
    uint64_t h = fnv1a(kind_name(d.kind));
    h = combine(h, d.size.hash());
    if (d.kind == DimKind::Iterator) h = combine(h, static_cast<uint64_t>(d.index));
    if (d.a) h = combine(h, d.a->hash);
    // The rhs is mixed in rotated, so that SPLIT(a, b) and SPLIT(b, a) differ.
    if (d.b) h = combine(h, (d.b->hash << 32) | (d.b->hash >> 32));
    h = combine(h, d.param.hash());
    h = combine(h, d.group);
    return h;
}

// Identity key: the structural hash plus what the hash leaves out (multiplicity, exact children).
uint64_t identity_key(const Dim& d) {
    uint64_t h = combine(d.hash, static_cast<uint64_t>(d.index));
    h = combine(h, d.a ? d.a->ident : 0);
    h = combine(h, d.b ? d.b->ident : 0);
    return h;
}

bool same_identity(const Dim& x, const Dim& y) {
    return x.kind == y.kind && x.size == y.size && x.a == y.a && x.b == y.b && x.index == y.index &&
           x.param == y.param && x.group == y.group;
}

void merge_groups(std::vector<uint64_t>& into, const std::vector<uint64_t>& from) {
    std::vector<uint64_t> out;
    std::set_union(into.begin(), into.end(), from.begin(), from.end(), std::back_inserter(out));
    into = std::move(out);
}

}  // namespace

const Dim* DimStore::intern(Dim proto, uint64_t key) {
    Shard& shard = shards_[key % kShards];
    std::lock_guard lock(shard.mutex);
    auto [lo, hi] = shard.by_key.equal_range(key);
    for (auto it = lo; it != hi; ++it)
        if (same_identity(*it->second, proto)) return it->second;
    proto.ident = key;
    shard.dims.push_back(std::move(proto));
    const Dim* d = &shard.dims.back();
    shard.by_key.emplace(key, d);
    return d;
}

const Dim* DimStore::iterator(int index, const Size& size, bool unordered) {
    Dim d{DimKind::Iterator, size};
    d.index = index;
    d.unordered = unordered;
    d.hash = structural_hash(d);
    uint64_t key = identity_key(d);
    return intern(std::move(d), key);
}

const Dim* DimStore::reduce(int multiplicity, const Size& size) {
    Dim d{DimKind::Reduce, size};
    d.index = multiplicity;
    d.ends_in_reduce = true;
    d.hash = structural_hash(d);
    uint64_t key = identity_key(d);
    return intern(std::move(d), key);
}

const Dim* DimStore::unary(DimKind kind, const Dim* below, const Size& size, const Size& param, uint64_t group) {
    Dim d{kind, size};
    d.a = below;
    d.param = param;
    d.group = group;
    d.ends_in_reduce = below->ends_in_reduce;
    d.unordered = below->unordered && (kind == DimKind::ShareL || kind == DimKind::ShareR);
    if (kind != DimKind::ShareR) d.groups = below->groups;
    if (kind == DimKind::ShareL) merge_groups(d.groups, {group});
    d.hash = structural_hash(d);
    uint64_t key = identity_key(d);
    return intern(std::move(d), key);
}

const Dim* DimStore::binary(DimKind kind, const Dim* a, const Dim* b, const Size& size) {
    Dim d{kind, size};
    d.a = a;
    d.b = b;
    d.ends_in_reduce = kind == DimKind::Split ? (a->ends_in_reduce && b->ends_in_reduce) : a->ends_in_reduce;
    d.groups = a->groups;
    merge_groups(d.groups, b->groups);
    d.hash = structural_hash(d);
    uint64_t key = identity_key(d);
    return intern(std::move(d), key);
}

size_t DimStore::count() const {
    size_t n = 0;
    for (auto& shard : shards_) {
        std::lock_guard lock(shard.mutex);
        n += shard.dims.size();
    }
    return n;
}

}  // namespace syno
