// A small set of ints as a sorted vector: the subset of std::set<int>'s interface the cost model uses, iterated in
// the same (ascending) order, so products over its elements are the same doubles. Its sets hold a program's few
// coordinate ids (tens at most), where a tree's node allocations and pointer chasing cost more than shifting a
// vector (the cost model runs for every node a search expands: bounds.cpp).
#pragma once
#include <algorithm>
#include <cstddef>
#include <vector>

namespace syno {

class IntSet {
public:
    IntSet() = default;
    template <typename It>
    IntSet(It first, It last) { insert(first, last); }

    bool empty() const { return v_.empty(); }
    size_t size() const { return v_.size(); }
    size_t count(int x) const { return std::binary_search(v_.begin(), v_.end(), x) ? 1 : 0; }
    bool insert(int x) {
        auto it = std::lower_bound(v_.begin(), v_.end(), x);
        if (it != v_.end() && *it == x) return false;
        v_.insert(it, x);
        return true;
    }
    template <typename It>
    void insert(It first, It last) {
        for (; first != last; ++first) insert(*first);
    }
    size_t erase(int x) {
        auto it = std::lower_bound(v_.begin(), v_.end(), x);
        if (it == v_.end() || *it != x) return 0;
        v_.erase(it);
        return 1;
    }
    std::vector<int>::const_iterator begin() const { return v_.begin(); }
    std::vector<int>::const_iterator end() const { return v_.end(); }
    bool operator==(const IntSet&) const = default;

private:
    std::vector<int> v_;  // sorted, distinct
};

}  // namespace syno
