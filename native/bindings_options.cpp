// The space options, written once: kOptions below has one row per option of Options (its name, the field it
// sets, the kind of value Python gives and, for integers, the inclusive range). Both directions iterate it:
// make_options (a dict from Python to Options, checking each value) and options_to_py (Options to a dict:
// default_options()); option_table() and option_ranges() show it to Python, where syno_automl/options.py and
// the max_depth setting (syno_automl/settings.py) take their ranges from it.
#include <cmath>
#include <cstddef>
#include <stdexcept>

#include "bindings.hpp"

namespace syno::bindings {

// Option readers: the Python face validates options first (syno_automl/options.py); these keep the core's own
// invariants, so a direct call with a wrong type or range is an error naming the option, never a failed cast.
namespace {

int int_option(const std::string& name, py::handle v, int lo, int hi) {
    if (!py::isinstance<py::int_>(v) || py::isinstance<py::bool_>(v))
        throw std::invalid_argument(name + " must be an integer, got a " + type_name(v));
    long long x = 0;
    try {
        x = v.cast<long long>();
    } catch (const py::cast_error&) {
        PyErr_Clear();
        x = hi + 1LL;
    }
    if (x < lo || x > hi)
        throw std::invalid_argument(name + " must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " +
                                    (x == hi + 1LL ? std::string("a larger integer") : std::to_string(x)));
    return static_cast<int>(x);
}

double number_option(const std::string& name, py::handle v, bool allow_infinity) {
    if (!(py::isinstance<py::int_>(v) || py::isinstance<py::float_>(v)) || py::isinstance<py::bool_>(v))
        throw std::invalid_argument(name + " must be a number, got a " + type_name(v));
    double x = 0;
    try {
        x = v.cast<double>();
    } catch (const py::cast_error&) {  // an int too large for a double
        PyErr_Clear();
        x = INFINITY;
    }
    if (std::isnan(x) || x < 0 || (std::isinf(x) && !allow_infinity))
        throw std::invalid_argument(name + " must be a " + (allow_infinity ? "" : "finite ") +
                                    "non-negative number, got " + echo(py::str(py::repr(v))));
    return x;
}

bool bool_option(const std::string& name, py::handle v) {
    if (!py::isinstance<py::bool_>(v)) throw std::invalid_argument(name + " must be True or False, got a " + type_name(v));
    return v.cast<bool>();
}

enum class OptionKind {
    Int,      // an int field in [lo, hi]
    Number,   // a double field: a finite non-negative number
    Budget,   // a double field: a non-negative number, infinity meaning "no limit"
    Bool,     // a bool field
    Custom,   // a value of its own shape, read and written by the row's parse and emit
};

struct OptionRow;
using ParseFn = void (*)(const OptionRow& row, Options& o, py::handle value);
using EmitFn = py::object (*)(const OptionRow& row, const Options& o);

struct OptionRow {
    const char* name;
    OptionKind kind;
    const char* kind_name;                     // as option_table() shows it
    int Options::*int_field = nullptr;         // Int
    double Options::*number_field = nullptr;   // Number, Budget
    bool Options::*bool_field = nullptr;       // Bool
    bool has_range = false;                    // Int: the value's range; Custom: each integer item's
    int lo = 0, hi = 0;
    ParseFn parse = nullptr;                   // Custom
    EmitFn emit = nullptr;                     // Custom
    bool listed = true;     // in options_to_py (default_options()); the budgets (infinite: no limit) are not
    bool internal = false;  // set by syno_automl.space itself, not an argument of OperatorSpace
};

constexpr OptionRow integer(const char* name, int Options::*field, int lo, int hi) {
    return {.name = name, .kind = OptionKind::Int, .kind_name = "int", .int_field = field, .has_range = true,
            .lo = lo, .hi = hi};
}
constexpr OptionRow number(const char* name, double Options::*field) {
    return {.name = name, .kind = OptionKind::Number, .kind_name = "number", .number_field = field};
}
constexpr OptionRow budget(const char* name, double Options::*field) {
    return {.name = name, .kind = OptionKind::Budget, .kind_name = "budget", .number_field = field, .listed = false};
}
constexpr OptionRow boolean(const char* name, bool Options::*field) {
    return {.name = name, .kind = OptionKind::Bool, .kind_name = "bool", .bool_field = field};
}
constexpr OptionRow internal_option(OptionRow row, bool listed) {
    row.internal = true;
    row.listed = listed;
    return row;
}

// cost_profile: {"flop", "element", "read", "launch", "fuse_views"[, "inference"]}: syno_automl/cost_profile.py
void parse_cost_profile(const OptionRow& row, Options& o, py::handle value) {
    if (!py::isinstance<py::dict>(value))
        throw std::invalid_argument(std::string(row.name) + " must be a dict, got a " + type_name(value));
    py::dict d = value.cast<py::dict>();
    for (const char* f : {"flop", "element", "read", "launch", "fuse_views"})
        if (!d.contains(f)) throw std::invalid_argument(std::string("cost_profile needs '") + f + "'");
    o.cost_profile.flop = number_option("cost_profile['flop']", d["flop"], false);
    o.cost_profile.element = number_option("cost_profile['element']", d["element"], false);
    o.cost_profile.read = number_option("cost_profile['read']", d["read"], false);
    o.cost_profile.launch = number_option("cost_profile['launch']", d["launch"], false);
    o.cost_profile.fuse_views = bool_option("cost_profile['fuse_views']", d["fuse_views"]);
    if (d.contains("inference")) o.cost_profile.inference = bool_option("cost_profile['inference']", d["inference"]);
}
py::object emit_cost_profile(const OptionRow&, const Options& o) {
    py::dict profile;
    profile["flop"] = o.cost_profile.flop;
    profile["element"] = o.cost_profile.element;
    profile["read"] = o.cost_profile.read;
    profile["launch"] = o.cost_profile.launch;
    profile["fuse_views"] = o.cost_profile.fuse_views;
    profile["inference"] = o.cost_profile.inference;
    return profile;
}

// channel_inputs: input positions (each in the row's range) that are channels (rule channel-split-order)
void parse_channel_inputs(const OptionRow& row, Options& o, py::handle value) {
    if (!py::isinstance<py::list>(value) && !py::isinstance<py::tuple>(value))
        throw std::invalid_argument(std::string(row.name) + " must be a list of input positions, got a " +
                                    type_name(value));
    for (auto item : value) o.channel_inputs.push_back(int_option("channel_inputs[]", item, row.lo, row.hi));
}
py::object emit_channel_inputs(const OptionRow&, const Options& o) { return py::cast(o.channel_inputs); }

// max_counts: {primitive name: most uses (in the row's range; -1 or None: no limit)}
void parse_max_counts(const OptionRow& row, Options& o, py::handle value) {
    if (!py::isinstance<py::dict>(value))
        throw std::invalid_argument(std::string(row.name) + " must be a dict, got a " + type_name(value));
    for (auto [pk, pv] : value.cast<py::dict>()) {
        std::string name = py::str(pk);
        bool found = false;
        for (int p = 0; p < static_cast<int>(Prim::Count); ++p)
            if (name == prim_name(static_cast<Prim>(p))) {
                o.max_count[p] = pv.is_none() ? -1 : int_option("max_counts[" + echo(name) + "]", pv, row.lo, row.hi);
                found = true;
            }
        if (!found) throw std::invalid_argument("max_counts: unknown primitive " + echo(name));
    }
}
py::object emit_max_counts(const OptionRow&, const Options& o) {
    py::dict counts;
    for (int p = 0; p < static_cast<int>(Prim::Count); ++p)
        counts[prim_name(static_cast<Prim>(p))] =
            o.max_count[p] < 0 ? py::object(py::none()) : py::object(py::int_(o.max_count[p]));
    return counts;
}

constexpr OptionRow custom(const char* name, const char* kind_name, ParseFn parse, EmitFn emit) {
    return {.name = name, .kind = OptionKind::Custom, .kind_name = kind_name, .parse = parse, .emit = emit};
}
constexpr OptionRow custom(const char* name, const char* kind_name, ParseFn parse, EmitFn emit, int lo, int hi) {
    OptionRow row = custom(name, kind_name, parse, emit);
    row.has_range = true;
    row.lo = lo;
    row.hi = hi;
    return row;
}

// In the order default_options() lists them. Degrees beyond 8 make size enumeration blow up combinatorially
// (spec exponents are limited to [-8, 8] per factor).
constexpr OptionRow kOptions[] = {
    integer("max_depth", &Options::max_depth, 1, 30),
    integer("max_reductions", &Options::max_reductions, 0, 64),
    integer("max_weights", &Options::max_weights, 0, 64),
    integer("min_weights", &Options::min_weights, 0, 64),
    integer("max_shares", &Options::max_shares, 0, 64),
    integer("max_primary_degree", &Options::max_primary_degree, 0, 8),
    integer("max_coefficient_degree", &Options::max_coefficient_degree, 0, 8),
    integer("max_size_variables", &Options::max_size_variables, 1, kMaxVariables),
    integer("max_unfold_window", &Options::max_unfold_window, 1, 1 << 30),
    number("min_unfold_ratio", &Options::min_unfold_ratio),
    budget("max_flops", &Options::max_flops),
    budget("min_flops", &Options::min_flops),
    budget("max_params", &Options::max_params),
    budget("min_params", &Options::min_params),
    budget("max_memory", &Options::max_memory),
    budget("max_cost", &Options::max_cost),
    number("min_weight_params", &Options::min_weight_params),
    boolean("distance_pruning", &Options::distance_pruning),
    boolean("flops_pruning", &Options::flops_pruning),
    boolean("cost_pruning", &Options::cost_pruning),
    boolean("canonical_rules", &Options::canonical_rules),
    internal_option(boolean("structural", &Options::structural), false),
    internal_option(custom("cost_profile", "cost_profile", parse_cost_profile, emit_cost_profile), true),
    boolean("prior_weight_io", &Options::prior_weight_io),
    boolean("prior_outer_kinds", &Options::prior_outer_kinds),
    number("prior_max_outer", &Options::prior_max_outer),
    integer("prior_lowrank_size", &Options::prior_lowrank_size, 0, 1 << 30),
    number("prior_max_pooling", &Options::prior_max_pooling),
    custom("channel_inputs", "int_list", parse_channel_inputs, emit_channel_inputs, 0, 63),
    custom("max_counts", "count_dict", parse_max_counts, emit_max_counts, -1, 64),
};

const OptionRow* find_option(const std::string& name) {
    for (const OptionRow& row : kOptions)
        if (name == row.name) return &row;
    return nullptr;
}

void parse_option(const OptionRow& row, Options& o, py::handle value) {
    const std::string name = row.name;
    switch (row.kind) {
        case OptionKind::Int: o.*row.int_field = int_option(name, value, row.lo, row.hi); return;
        case OptionKind::Number: o.*row.number_field = number_option(name, value, false); return;
        case OptionKind::Budget: o.*row.number_field = number_option(name, value, true); return;
        case OptionKind::Bool: o.*row.bool_field = bool_option(name, value); return;
        case OptionKind::Custom: row.parse(row, o, value); return;
    }
    throw std::logic_error("internal error: option " + name + " has no kind");
}

py::object emit_option(const OptionRow& row, const Options& o) {
    switch (row.kind) {
        case OptionKind::Int: return py::int_(o.*row.int_field);
        case OptionKind::Number:
        case OptionKind::Budget: return py::float_(o.*row.number_field);
        case OptionKind::Bool: return py::bool_(o.*row.bool_field);
        case OptionKind::Custom: return row.emit(row, o);
    }
    throw std::logic_error(std::string("internal error: option ") + row.name + " has no kind");
}

}  // namespace

Options make_options(const py::dict& kw) {
    Options o;
    for (auto [key, value] : kw) {
        if (!py::isinstance<py::str>(key)) throw std::invalid_argument("option names must be strings");
        std::string k = py::str(key);
        const OptionRow* row = find_option(k);
        if (!row) throw std::invalid_argument("unknown option " + echo(k));
        parse_option(*row, o, value);
    }
    if (o.max_flops < o.min_flops) throw std::invalid_argument("max_flops is below min_flops: no operator can satisfy both");
    if (o.max_params < o.min_params) throw std::invalid_argument("max_params is below min_params: no operator can satisfy both");
    return o;
}

py::dict options_to_py(const Options& o) {
    py::dict d;
    for (const OptionRow& row : kOptions)
        if (row.listed) d[row.name] = emit_option(row, o);
    return d;
}

void bind_options(py::module_& m) {
    m.def("default_options", [] { return options_to_py(Options{}); },
          "The core's option defaults (the one place they are written down).");
    m.def("option_table", [] {
        py::list rows;
        for (const OptionRow& row : kOptions) {
            py::dict d;
            d["name"] = row.name;
            d["kind"] = row.kind_name;
            d["range"] = row.has_range ? py::object(py::make_tuple(row.lo, row.hi)) : py::object(py::none());
            d["internal"] = row.internal;
            rows.append(d);
        }
        return rows;
    }, "The core's options (the one place they and their ranges are written down), in order: each a dict of its "
       "name, kind (int, number: finite and non-negative, budget: non-negative or inf for no limit, bool, "
       "cost_profile, int_list, count_dict), range (inclusive; of an int_list's or count_dict's items; else None) "
       "and internal (set by syno_automl.space, not an OperatorSpace argument).");
    m.def("option_ranges", [] {
        py::dict d;
        for (const OptionRow& row : kOptions)
            if (row.kind == OptionKind::Int) d[row.name] = py::make_tuple(row.lo, row.hi);
        return d;
    }, "The integer options' inclusive ranges: {name: (lo, hi)}.");
}

}  // namespace syno::bindings
