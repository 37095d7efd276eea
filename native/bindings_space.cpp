// The Space class: a space built from its specs and options (make_options, bindings_options.cpp), its variables
// and bounds, and its walks (sample, enumerate, replay: the GIL released) and their statistics.
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <thread>

#include "bindings.hpp"
#include "bounds.hpp"

namespace syno::bindings {

void bind_space(py::module_& m) {
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
}

}  // namespace syno::bindings
