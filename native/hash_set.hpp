// A set of 64-bit structural hashes: open addressing with linear probing, 8 bytes a slot at a load of at most
// 1/2 (about 16 bytes an entry, against about 40 for std::unordered_set's node and bucket). For the walks'
// visited and dedup sets, which hold millions of entries.
//
// Why hashes are enough: a node's identity in this core IS its 64-bit frontier hash (children are
// deduplicated, cached and replayed by it, operator keys are it), so these sets lose nothing by not storing
// the frontiers; they held the same hashes in std::unordered_set before.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "hash.hpp"

namespace syno {

class HashSet {
public:
    // True when `h` was not in the set yet.
    bool insert(uint64_t h) {
        if (h == kEmpty) {
            bool fresh = !has_empty_;
            has_empty_ = true;
            size_ += fresh;
            return fresh;
        }
        if (2 * (size_ + 1) > slots_.size()) grow();
        size_t i = find_slot(h);
        if (slots_[i] == h) return false;
        slots_[i] = h;
        ++size_;
        return true;
    }
    bool contains(uint64_t h) const {
        if (h == kEmpty) return has_empty_;
        if (slots_.empty()) return false;
        return slots_[find_slot(h)] == h;
    }
    size_t size() const { return size_; }
    template <typename F>
    void for_each(F&& f) const {
        if (has_empty_) f(kEmpty);
        for (uint64_t h : slots_)
            if (h != kEmpty) f(h);
    }

private:
    static constexpr uint64_t kEmpty = 0;  // the hash 0 is kept aside in has_empty_
    size_t find_slot(uint64_t h) const {
        size_t mask = slots_.size() - 1;
        size_t i = mix64(h) & mask;  // re-mixed: the low bits of the stored hashes need not be uniform
        while (slots_[i] != kEmpty && slots_[i] != h) i = (i + 1) & mask;
        return i;
    }
    void grow() {
        std::vector<uint64_t> old(slots_.empty() ? 16 : 2 * slots_.size(), kEmpty);
        old.swap(slots_);
        for (uint64_t h : old)
            if (h != kEmpty) slots_[find_slot(h)] = h;
    }
    std::vector<uint64_t> slots_;
    size_t size_ = 0;
    bool has_empty_ = false;
};

}  // namespace syno
