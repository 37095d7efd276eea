// pybind11 module syno_automl._native. Every C++ error surfaces as a Python exception (SpecError is a
// ValueError; other invalid input is ValueError; internal errors are RuntimeError); long calls release the GIL.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdio>
#include <thread>

#include "describe.hpp"
#include "lower.hpp"
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

py::dict tensor_to_py(const ProgramTensor& t, bool with_fan_in) {
    py::dict d;
    d["dims"] = t.dims;
    d["shape"] = t.shape;
    if (with_fan_in) d["fan_in"] = t.fan_in;
    return d;
}

py::dict program_to_py(const Program& p) {
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
    for (auto& s : p.steps) {
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
        steps.append(d);
    }
    out["steps"] = steps;
    out["flops"] = static_cast<int64_t>(p.flops);
    out["params"] = static_cast<int64_t>(p.params);
    out["peak_elements"] = static_cast<int64_t>(p.peak_elements);
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

Options make_options(const py::dict& kw) {
    Options o;
    for (auto [key, value] : kw) {
        std::string k = py::str(key);
        if (k == "max_depth") o.max_depth = value.cast<int>();
        else if (k == "max_reductions") o.max_reductions = value.cast<int>();
        else if (k == "max_weights") o.max_weights = value.cast<int>();
        else if (k == "min_weights") o.min_weights = value.cast<int>();
        else if (k == "max_shares") o.max_shares = value.cast<int>();
        else if (k == "max_primary_degree") o.max_primary_degree = value.cast<int>();
        else if (k == "max_coefficient_degree") o.max_coefficient_degree = value.cast<int>();
        else if (k == "max_size_variables") o.max_size_variables = value.cast<int>();
        else if (k == "max_unfold_window") o.max_unfold_window = value.cast<int>();
        else if (k == "min_unfold_ratio") o.min_unfold_ratio = value.cast<double>();
        else if (k == "max_flops") o.max_flops = value.cast<double>();
        else if (k == "min_flops") o.min_flops = value.cast<double>();
        else if (k == "max_params") o.max_params = value.cast<double>();
        else if (k == "min_params") o.min_params = value.cast<double>();
        else if (k == "max_memory") o.max_memory = value.cast<double>();
        else if (k == "min_weight_params") o.min_weight_params = value.cast<double>();
        else if (k == "distance_pruning") o.distance_pruning = value.cast<bool>();
        else if (k == "flops_pruning") o.flops_pruning = value.cast<bool>();
        else if (k == "canonical_rules") o.canonical_rules = value.cast<bool>();
        else if (k == "max_counts") {
            for (auto [pk, pv] : value.cast<py::dict>()) {
                std::string name = py::str(pk);
                bool found = false;
                for (int p = 0; p < static_cast<int>(Prim::Count); ++p)
                    if (name == prim_name(static_cast<Prim>(p))) { o.max_count[p] = pv.cast<int>(); found = true; }
                if (!found) throw std::invalid_argument("max_counts: unknown primitive '" + name + "'");
            }
        } else throw std::invalid_argument("unknown option '" + k + "'");
    }
    if (o.max_depth < 1 || o.max_depth > 30) throw std::invalid_argument("max_depth must be in [1, 30]");
    if (o.max_flops < o.min_flops) throw std::invalid_argument("max_flops is below min_flops: no operator can satisfy both");
    if (o.max_params < o.min_params) throw std::invalid_argument("max_params is below min_params: no operator can satisfy both");
    return o;
}

std::vector<const Step*> node_path(const PyNode& n) { return n.node->path(); }

}  // namespace

PYBIND11_MODULE(_native, m) {
    m.doc() = "syno_automl native core: the pGraph operator space";
    py::register_exception<SpecError>(m, "SpecError", PyExc_ValueError);

    m.def("parse_shape", [](const std::string& text) {
        py::list out;
        for (auto& d : parse_shape(text)) {
            py::dict e;
            e["factors"] = d.factors;
            e["unordered"] = d.unordered;
            out.append(e);
        }
        return out;
    });
    m.def("parse_spec", [](const std::string& text) {
        auto s = parse_spec(text);
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
        .def("sample",
             [](const std::shared_ptr<Space>& s, int count, uint64_t seed, int threads, uint64_t max_attempts,
                double time_limit, uint64_t budget, py::object prefix) {
                 NodePtr from = prefix.is_none() ? s->root : prefix.cast<PyNode&>().node;
                 if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
                 SampleResult r;
                 {
                     py::gil_scoped_release release;
                     r = sample(*s, from, count, seed, threads, max_attempts, time_limit, budget);
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
             py::arg("budget") = 256, py::arg("prefix") = py::none())
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
            out["dims_interned"] = s.store.count();
            return out;
        });

    py::class_<PyNode>(m, "Node")
        .def_property_readonly("key", [](const PyNode& n) { return hex(n.node->hash); })
        .def_property_readonly("hash", [](const PyNode& n) { return n.node->hash; })
        .def_property_readonly("depth", [](const PyNode& n) { return n.node->depth; })
        .def_property_readonly("distance", [](const PyNode& n) { return n.node->distance; })
        .def_property_readonly("is_final", [](const PyNode& n) { return n.node->is_final(); })
        .def_property_readonly("flops_bound", [](const PyNode& n) { return n.node->flops_bound; })
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
        .def("graphviz", [](const PyNode& n) { return graphviz(*n.space, *n.node); })
        .def("program", [](const PyNode& n, int valuation) {
            if (valuation < 0 || valuation >= static_cast<int>(n.space->ctx.valuations.size()))
                throw std::invalid_argument("mapping index " + std::to_string(valuation) + " is out of range (the space has " +
                                            std::to_string(n.space->ctx.valuations.size()) + " mappings)");
            return program_to_py(lower(*n.space, *n.node, valuation));
        })
        .def("totals", [](const PyNode& n) {
            if (!n.node->is_final()) throw std::invalid_argument("totals are defined for final operators only");
            py::dict d;
            d["flops"] = n.node->final_info->flops;
            d["params"] = n.node->final_info->params;
            d["memory"] = n.node->final_info->memory;
            return d;
        });
}
