// pybind11 module syno_automl._native. Every C++ error surfaces as a precise Python exception of
// syno_automl.errors (all under SynoError): SpecError for malformed specs, OptionError for other invalid
// arguments, ResourceError when a thread cannot start, InternalError for a broken invariant (a bug); long calls
// release the GIL.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cmath>
#include <cstdio>
#include <system_error>
#include <thread>

#include "bounds.hpp"
#include "describe.hpp"
#include "lower.hpp"
#include "priors.hpp"
#include "space.hpp"

namespace py = pybind11;
using namespace syno;

namespace {

std::string hex(uint64_t h) {
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
    return buf;
}

struct PyNode {
    std::shared_ptr<const Space> space;
    NodePtr node;
};

py::object expr_to_py(const Expr& e) {
    py::list l;
    l.append(e.op);
    if (e.op == "it" || e.op == "red" || e.op == "const") {
        l.append(e.value);
        return l;
    }
    for (auto& a : e.args) l.append(expr_to_py(a));
    if (e.op == "mul" || e.op == "div" || e.op == "mod" || e.op == "pad") l.append(e.value);
    return l;
}

py::dict step_to_py(const ProgramStep& s) {
    py::dict d;
    d["op"] = s.op;
    if (s.op == "split" || s.op == "unfold") { d["src"] = s.src[0]; d["dst"] = s.dst; }
    else if (s.op == "merge") { d["src"] = s.src; d["dst"] = s.dst[0]; }
    else if (s.op == "shift" || s.op == "stride") { d["src"] = s.src[0]; d["dst"] = s.dst[0]; }
    else if (s.op == "expand") { d["dst"] = s.dst[0]; }
    else if (s.op == "reduce") { d["src"] = s.src[0]; d["mean"] = s.mean; }
    else if (s.op == "contract") {
        d["weight"] = s.weight;
        py::dict rename;
        for (auto& [a, b] : s.rename) rename[py::int_(a)] = b;
        d["rename"] = rename;
        d["out"] = s.out;
    }
    if (s.op == "unfold") d["window"] = s.window;
    if (s.op == "stride") d["stride"] = s.stride;
    return d;
}

py::dict tensor_to_py(const ProgramTensor& t, bool with_fan_in) {
    py::dict d;
    d["dims"] = t.dims;
    d["shape"] = t.shape;
    if (with_fan_in) d["fan_in"] = t.fan_in;
    if (!t.views.empty()) {  // a weight viewed before its contraction (the planner, plan.hpp)
        py::list views;
        for (auto& s : t.views) views.append(step_to_py(s));
        d["views"] = views;
    }
    return d;
}

py::dict program_to_py(const Program& p, const CostProfile& profile) {
    py::dict out;
    out["input"] = tensor_to_py(p.input, false);
    out["output"] = tensor_to_py(p.output, false);
    py::list weights;
    for (auto& w : p.weights) weights.append(tensor_to_py(w, true));
    out["weights"] = weights;
    py::dict sizes;
    for (auto& [k, v] : p.sizes) sizes[py::int_(k)] = v;
    out["sizes"] = sizes;
    out["free_dims"] = p.free_dims;
    py::list steps;
    for (auto& s : p.steps) steps.append(step_to_py(s));
    out["steps"] = steps;
    out["flops"] = static_cast<int64_t>(p.flops);
    out["params"] = static_cast<int64_t>(p.params);
    out["peak_elements"] = static_cast<int64_t>(p.peak_elements);
    py::dict cost;
    cost["flops"] = p.cost.flops;
    cost["materialized"] = p.cost.materialized;
    cost["peak"] = p.cost.peak;
    cost["total"] = p.cost.total(profile);  // under the space's cost profile (cpu.eager: flops + 256 x materialized)
    cost["kernels"] = p.cost.kernels;
    cost["read"] = p.cost.read;
    cost["copy_read"] = p.cost.copy_read;
    cost["copied"] = p.cost.copied;
    cost["copy_kernels"] = p.cost.copy_kernels;
    cost["fused_copied"] = p.cost.fused_copied;
    cost["fused_copy_kernels"] = p.cost.fused_copy_kernels;
    cost["gradients"] = p.cost.gradients;
    cost["gradient_kernels"] = p.cost.gradient_kernels;
    out["cost"] = cost;
    py::dict expr;
    expr["iterators"] = p.iterator_sizes;
    expr["reductions"] = p.reduction_sizes;
    expr["mean"] = p.mean;
    py::list input;
    for (auto& e : p.input_expr) input.append(expr_to_py(e));
    expr["input"] = input;
    py::list wexprs;
    for (auto& w : p.weight_exprs) {
        py::list l;
        for (auto& e : w) l.append(expr_to_py(e));
        wexprs.append(l);
    }
    expr["weights"] = wexprs;
    out["expr"] = expr;
    return out;
}

std::vector<PyNode> wrap(const std::shared_ptr<const Space>& space, const std::vector<NodePtr>& nodes) {
    std::vector<PyNode> out;
    for (auto& n : nodes) out.push_back({space, n});
    return out;
}

// Option readers: the Python face validates options first (syno_automl/options.py); these keep the core's own
// invariants, so a direct call with a wrong type or range is an error naming the option, never a failed cast.
std::string type_name(py::handle v) { return py::str(py::type::of(v).attr("__name__")); }

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

Options make_options(const py::dict& kw) {
    Options o;
    for (auto [key, value] : kw) {
        if (!py::isinstance<py::str>(key)) throw std::invalid_argument("option names must be strings");
        std::string k = py::str(key);
        if (k == "max_depth") o.max_depth = int_option(k, value, 1, 30);
        else if (k == "max_reductions") o.max_reductions = int_option(k, value, 0, 64);
        else if (k == "max_weights") o.max_weights = int_option(k, value, 0, 64);
        else if (k == "min_weights") o.min_weights = int_option(k, value, 0, 64);
        else if (k == "max_shares") o.max_shares = int_option(k, value, 0, 64);
        else if (k == "max_primary_degree") o.max_primary_degree = int_option(k, value, 0, 8);
        else if (k == "max_coefficient_degree") o.max_coefficient_degree = int_option(k, value, 0, 8);
        else if (k == "max_size_variables") o.max_size_variables = int_option(k, value, 1, kMaxVariables);
        else if (k == "max_unfold_window") o.max_unfold_window = int_option(k, value, 1, 1 << 30);
        else if (k == "min_unfold_ratio") o.min_unfold_ratio = number_option(k, value, false);
        else if (k == "max_flops") o.max_flops = number_option(k, value, true);
        else if (k == "min_flops") o.min_flops = number_option(k, value, true);
        else if (k == "max_params") o.max_params = number_option(k, value, true);
        else if (k == "min_params") o.min_params = number_option(k, value, true);
        else if (k == "max_memory") o.max_memory = number_option(k, value, true);
        else if (k == "max_cost") o.max_cost = number_option(k, value, true);
        else if (k == "min_weight_params") o.min_weight_params = number_option(k, value, false);
        else if (k == "distance_pruning") o.distance_pruning = bool_option(k, value);
        else if (k == "flops_pruning") o.flops_pruning = bool_option(k, value);
        else if (k == "cost_pruning") o.cost_pruning = bool_option(k, value);
        else if (k == "canonical_rules") o.canonical_rules = bool_option(k, value);
        else if (k == "structural") o.structural = bool_option(k, value);
        else if (k == "cost_profile") {  // {"flop", "element", "launch", "fuse_views"}: syno_automl/cost_profile.py
            if (!py::isinstance<py::dict>(value)) throw std::invalid_argument("cost_profile must be a dict, got a " + type_name(value));
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
        else if (k == "prior_weight_io") o.prior_weight_io = bool_option(k, value);
        else if (k == "prior_outer_kinds") o.prior_outer_kinds = bool_option(k, value);
        else if (k == "prior_max_outer") o.prior_max_outer = number_option(k, value, false);
        else if (k == "prior_lowrank_size") o.prior_lowrank_size = int_option(k, value, 0, 1 << 30);
        else if (k == "prior_max_pooling") o.prior_max_pooling = number_option(k, value, false);
        else if (k == "channel_inputs") {
            if (!py::isinstance<py::list>(value) && !py::isinstance<py::tuple>(value))
                throw std::invalid_argument("channel_inputs must be a list of input positions, got a " + type_name(value));
            for (auto item : value) o.channel_inputs.push_back(int_option("channel_inputs[]", item, 0, 63));
        }
        else if (k == "max_counts") {
            if (!py::isinstance<py::dict>(value)) throw std::invalid_argument("max_counts must be a dict, got a " + type_name(value));
            for (auto [pk, pv] : value.cast<py::dict>()) {
                std::string name = py::str(pk);
                bool found = false;
                for (int p = 0; p < static_cast<int>(Prim::Count); ++p)
                    if (name == prim_name(static_cast<Prim>(p))) {
                        o.max_count[p] = pv.is_none() ? -1 : int_option("max_counts[" + echo(name) + "]", pv, -1, 64);
                        found = true;
                    }
                if (!found) throw std::invalid_argument("max_counts: unknown primitive " + echo(name));
            }
        } else throw std::invalid_argument("unknown option " + echo(k));
    }
    if (o.max_flops < o.min_flops) throw std::invalid_argument("max_flops is below min_flops: no operator can satisfy both");
    if (o.max_params < o.min_params) throw std::invalid_argument("max_params is below min_params: no operator can satisfy both");
    return o;
}

py::dict options_to_py(const Options& o) {
    py::dict d;
    d["max_depth"] = o.max_depth;
    d["max_reductions"] = o.max_reductions;
    d["max_weights"] = o.max_weights;
    d["min_weights"] = o.min_weights;
    d["max_shares"] = o.max_shares;
    d["max_primary_degree"] = o.max_primary_degree;
    d["max_coefficient_degree"] = o.max_coefficient_degree;
    d["max_size_variables"] = o.max_size_variables;
    d["max_unfold_window"] = o.max_unfold_window;
    d["min_unfold_ratio"] = o.min_unfold_ratio;
    d["min_weight_params"] = o.min_weight_params;
    d["distance_pruning"] = o.distance_pruning;
    d["flops_pruning"] = o.flops_pruning;
    d["cost_pruning"] = o.cost_pruning;
    d["canonical_rules"] = o.canonical_rules;
    py::dict profile;
    profile["flop"] = o.cost_profile.flop;
    profile["element"] = o.cost_profile.element;
    profile["read"] = o.cost_profile.read;
    profile["launch"] = o.cost_profile.launch;
    profile["fuse_views"] = o.cost_profile.fuse_views;
    profile["inference"] = o.cost_profile.inference;
    d["cost_profile"] = profile;
    d["prior_weight_io"] = o.prior_weight_io;
    d["prior_outer_kinds"] = o.prior_outer_kinds;
    d["prior_max_outer"] = o.prior_max_outer;
    d["prior_lowrank_size"] = o.prior_lowrank_size;
    d["prior_max_pooling"] = o.prior_max_pooling;
    d["channel_inputs"] = o.channel_inputs;
    py::dict counts;
    for (int p = 0; p < static_cast<int>(Prim::Count); ++p)
        counts[prim_name(static_cast<Prim>(p))] = o.max_count[p] < 0 ? py::object(py::none()) : py::object(py::int_(o.max_count[p]));
    d["max_counts"] = counts;
    return d;
}

// A spec string as UTF-8; a lone surrogate (not encodable) is a SpecError at its position, not pybind's
// "incompatible function arguments".
std::string spec_text(py::handle text) {
    if (!PyUnicode_Check(text.ptr())) throw std::invalid_argument("a spec must be a str, got a " + type_name(text));
    Py_ssize_t size = 0;
    if (const char* utf8 = PyUnicode_AsUTF8AndSize(text.ptr(), &size)) return std::string(utf8, static_cast<size_t>(size));
    PyErr_Clear();
    Py_ssize_t at = 0;
    for (Py_ssize_t n = PyUnicode_GetLength(text.ptr()); at < n; ++at) {
        Py_UCS4 c = PyUnicode_ReadChar(text.ptr(), at);
        if (c >= 0xD800 && c <= 0xDFFF) break;
    }
    std::string shown = py::str(py::repr(text));
    throw SpecError(shown.substr(1, shown.size() - 2), static_cast<size_t>(at), "expected text without lone surrogates");
}

constexpr int kMaxThreads = 1024;

// C++ errors as the exceptions of syno_automl.errors (looked up when raised: that module is always imported
// before this one, by the package's __init__).
void translate_errors(std::exception_ptr p) {
    auto raise = [](const char* name, const std::string& message, py::object position = py::none()) {
        py::object cls = py::module_::import("syno_automl.errors").attr(name);
        py::object error = cls(message);
        if (!position.is_none()) error.attr("position") = position;
        PyErr_SetObject(cls.ptr(), error.ptr());
    };
    try {
        if (p) std::rethrow_exception(p);
    } catch (const SpecError& e) {
        raise("SpecError", e.what(), py::int_(e.position));
    } catch (const std::invalid_argument& e) {
        raise("OptionError", e.what());
    } catch (const std::system_error& e) {
        raise("ResourceError", e.what());
    } catch (const std::logic_error& e) {
        raise("InternalError", e.what());
    }
}

std::vector<const Step*> node_path(const PyNode& n) { return n.node->path(); }

}  // namespace

PYBIND11_MODULE(_native, m) {
    m.doc() = "syno_automl native core: the pGraph operator space";
    py::register_exception_translator(&translate_errors);
    m.attr("SpecError") = py::module_::import("syno_automl.errors").attr("SpecError");
    m.def("default_options", [] { return options_to_py(Options{}); },
          "The core's option defaults (the one place they are written down).");
    m.attr("MAX_THREADS") = kMaxThreads;
    m.attr("ELEMENT_COST") = kElementCost;

    m.def("parse_shape", [](py::handle text) {
        py::list out;
        for (auto& d : parse_shape(spec_text(text))) {
            py::dict e;
            e["factors"] = d.factors;
            e["unordered"] = d.unordered;
            out.append(e);
        }
        return out;
    });
    m.def("parse_spec", [](py::handle text) {
        auto s = parse_spec(spec_text(text));
        py::dict d;
        d["name"] = s.name;
        d["value"] = s.value ? py::cast(*s.value) : py::none();
        d["max_occurrences"] = s.max_occurrences ? py::cast(*s.max_occurrences) : py::none();
        return d;
    });

    py::class_<Space, std::shared_ptr<Space>>(m, "Space")
        .def(py::init([](const std::string& in, const std::string& out, const std::vector<std::string>& primary,
                         const std::vector<std::string>& coefficients,
                         const std::vector<std::map<std::string, int64_t>>& mappings, const std::vector<std::string>& fixed,
                         const py::dict& options) {
                 return std::make_shared<Space>(in, out, primary, coefficients, mappings, make_options(options), fixed);
             }),
             py::arg("input_shape"), py::arg("output_shape"), py::arg("primary"), py::arg("coefficients"),
             py::arg("mappings"), py::arg("fixed"), py::arg("options"))
        .def("root", [](const std::shared_ptr<Space>& s) { return PyNode{s, s->root}; })
        .def("variables", [](const Space& s) {
            py::list out;
            for (size_t i = 0; i < s.ctx.variables.size(); ++i) {
                auto& v = s.ctx.variables[i];
                py::dict d;
                d["name"] = v.name;
                d["primary"] = v.primary;
                d["max_occurrences"] = v.max_occurrences;
                std::vector<int64_t> values;
                for (auto& val : s.ctx.valuations) values.push_back(val[i]);
                d["values"] = values;
                out.append(d);
            }
            return out;
        })
        .def_property_readonly("num_mappings", [](const Space& s) { return s.ctx.valuations.size(); })
        .def("budget_bounds", [](const Space& s) {
            BudgetBounds b = budget_bounds(s);
            py::dict d;
            d["min_flops"] = b.min_flops;
            d["max_flops"] = b.max_flops;
            d["min_params"] = b.min_params;
            d["max_params"] = b.max_params;
            d["min_memory"] = b.min_memory;
            d["min_cost"] = b.min_cost;
            return d;
        }, "Bounds every operator's totals obey (bounds.hpp): a budget outside them empties the space.")
        .def("sample",
             [](const std::shared_ptr<Space>& s, int count, uint64_t seed, int threads, uint64_t max_attempts,
                double time_limit, uint64_t budget, py::object prefix, int flops_bins) {
                 NodePtr from = prefix.is_none() ? s->root : prefix.cast<PyNode&>().node;
                 if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
                 if (threads > kMaxThreads)
                     throw std::invalid_argument("threads=" + std::to_string(threads) + " is more than " +
                                                 std::to_string(kMaxThreads));
                 if (count < 0) throw std::invalid_argument("count must be >= 0, got " + std::to_string(count));
                 if (flops_bins < 0 || flops_bins > 64)
                     throw std::invalid_argument("flops_bins must be in [0, 64], got " + std::to_string(flops_bins));
                 if (std::isnan(time_limit)) throw std::invalid_argument("time_limit must be a number, got nan");
                 if (time_limit > 1e9) time_limit = 0;  // no limit (a huge one would overflow the clock)
                 SampleResult r;
                 {
                     py::gil_scoped_release release;
                     r = sample(*s, from, count, seed, threads, max_attempts, time_limit, budget, flops_bins);
                 }
                 py::dict info;
                 info["stop_reason"] = r.stop_reason;
                 info["attempts"] = r.attempts;
                 info["failed"] = r.failed;
                 info["seconds"] = r.seconds;
                 info["threads"] = threads;
                 return py::make_tuple(wrap(s, r.operators), info);
             },
             py::arg("count"), py::arg("seed"), py::arg("threads"), py::arg("max_attempts"), py::arg("time_limit"),
             py::arg("budget") = 256, py::arg("prefix") = py::none(), py::arg("flops_bins") = 0)
        .def("enumerate",
             [](const std::shared_ptr<Space>& s, int max_depth, uint64_t max_nodes, double time_limit,
                uint64_t max_operators, py::object from) {
                 NodePtr start = from.is_none() ? s->root : from.cast<PyNode&>().node;
                 EnumerateResult r;
                 {
                     py::gil_scoped_release release;
                     r = enumerate(*s, start, max_depth, max_nodes, time_limit, max_operators);
                 }
                 py::dict info;
                 info["operators"] = wrap(s, r.operators);
                 info["operator_count"] = r.operator_count;
                 py::list hashes;
                 for (uint64_t h : r.operator_hashes) hashes.append(hex(h));
                 info["operator_hashes"] = hashes;
                 info["nodes_per_depth"] = r.nodes_per_depth;
                 info["finals_per_depth"] = r.finals_per_depth;
                 info["stop_reason"] = r.stop_reason;
                 info["seconds"] = r.seconds;
                 return info;
             },
             py::arg("max_depth"), py::arg("max_nodes"), py::arg("time_limit"), py::arg("max_operators"),
             py::arg("start") = py::none())
        .def("replay",
             [](const std::shared_ptr<Space>& s, const std::vector<std::string>& keys) {
                 std::vector<uint64_t> hashes;
                 for (auto& k : keys) {
                     uint64_t h = 0;  // a malformed key matches no child
                     if (k.size() == 16 && k.find_first_not_of("0123456789abcdef") == std::string::npos)
                         h = std::stoull(k, nullptr, 16);
                     hashes.push_back(h);
                 }
                 ReplayResult r;
                 {
                     py::gil_scoped_release release;
                     r = replay(*s, hashes);
                 }
                 py::dict info;
                 info["failed_step"] = r.failed_step;
                 info["invalid_size"] = r.invalid_size;
                 info["reason"] = r.reason;
                 return py::make_tuple(r.node ? py::cast(PyNode{s, r.node}) : py::none(), info);
             },
             py::arg("keys"))
        .def("stats", [](const Space& s) {
            py::dict out;
            py::list rules;
            for (int r = 0; r < RuleCount; ++r) {
                py::dict d;
                d["name"] = kRules[r].name;
                d["primitive"] = prim_name(kRules[r].prim);
                d["canonical"] = kRules[r].canonical;
                d["reason"] = kRules[r].reason;
                d["tried"] = s.rules.tried(static_cast<RuleId>(r));
                d["rejected"] = s.rules.rejected(static_cast<RuleId>(r));
                rules.append(d);
            }
            out["rules"] = rules;
            py::list depths;
            for (int d = 0; d < RuleCounters::kDepthSlots; ++d) {
                uint64_t expanded = s.depth_counters.expanded[d].load();
                if (!expanded) continue;
                py::dict e;
                e["depth"] = d;
                e["expanded"] = expanded;
                e["candidates"] = s.depth_counters.canonical[d].load() + s.rules.rejected_at_depth(d);
                e["canonical"] = s.depth_counters.canonical[d].load();
                e["rejected_by_rules"] = s.rules.rejected_at_depth(d);
                e["pruned"] = s.depth_counters.pruned[d].load();
                depths.append(e);
            }
            out["depths"] = depths;
            out["dims_interned"] = s.store.count();      // alive now (walks free theirs, dim.hpp)
            out["dims_created"] = s.store.created();     // ever
            out["dims_reclaimed"] = s.store.reclaimed();
            return out;
        });

    py::class_<PyNode>(m, "Node")
        .def_property_readonly("key", [](const PyNode& n) { return hex(n.node->hash); })
        .def_property_readonly("hash", [](const PyNode& n) { return n.node->hash; })
        .def_property_readonly("depth", [](const PyNode& n) { return n.node->depth; })
        .def_property_readonly("distance", [](const PyNode& n) { return n.node->distance; })
        .def_property_readonly("is_final", [](const PyNode& n) { return n.node->is_final(); })
        .def_property_readonly("flops_bound", [](const PyNode& n) { return n.node->flops_bound; })
        .def_property_readonly("flops_upper", [](const PyNode& n) {
            return n.node->is_final() ? n.node->final_info->flops : flops_upper(*n.space, *n.node);
        })
        .def_property_readonly("cost_bound", [](const PyNode& n) {
            return n.node->is_final() ? n.node->final_info->cost : cost_bound(*n.space, *n.node);
        })
        .def_property_readonly("primitive", [](const PyNode& n) {
            return n.node->parent ? std::string(prim_name(n.node->step.prim)) : std::string("ROOT");
        })
        .def_property_readonly("description", [](const PyNode& n) {
            return n.node->parent ? describe_step(*n.space, n.node->step) : std::string("ROOT");
        })
        .def("children", [](const PyNode& n) {
            std::vector<NodePtr> kids;
            {
                py::gil_scoped_release release;
                kids = *n.space->children(n.node);
            }
            return wrap(n.space, kids);
        })
        .def("path", [](const PyNode& n) {
            std::vector<std::string> keys;
            std::vector<const NodeState*> chain;
            for (const NodeState* x = n.node.get(); x->parent; x = x->parent.get()) chain.push_back(x);
            for (auto it = chain.rbegin(); it != chain.rend(); ++it) keys.push_back(hex((*it)->hash));
            return keys;
        })
        .def("steps", [](const PyNode& n) {
            std::vector<std::string> out;
            for (const Step* s : node_path(n)) out.push_back(describe_step(*n.space, *s));
            return out;
        })
        .def("primitive_counts", [](const PyNode& n) {
            py::dict d;
            for (int p = 0; p < static_cast<int>(Prim::Count); ++p)
                if (n.node->counts[p]) d[prim_name(static_cast<Prim>(p))] = n.node->counts[p];
            return d;
        })
        .def("describe", [](const PyNode& n) { return describe_operator(*n.space, *n.node); })
        .def("prior_violations", [](const PyNode& n) {
            if (!n.node->is_final()) throw std::invalid_argument("prior_violations is defined for final operators only");
            return prior_violations(*n.space, *n.node);
        }, "The space priors (by rule name) this operator violates under its space's prior options (priors.hpp).")
        .def("graphviz", [](const PyNode& n) { return graphviz(*n.space, *n.node); })
        .def("program", [](const PyNode& n, int valuation) {
            if (valuation < 0 || valuation >= static_cast<int>(n.space->ctx.valuations.size()))
                throw std::invalid_argument("mapping index " + std::to_string(valuation) + " is out of range (the space has " +
                                            std::to_string(n.space->ctx.valuations.size()) + " mappings)");
            return program_to_py(lower(*n.space, *n.node, valuation), n.space->options.cost_profile);
        })
        .def("totals", [](const PyNode& n) {
            if (!n.node->is_final()) throw std::invalid_argument("totals are defined for final operators only");
            py::dict d;
            d["flops"] = n.node->final_info->flops;
            d["params"] = n.node->final_info->params;
            d["memory"] = n.node->final_info->memory;
            d["cost"] = n.node->final_info->cost;
            d["cost_flops"] = n.node->final_info->cost_flops;
            d["materialized"] = n.node->final_info->materialized;
            d["peak"] = n.node->final_info->peak;
            return d;
        });
}
