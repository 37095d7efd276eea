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

namespace {

// The walk this thread works for, per store (a thread serves one walk at a time).
thread_local const DimStore* current_store = nullptr;
thread_local uint64_t current_owner = 0;
std::atomic<uint64_t> next_walk_id{1};

uint64_t owner_here(const DimStore* store) { return current_store == store ? current_owner : 0; }

}  // namespace

void DimStore::pin(const Dim* d) {
    // A pinned dim's children are pinned (pinning is done children-last, so a concurrent pin that finds the
    // flag raised may return before the children are: harmless, as no scope can close while a thread holds an
    // unpinned dim of another walk, see intern).
    while (d && !d->pinned.raise()) {
        pin(d->b);
        d = d->a;
    }
}

const Dim* DimStore::intern(Dim proto, uint64_t key) {
    uint64_t owner = owner_here(this);
    Shard& shard = shards_[key % kShards];
    std::lock_guard lock(shard.mutex);
    auto [lo, hi] = shard.by_key.equal_range(key);
    for (auto it = lo; it != hi; ++it)
        if (same_identity(*it->second, proto)) {
            // Another walk's dim could be freed when that walk's scope closes: this thread keeps it. Pinned
            // under the shard lock, which every reclamation takes.
            if (it->second->owner != owner && !it->second->pinned.test()) pin(it->second);
            return it->second;
        }
    proto.ident = key;
    proto.owner = owner;
    proto.seq = clock_.fetch_add(1, std::memory_order_relaxed);
    shard.dims.push_back(std::make_unique<Dim>(std::move(proto)));
    const Dim* d = shard.dims.back().get();
    shard.by_key.emplace(key, d);
    if (owner == 0) pin(d);  // outside a walk nothing tells when the dim is no longer needed
    return d;
}

void DimStore::reclaim(uint64_t mark, uint64_t owner) const {
    // All shards at once: an intern() that finds a dim of this walk pins it under its shard's lock, so a dim
    // is either pinned before we look at it or unreachable for anyone but this walk.
    std::array<std::unique_lock<std::mutex>, kShards> locks;
    for (int i = 0; i < kShards; ++i) locks[i] = std::unique_lock(shards_[i].mutex);
    uint64_t freed = 0;
    for (Shard& shard : shards_) {
        auto& dims = shard.dims;
        auto first = std::partition_point(dims.begin(), dims.end(), [&](const auto& d) { return d->seq < mark; });
        auto out = first;
        for (auto it = first; it != dims.end(); ++it) {
            const Dim* d = it->get();
            if (d->owner != owner || d->pinned.test()) {
                if (out != it) *out = std::move(*it);
                ++out;
                continue;
            }
            auto [lo, hi] = shard.by_key.equal_range(d->ident);
            for (auto k = lo; k != hi; ++k)
                if (k->second == d) { shard.by_key.erase(k); break; }
            it->reset();
            ++freed;
        }
        dims.erase(out, dims.end());
    }
    reclaimed_.fetch_add(freed, std::memory_order_relaxed);
}

DimStore::Walk::Walk(const DimStore& store) : Walk(store, next_walk_id.fetch_add(1)) {}

DimStore::Walk::Walk(const DimStore& store, uint64_t id)
    : previous_store_(current_store), previous_id_(current_owner), id_(id) {
    current_store = &store;
    current_owner = id;
}

DimStore::Walk::~Walk() {
    current_store = previous_store_;
    current_owner = previous_id_;
}

DimStore::Scope::Scope(const DimStore& store, uint64_t min_garbage)
    : store_(&store), mark_(store.clock_.load()), owner_(owner_here(&store)), min_garbage_(min_garbage) {}

void DimStore::Scope::close() {
    if (!open_) return;
    open_ = false;
    // Outside a walk every dim is pinned: nothing to free.
    if (owner_ != 0 && store_->clock_.load() - mark_ >= min_garbage_) store_->reclaim(mark_, owner_);
}

void DimStore::Scope::cycle() {
    uint64_t now = store_->clock_.load();
    if (!open_ || owner_ == 0 || now - mark_ < min_garbage_) return;
    store_->reclaim(mark_, owner_);
    mark_ = now;
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

uint64_t DimStore::created() const { return clock_.load(); }

uint64_t DimStore::reclaimed() const { return reclaimed_.load(); }

}  // namespace syno
