// Human-readable text for steps and operators, and Graphviz DOT of an operator's coordinate graph.
#pragma once
#include <string>

#include "space.hpp"

namespace syno {

std::string describe_step(const Space& space, const Step& step);
std::string describe_operator(const Space& space, const NodeState& node);
std::string graphviz(const Space& space, const NodeState& node);

}  // namespace syno
