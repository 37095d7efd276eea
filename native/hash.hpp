// Explicit 64-bit structural hashing: no std::hash anywhere, so hashes are identical across processes,
// runs, compilers and platforms.
#pragma once
#include <cstdint>
#include <string_view>

namespace syno {

// FNV-1a over bytes: used only for fixed tags and variable names.
constexpr uint64_t fnv1a(std::string_view text) {
    uint64_t h = 0xcbf29ce484222325ULL;
    for (char c : text) {
        h ^= static_cast<uint8_t>(c);
        h *= 0x100000001b3ULL;
    }
    return h;
}

// splitmix64 finalizer: a strong bijective mixer.
constexpr uint64_t mix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

// Order-dependent combination.
constexpr uint64_t combine(uint64_t seed, uint64_t value) {
    return mix64(seed ^ (value + 0x9e3779b97f4a7c15ULL + (seed << 6) + (seed >> 2)));
}

}  // namespace syno
