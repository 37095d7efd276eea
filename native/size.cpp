#include "size.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>

#include "hash.hpp"

namespace syno {

namespace {

// The spec as it will be quoted: control bytes escaped, so a NUL (or a newline) neither cuts the message
// short nor hides the position. Positions still count bytes of the original text.
std::string quoted(const std::string& text) {
    std::string out;
    for (unsigned char c : text) {
        if (c < 0x20 || c == 0x7f) {
            char buf[5];
            std::snprintf(buf, sizeof buf, "\\x%02x", c);
            out += buf;
        } else {
            out += static_cast<char>(c);
        }
    }
    return out;
}

// (in 16 bits, which hold any sum or difference of two exponents: the compiler's vector lanes are twice as many)
int8_t checked_exponent(int16_t a, int16_t b, int16_t sum) {
    bool overflow = (a == kOverflow) | (b == kOverflow) | (sum < -kMaxExponent) | (sum > kMaxExponent);
    return overflow ? kOverflow : static_cast<int8_t>(sum);
}

}  // namespace

std::string echo(const std::string& text, size_t around, char quote) {
    std::string q(1, quote);
    if (text.size() <= kEchoLimit) return q + quoted(text) + q;
    size_t start = 0;
    if (around != std::string::npos && around >= kEchoLimit - kEchoLimit / 4)
        start = std::min(around - kEchoLimit / 2, text.size() - kEchoLimit);
    bool more = start + kEchoLimit < text.size();
    return std::string(start ? "..." : "") + q + quoted(text.substr(start, kEchoLimit)) + q + (more ? "..." : "") +
           " (" + std::to_string(text.size()) + " characters)";
}

SpecError::SpecError(const std::string& text, size_t pos, const std::string& expected)
    : std::invalid_argument(echo(text, pos, '"') + ": " + expected + " at position " + std::to_string(pos)), position(pos) {}

// (branch-free loops: the compiler vectorizes them; sizes are multiplied in every shape distance)
Size Size::operator*(const Size& other) const {
    Size r;
    for (int i = 0; i < kMaxVariables; ++i)
        r.exponent[i] = checked_exponent(exponent[i], other.exponent[i],
                                         static_cast<int16_t>(exponent[i] + other.exponent[i]));
    return r;
}

Size Size::operator/(const Size& other) const {
    Size r;
    for (int i = 0; i < kMaxVariables; ++i)
        r.exponent[i] = checked_exponent(exponent[i], other.exponent[i],
                                         static_cast<int16_t>(exponent[i] - other.exponent[i]));
    return r;
}

bool Size::overflowed() const {
    for (auto e : exponent)
        if (e == kOverflow) return true;
    return false;
}

bool Size::is_one() const {
    for (auto e : exponent)
        if (e != 0) return false;
    return true;
}

bool Size::lex_less(const Size& other) const { return exponent < other.exponent; }

uint64_t Size::hash() const {
    static const uint64_t one = Size{}.hash_of_exponents();  // (every view's and SHARE's `param`: asked most)
    return is_one() ? one : hash_of_exponents();
}

uint64_t Size::hash_of_exponents() const {
    uint64_t h = fnv1a("Size");
    for (int i = 0; i < kMaxVariables; ++i) h = combine(h, static_cast<uint64_t>(exponent[i] + 128) + (uint64_t(i) << 8));
    return h;
}

int SizeContext::index_of(const std::string& name) const {
    for (int i = 0; i < count(); ++i)
        if (variables[i].name == name) return i;
    return -1;
}

std::optional<int64_t> SizeContext::value(const Size& s, int v) const {
    if (s.overflowed()) return std::nullopt;
    __int128 num = 1, den = 1;
    for (int i = 0; i < count(); ++i) {
        int e = s.exponent[i];
        if (e == 0) continue;
        __int128 base = valuations[v][i];
        for (int k = 0; k < std::abs(e); ++k) {
            if (e > 0) num *= base; else den *= base;
            if (num > (__int128(1) << 62) || den > (__int128(1) << 62)) return std::nullopt;
        }
    }
    if (num >= 0 && den > 0) {  // (the usual case) in [0, 2^62]: a 64-bit division (a 128-bit one is a library call)
        int64_t n = static_cast<int64_t>(num), d = static_cast<int64_t>(den);
        if (n % d != 0) return std::nullopt;
        return n / d;
    }
    if (den == 0 || num % den != 0) return std::nullopt;
    return static_cast<int64_t>(num / den);
}

double SizeContext::approx(const Size& s, int v) const {
    if (s.overflowed()) return std::nan("");
    double r = 1;
    for (int i = 0; i < count(); ++i)
        if (s.exponent[i]) r *= std::pow(static_cast<double>(valuations[v][i]), s.exponent[i]);
    return r;
}

bool SizeContext::has_primary(const Size& s) const {
    for (int i = 0; i < count(); ++i)
        if (variables[i].primary && s.exponent[i] != 0) return true;
    return false;
}

int SizeContext::primary_degree(const Size& s) const {
    int d = 0;
    for (int i = 0; i < count(); ++i)
        if (variables[i].primary) d += s.exponent[i];
    return d;
}

bool SizeContext::is_legal(const Size& s) const {
    if (s.overflowed()) return false;
    bool primary = false;
    for (int i = 0; i < count(); ++i) {
        if (variables[i].primary) {
            if (s.exponent[i] < 0) return false;
            if (s.exponent[i] > 0) primary = true;
        }
    }
    if (!primary)
        for (int i = 0; i < count(); ++i)
            if (!variables[i].primary && s.exponent[i] < 0) return false;
    return true;
}

bool SizeContext::is_valid_extent(const Size& s, int64_t minimum) const {
    if (!is_legal(s)) return false;
    for (size_t v = 0; v < valuations.size(); ++v) {
        auto x = value(s, static_cast<int>(v));
        if (!x || *x < minimum) return false;
    }
    return true;
}

std::string SizeContext::to_string(const Size& s) const {
    std::string out;
    // Coefficients first, then primaries, as in the paper's notation.
    for (int pass = 0; pass < 2; ++pass) {
        for (int i = 0; i < count(); ++i) {
            bool want_primary = pass == 1;
            if (variables[i].primary != want_primary || s.exponent[i] == 0) continue;
            if (!out.empty()) out += "*";
            out += variables[i].name;
            if (s.exponent[i] == kOverflow) out += "^(overflow)";
            else if (s.exponent[i] != 1) out += "^" + std::to_string(s.exponent[i]);
        }
    }
    return out.empty() ? "1" : out;
}

Size SizeContext::variable(int var) const {
    Size s;
    s.exponent[var] = 1;
    return s;
}

// ---------------------------------------------------------------------------------------------------------
// Parsing

namespace {

struct Cursor {
    const std::string& text;
    size_t pos = 0;
    void skip_spaces() {
        while (pos < text.size() && std::isspace(static_cast<unsigned char>(text[pos]))) ++pos;
    }
    bool at_end() { skip_spaces(); return pos >= text.size(); }
    bool accept(char c) {
        skip_spaces();
        if (pos < text.size() && text[pos] == c) { ++pos; return true; }
        return false;
    }
    void expect(char c, const std::string& what) {
        if (!accept(c)) throw SpecError(text, pos, "expected " + what);
    }
    std::string identifier(const std::string& what) {
        skip_spaces();
        size_t start = pos;
        if (pos < text.size() && (std::isalpha(static_cast<unsigned char>(text[pos])) || text[pos] == '_')) {
            ++pos;
            while (pos < text.size() && (std::isalnum(static_cast<unsigned char>(text[pos])) || text[pos] == '_')) ++pos;
        }
        if (start == pos) throw SpecError(text, pos, "expected " + what);
        return text.substr(start, pos - start);
    }
    int64_t integer(const std::string& what, bool allow_sign) {
        skip_spaces();
        size_t start = pos;
        if (allow_sign && pos < text.size() && (text[pos] == '-' || text[pos] == '+')) ++pos;
        size_t digits = pos;
        while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos]))) ++pos;
        if (digits == pos) { pos = start; throw SpecError(text, start, "expected " + what); }
        if (pos - digits > 12) throw SpecError(text, start, "expected a smaller " + what);
        return std::stoll(text.substr(start, pos - start));
    }
};

}  // namespace

ParsedSpec parse_spec(const std::string& text) {
    Cursor c{text};
    ParsedSpec spec;
    spec.name = c.identifier("a variable name");
    if (c.accept('=')) {
        c.skip_spaces();
        size_t start = c.pos;
        int64_t v = c.integer("an integer value after '='", false);
        if (v < 1) throw SpecError(text, start, "expected a positive value");
        spec.value = v;
    }
    if (c.accept(':')) {
        int64_t n = c.integer("a maximum occurrence count after ':'", false);
        if (n > 64) throw SpecError(text, c.pos, "expected a maximum occurrence count of at most 64");
        spec.max_occurrences = static_cast<int>(n);
    }
    if (!c.at_end()) throw SpecError(text, c.pos, "expected end of spec");
    return spec;
}

std::vector<ShapeDim> parse_shape(const std::string& text) {
    Cursor c{text};
    std::vector<ShapeDim> dims;
    c.expect('[', "'['");
    if (c.accept(']')) {
        if (!c.at_end()) throw SpecError(text, c.pos, "expected end of shape after ']'");
        return dims;
    }
    while (true) {
        ShapeDim dim;
        c.skip_spaces();
        size_t dim_start = c.pos;
        while (true) {
            std::string name = c.identifier("a dimension (a variable name)");
            int exponent = 1;
            if (c.accept('^')) {
                c.skip_spaces();
                size_t start = c.pos;
                int64_t e = c.integer("an integer exponent after '^'", true);
                if (e == 0 || e < -8 || e > 8) throw SpecError(text, start, "expected a non-zero exponent in [-8, 8]");
                exponent = static_cast<int>(e);
            }
            dim.factors.emplace_back(name, exponent);
            if (!c.accept('*')) break;
        }
        // A repeated factor adds up: the total must fit the exponent range (never wrap: H^8 x 32 * H is not H).
        std::map<std::string, int> totals;
        for (auto& [factor, e] : dim.factors) totals[factor] += e;
        for (auto& [factor, total] : totals)
            if (total < -kMaxExponent || total > kMaxExponent)
                throw SpecError(text, dim_start,
                                "expected the exponent of " + factor + " within [-" + std::to_string(kMaxExponent) +
                                    ", " + std::to_string(kMaxExponent) + "] (this dimension multiplies to " + factor +
                                    "^" + std::to_string(total) + ")");
        if (c.accept(':')) {
            std::string attribute = c.identifier("an attribute after ':'");
            if (attribute != "unordered") throw SpecError(text, c.pos - attribute.size(), "expected the attribute 'unordered'");
            dim.unordered = true;
        }
        dims.push_back(std::move(dim));
        if (c.accept(']')) break;
        c.expect(',', "',' or ']'");
    }
    if (!c.at_end()) throw SpecError(text, c.pos, "expected end of shape after ']'");
    return dims;
}

Size make_size(const SizeContext& ctx, const ShapeDim& dim, const std::string& text) {
    std::array<int, kMaxVariables> totals{};
    for (auto& [name, exponent] : dim.factors) {
        int i = ctx.index_of(name);
        if (i < 0) throw SpecError(text, text.find(name), "unknown variable " + echo(name));
        totals[i] += exponent;
    }
    Size s;
    for (int i = 0; i < ctx.count(); ++i) {
        if (totals[i] < -kMaxExponent || totals[i] > kMaxExponent)  // parse_shape refuses it already; never wrap
            throw SpecError(text, text.find(ctx.variables[i].name),
                            "expected the exponent of " + ctx.variables[i].name + " within [-127, 127]");
        s.exponent[i] = static_cast<int8_t>(totals[i]);
    }
    return s;
}

}  // namespace syno
