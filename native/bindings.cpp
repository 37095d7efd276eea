// pybind11 module syno_automl._native. Every C++ error surfaces as a precise Python exception of
// syno_automl.errors (all under SynoError): SpecError for malformed specs, OptionError for other invalid
// arguments, ResourceError when a thread cannot start, InternalError for a broken invariant (a bug); long calls
// release the GIL. What it binds is in the bindings_*.cpp files (bindings.hpp).
#include <cstdio>
#include <system_error>

#include "bindings.hpp"
#include "cost.hpp"

namespace syno::bindings {

std::string hex(uint64_t h) {
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
    return buf;
}

std::string type_name(py::handle v) { return py::str(py::type::of(v).attr("__name__")); }

std::vector<PyNode> wrap(const std::shared_ptr<const Space>& space, const std::vector<NodePtr>& nodes) {
    std::vector<PyNode> out;
    for (auto& n : nodes) out.push_back({space, n});
    return out;
}

namespace {

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

}  // namespace

}  // namespace syno::bindings

PYBIND11_MODULE(_native, m) {
    using namespace syno::bindings;
    m.doc() = "syno_automl native core: the pGraph operator space";
    py::register_exception_translator(&translate_errors);
    m.attr("SpecError") = py::module_::import("syno_automl.errors").attr("SpecError");
    m.attr("MAX_THREADS") = kMaxThreads;
    m.attr("ELEMENT_COST") = syno::kElementCost;
    bind_options(m);  // bindings_options.cpp
    bind_specs(m);    // bindings_spec.cpp
    bind_space(m);    // bindings_space.cpp
    bind_node(m);     // bindings_node.cpp
}
