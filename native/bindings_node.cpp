// The Node class (a node of a space, final ones being operators): its identity, children and path, its
// descriptions, and the program it lowers to (lower.hpp) as the dict Python reads (syno_automl/ir).
#include <stdexcept>

#include "bindings.hpp"
#include "bounds.hpp"
#include "describe.hpp"
#include "lower.hpp"
#include "priors.hpp"

namespace syno::bindings {

namespace {

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
    d["op"] = step_op_name(s.op);
    switch (s.op) {
        case StepOp::Split:
        case StepOp::Unfold:
            d["src"] = s.src[0];
            d["dst"] = s.dst;
            break;
        case StepOp::Merge:
            d["src"] = s.src;
            d["dst"] = s.dst[0];
            break;
        case StepOp::Shift:
        case StepOp::Stride:
            d["src"] = s.src[0];
            d["dst"] = s.dst[0];
            break;
        case StepOp::Expand: d["dst"] = s.dst[0]; break;
        case StepOp::Reduce:
            d["src"] = s.src[0];
            d["mean"] = s.mean;
            break;
        case StepOp::Contract: {
            d["weight"] = s.weight;
            py::dict rename;
            for (auto& [a, b] : s.rename) rename[py::int_(a)] = b;
            d["rename"] = rename;
            d["out"] = s.out;
            break;
        }
    }
    if (s.op == StepOp::Unfold) d["window"] = s.window;
    if (s.op == StepOp::Stride) d["stride"] = s.stride;
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

std::vector<const Step*> node_path(const PyNode& n) { return n.node->path(); }

}  // namespace

void bind_node(py::module_& m) {
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

}  // namespace syno::bindings
