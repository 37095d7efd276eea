#include "describe.hpp"

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

std::string graphviz(const Space& space, const NodeState& node) {
    std::ostringstream os;
    std::map<const Dim*, int> ids;
    std::vector<const Dim*> todo;
    auto id = [&](const Dim* d) {
        auto [it, inserted] = ids.emplace(d, static_cast<int>(ids.size()));
        if (inserted) todo.push_back(d);
        return it->second;
    };
    os << "digraph operator {\n  rankdir=TB;\n  node [shape=box, fontname=\"Helvetica\"];\n";
    std::vector<const Dim*> top = node.frontier;
    for (const Dim* d : node.expansions) top.push_back(d);
    for (const Dim* d : top) id(d);
    std::set<const Dim*> done;
    while (!todo.empty()) {
        const Dim* d = todo.back();
        todo.pop_back();
        if (!done.insert(d).second) continue;
        std::string shape = d->is(DimKind::Iterator) ? "ellipse" : d->is(DimKind::Reduce) ? "diamond" : "box";
        std::string color = d->is(DimKind::ShareR) ? "lightblue" : "white";
        os << "  d" << ids[d] << " [label=\"" << kind_name(d->kind) << "\\n" << space.ctx.to_string(d->size)
           << "\", shape=" << shape << ", style=filled, fillcolor=" << color << "];\n";
        if (d->a) os << "  d" << ids[d] << " -> d" << id(d->a) << ";\n";
        if (d->b) os << "  d" << ids[d] << " -> d" << id(d->b) << " [style=dashed];\n";
    }
    for (const Dim* d : node.expansions) os << "  e" << ids[d] << " [label=\"EXPAND\", shape=point];\n  e" << ids[d] << " -> d" << ids[d] << ";\n";
    os << "}\n";
    return os.str();
}

}  // namespace syno
