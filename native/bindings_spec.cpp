// Spec parsing: parse_shape and parse_spec (size.hpp), for the Python face's checks.
#include <stdexcept>

#include "bindings.hpp"

namespace syno::bindings {

namespace {

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

}  // namespace

void bind_specs(py::module_& m) {
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
}

}  // namespace syno::bindings
