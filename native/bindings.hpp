// The parts of the pybind11 module syno_automl._native (bindings.cpp holds PYBIND11_MODULE and the error
// translation), one file per what it binds: bindings_options.cpp (the options table), bindings_spec.cpp (spec
// parsing), bindings_space.cpp (Space), bindings_node.cpp (Node, and the programs it lowers to).
#pragma once
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "space.hpp"

namespace syno::bindings {

namespace py = pybind11;

// A node of a space, with the space that owns its coordinates (kept alive as long as the node).
struct PyNode {
    std::shared_ptr<const Space> space;
    NodePtr node;
};

// Most threads sample() may start (also _native.MAX_THREADS).
constexpr int kMaxThreads = 1024;

std::string hex(uint64_t h);  // a node hash as its key: 16 hex digits
std::string type_name(py::handle v);
std::vector<PyNode> wrap(const std::shared_ptr<const Space>& space, const std::vector<NodePtr>& nodes);

// bindings_options.cpp: a dict of options (as the Python face passes them) to Options, checking each one's type
// and range (an error naming the option, never a failed cast), and back.
Options make_options(const py::dict& kw);
py::dict options_to_py(const Options& o);

void bind_options(py::module_& m);  // default_options, option_table, option_ranges
void bind_specs(py::module_& m);    // parse_shape, parse_spec
void bind_space(py::module_& m);    // Space
void bind_node(py::module_& m);     // Node

}  // namespace syno::bindings
