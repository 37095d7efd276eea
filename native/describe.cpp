#include "describe.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

namespace syno {

namespace {

std::string sizes(const Space& space, const std::vector<const Dim*>& dims) {
    std::string out;
    for (const Dim* d : dims) {
        if (!out.empty()) out += ", ";
        out += space.ctx.to_string(d->size);
    }
    return out;
}

}  // namespace

std::string describe_step(const Space& space, const Step& s) {
    const auto& ctx = space.ctx;
    switch (s.prim) {
        case Prim::Reduce: return "REDUCE " + ctx.to_string(s.param);
        case Prim::Merge: return "MERGE [" + sizes(space, s.produced) + "] -> " + sizes(space, s.consumed);
        case Prim::Split: return "SPLIT " + sizes(space, s.produced) + " -> [" + sizes(space, s.consumed) + "]";
        case Prim::Shift: return "SHIFT " + sizes(space, s.consumed);
        case Prim::Stride: return "STRIDE " + sizes(space, s.produced) + " by " + ctx.to_string(s.param);
        case Prim::Unfold:
            return "UNFOLD " + sizes(space, s.produced) + " -> [" + sizes(space, s.consumed) + "]";
        case Prim::Expand: return "EXPAND " + sizes(space, s.consumed);
        case Prim::Contraction: {
            std::string inner, outer;
            for (const Dim* d : s.consumed) {
                bool is_outer = false;
                for (const Dim* e : s.expanded) is_outer |= e->a == d;
                std::string& into = is_outer ? outer : inner;
                if (!into.empty()) into += ", ";
                into += ctx.to_string(d->size);
            }
            return "CONTRACTION share [" + inner + "] outer [" + outer + "]";
        }
        case Prim::Finalize: return "FINALIZE";
        default: return "?";
    }
}

std::string describe_operator(const Space& space, const NodeState& node) {
    std::ostringstream os;
    auto path = node.path();
    os << "Operator " << path.size() - (node.is_final() ? 1 : 0) << " primitives (forward order):";
    for (auto it = path.rbegin(); it != path.rend(); ++it)
        if ((*it)->prim != Prim::Finalize) os << "\n  " << describe_step(space, **it);
    if (node.is_final()) {
        os << "\n  input [";
        for (size_t i = 0; i < node.final_info->input.size(); ++i)
            os << (i ? ", " : "") << space.ctx.to_string(node.final_info->input[i]->size);
        os << "]";
        for (size_t w = 0; w < node.final_info->weights.size(); ++w)
            os << "  w" << w << " [" << sizes(space, node.final_info->weights[w]) << "]";
    }
    return os.str();
}

// The operator as a person reads it: data flows from the input tensor (top) through the primitives to the output
// tensor (bottom). A coordinate d is an edge from the primitive that computes it (going forward: the search step
// that consumed it, or the input/weight tensor holding it) to the primitive that uses it (the step that produced
// it, or the output for an output coordinate). Parallel edges are merged, their labels listing the sizes.
namespace {

constexpr const char* kInputColor = "#dbe9f6";
constexpr const char* kWeightColor = "#fde2c4";
constexpr const char* kOutputColor = "#d5ecd4";

// What each primitive does, read forward (input to output): the legend's rows.
const char* prim_meaning(Prim p) {
    switch (p) {
        case Prim::Reduce: return "sums the coordinate out (averages it when no weight uses it)";
        case Prim::Split: return "reshapes one coordinate into two (outer, inner)";
        case Prim::Merge: return "flattens two coordinates into one";
        case Prim::Shift: return "rolls the coordinate by one";
        case Prim::Stride: return "keeps every s-th entry";
        case Prim::Unfold: return "sliding window (zero-padded): main coordinate and window";
        case Prim::Expand: return "broadcasts along a new coordinate";
        case Prim::Contraction:
            return "multiplies by a weight over its SHAREd coordinates, summing the reduced ones; "
                   "outer: only in the weight";
        default: return "";
    }
}

std::string html_escape(const std::string& s) {
    std::string out;
    for (char c : s) {
        if (c == '&') out += "&amp;";
        else if (c == '<') out += "&lt;";
        else if (c == '>') out += "&gt;";
        else if (c == '"') out += "&quot;";
        else out += c;
    }
    return out;
}

std::string dot_quoted(const std::string& s) {
    std::string out = "\"";
    for (char c : s) {
        if (c == '"' || c == '\\') out += '\\';
        if (c == '\n') out += "\\n";
        else out += c;
    }
    return out + "\"";
}

std::string join_sizes(const Space& space, const std::vector<Size>& sizes) {
    std::string out;
    for (const Size& s : sizes) out += (out.empty() ? "" : ", ") + space.ctx.to_string(s);
    return out;
}

std::string step_label(const Space& space, const Step& s, int weight) {
    const auto& ctx = space.ctx;
    switch (s.prim) {
        case Prim::Reduce: return "REDUCE " + ctx.to_string(s.param);
        case Prim::Stride: return "STRIDE by " + ctx.to_string(s.param);
        case Prim::Unfold:
            return s.consumed.size() == 2 ? "UNFOLD window " + ctx.to_string(s.consumed[1]->size) : "UNFOLD";
        case Prim::Contraction: {
            std::vector<Size> shared, outer;
            for (const Dim* d : s.consumed) {
                bool is_outer = false;
                for (const Dim* e : s.expanded) is_outer |= e->a == d;
                (is_outer ? outer : shared).push_back(d->size);
            }
            std::string label = "CONTRACTION with w" + std::to_string(weight) + "\nSHARE " +
                                (shared.empty() ? std::string("none (outer product)") : join_sizes(space, shared));
            if (!outer.empty()) label += "\nouter " + join_sizes(space, outer);
            return label;
        }
        default: return prim_name(s.prim);
    }
}

}  // namespace

std::string graphviz(const Space& space, const NodeState& node) {
    std::vector<const Step*> forward;  // the primitives in forward order (input to output)
    for (const Step* s : node.path())
        if (s->prim != Prim::Finalize) forward.push_back(s);
    std::reverse(forward.begin(), forward.end());
    std::map<const Dim*, std::string> consumer_of, producer_of;  // search-direction roles, as node names
    std::map<const Dim*, int> weight_of;                           // a weight coordinate -> its weight
    std::vector<const Dim*> dims;                                  // every coordinate, first seen first
    std::set<const Dim*> seen;
    auto note = [&](const Dim* d) { if (seen.insert(d).second) dims.push_back(d); };
    std::ostringstream nodes;
    int weights = 0;
    std::vector<Prim> kinds;
    for (size_t i = 0; i < forward.size(); ++i) {
        const Step& s = *forward[i];
        std::string name = "p" + std::to_string(i);
        int weight = s.prim == Prim::Contraction ? weights++ : -1;
        nodes << "  " << name << " [class=\"primitive\", label=" << dot_quoted(step_label(space, s, weight)) << "];\n";
        if (std::find(kinds.begin(), kinds.end(), s.prim) == kinds.end()) kinds.push_back(s.prim);
        for (const Dim* d : s.consumed) consumer_of.emplace(d, name), note(d);
        for (const Dim* d : s.produced) {
            producer_of.emplace(d, name), note(d);
            if (d->is(DimKind::ShareR)) weight_of.emplace(d, weight);
        }
    }
    for (const Dim* d : node.frontier) note(d);

    // Tensors: the input (its spec shape), the weights (layout order when final), the output.
    std::vector<std::vector<const Dim*>> weight_dims(weights);
    if (node.is_final()) weight_dims = node.final_info->weights;
    else
        for (const Dim* d : node.frontier)
            if (weight_of.count(d)) weight_dims[weight_of[d]].push_back(d);
    std::vector<Size> in_shape, out_shape = space.output;
    if (node.is_final())
        for (const InputDim& d : space.input) in_shape.push_back(d.size);
    else
        for (const Dim* d : node.frontier)
            if (!weight_of.count(d)) in_shape.push_back(d->size);
    std::ostringstream os;
    os << "digraph operator {\n  graph [rankdir=TB, fontname=\"Helvetica\", labelloc=b, labeljust=l, nodesep=0.4];\n"
       << "  node [fontname=\"Helvetica\", shape=ellipse];\n  edge [fontname=\"Helvetica\", fontsize=10];\n";
    os << "  x [class=\"input\", shape=box, style=filled, fillcolor=\"" << kInputColor << "\", label="
       << dot_quoted(std::string(node.is_final() ? "input x" : "input x (not final yet)") + "\n[" +
                 join_sizes(space, in_shape) + "]") << "];\n";
    for (int w = 0; w < weights; ++w) {
        std::vector<Size> shape;
        for (const Dim* d : weight_dims[w]) shape.push_back(d->size);
        os << "  w" << w << " [class=\"weight\", shape=box, style=filled, fillcolor=\"" << kWeightColor
           << "\", label=" << dot_quoted("weight w" + std::to_string(w) + "\n[" + join_sizes(space, shape) + "]") << "];\n";
    }
    os << nodes.str();
    os << "  y [class=\"output\", shape=box, peripheries=2, style=filled, fillcolor=\"" << kOutputColor
       << "\", label=" << dot_quoted("output y\n[" + join_sizes(space, out_shape) + "]") << "];\n";

    // Edges, merged per (from, to) in first-seen order.
    std::vector<std::pair<std::string, std::string>> order;
    std::map<std::pair<std::string, std::string>, std::vector<Size>> labels;
    auto edge = [&](const std::string& from, const std::string& to, const Size& size) {
        auto key = std::make_pair(from, to);
        if (!labels.count(key)) order.push_back(key);
        labels[key].push_back(size);
    };
    for (int i : space.fixed_inputs) edge("x", "y", space.input[i].size);  // the batch: passes straight through
    for (const Dim* d : dims) {
        std::string from = consumer_of.count(d) ? consumer_of[d]
                           : weight_of.count(d) ? "w" + std::to_string(weight_of[d])
                           : std::find(node.frontier.begin(), node.frontier.end(), d) != node.frontier.end() ? "x"
                           : "";
        std::string to = producer_of.count(d) ? producer_of[d] : d->is(DimKind::Iterator) ? "y" : "";
        if (!from.empty() && !to.empty()) edge(from, to, d->size);  // else an outer SHARE's data side: none
    }
    for (size_t i = 0; i < forward.size(); ++i)
        if (forward[i]->prim == Prim::Reduce) os << "  p" << i << " -> y [style=dashed, label=\"reduced\"];\n";
    for (const auto& key : order)
        os << "  " << key.first << " -> " << key.second << " [label=" << dot_quoted(join_sizes(space, labels[key]))
           << "];\n";

    // The legend, as the graph's label (no node of its own: the operator stays one connected graph).
    os << "  label=<<TABLE BORDER=\"0\" CELLBORDER=\"1\" CELLSPACING=\"0\" CELLPADDING=\"3\">"
       << "<TR><TD COLSPAN=\"2\"><B>Legend</B> (data flows top to bottom)</TD></TR>";
    const std::pair<std::string, std::string> rows[] = {
        {std::string("<TD BGCOLOR=\"") + kInputColor + "\">input x [shape]</TD>", "the operator's input tensor"},
        {std::string("<TD BGCOLOR=\"") + kWeightColor + "\">weight w<I>k</I> [shape]</TD>",
         "a learned weight, in its layout order"},
        {std::string("<TD BGCOLOR=\"") + kOutputColor + "\">output y [shape]</TD>", "the operator's output tensor"},
        {"<TD>edge label</TD>", "the sizes of the coordinates it carries"},
    };
    for (const auto& [cell, meaning] : rows) os << "<TR>" << cell << "<TD ALIGN=\"LEFT\">" << meaning << "</TD></TR>";
    for (Prim p : kinds)
        os << "<TR><TD>" << prim_name(p) << "</TD><TD ALIGN=\"LEFT\">" << html_escape(prim_meaning(p)) << "</TD></TR>";
    os << "</TABLE>>;\n}\n";
    return os.str();
}

}  // namespace syno
