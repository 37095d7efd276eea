// Symbolic sizes: monomials over primary variables (exponent >= 0) and coefficient variables (signed),
// with one or more concrete valuations (one per placeholder mapping).
#pragma once
#include <array>
#include <cstdint>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace syno {

constexpr int kMaxVariables = 16;
// Exponents are stored in an int8_t: a spec may not leave [-kMaxExponent, kMaxExponent], and an arithmetic result
// outside it becomes kOverflow, which no legal size carries (so it is pruned, never wrapped into a wrong size).
constexpr int kMaxExponent = 127;
constexpr int8_t kOverflow = -128;

// `text` as an error message shows it: in quotes, control bytes escaped (a NUL neither cuts the message
// short nor hides what follows), and at most kEchoLimit bytes of it: the start, or the part around `around` when
// that lies beyond, then the text's length ("..."abc"... (100000 characters)").
constexpr size_t kEchoLimit = 80;
std::string echo(const std::string& text, size_t around = std::string::npos, char quote = '\'');

// A malformed spec: says what text, at which position, and what was expected.
class SpecError : public std::invalid_argument {
public:
    SpecError(const std::string& text, size_t position, const std::string& expected);
    size_t position;
};

struct Variable {
    std::string name;
    bool primary = true;
    int max_occurrences = 3;
    std::optional<int64_t> default_value;  // "s=2": the value when a mapping does not give one
    bool fixed = false;                     // passes straight through (the batch dim)
};

struct Size {
    std::array<int8_t, kMaxVariables> exponent{};
    bool overflowed() const;  // some exponent left [-kMaxExponent, kMaxExponent] in * or /
    bool operator==(const Size& other) const {  // two word compares (the default calls memcmp: a hot path)
        static_assert(sizeof(exponent) == 2 * sizeof(uint64_t));
        uint64_t a[2], b[2];
        std::memcpy(a, exponent.data(), sizeof a);
        std::memcpy(b, other.exponent.data(), sizeof b);
        return a[0] == b[0] && a[1] == b[1];
    }
    Size operator*(const Size& other) const;
    Size operator/(const Size& other) const;
    bool is_one() const;
    // Lexicographic order on exponents (used for canonical orders only).
    bool lex_less(const Size& other) const;
    uint64_t hash() const;

private:
    uint64_t hash_of_exponents() const;
};

class SizeContext {
public:
    std::vector<Variable> variables;                 // primary first, then coefficients; alphabetical within
    std::vector<std::vector<int64_t>> valuations;    // valuations[v][variable]

    int index_of(const std::string& name) const;     // -1 if unknown
    bool is_primary(int var) const { return variables[var].primary; }
    int count() const { return static_cast<int>(variables.size()); }

    // Exact integer value under valuation v; nullopt if not an integer (or overflowed).
    std::optional<int64_t> value(const Size& s, int v) const;
    double approx(const Size& s, int v) const;
    // No negative primary exponent; a coefficient-only size has no negative exponent; not overflowed.
    bool is_legal(const Size& s) const;
    // Legal, integral and >= minimum under every valuation.
    bool is_valid_extent(const Size& s, int64_t minimum = 2) const;
    bool has_primary(const Size& s) const;
    int primary_degree(const Size& s) const;
    std::string to_string(const Size& s) const;
    Size variable(int var) const;
};

// Parsing. A spec is `name`, `name: n`, `name=value`, `name=value: n`; a shape is
// `[a, b^2*c, d: unordered]`.
struct ParsedSpec {
    std::string name;
    std::optional<int64_t> value;
    std::optional<int> max_occurrences;
};
ParsedSpec parse_spec(const std::string& text);

struct ShapeDim {
    std::vector<std::pair<std::string, int>> factors;  // name, exponent
    bool unordered = false;
};
std::vector<ShapeDim> parse_shape(const std::string& text);

Size make_size(const SizeContext& ctx, const ShapeDim& dim, const std::string& text);

}  // namespace syno
