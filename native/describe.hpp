// Human-readable text for steps and operators, and the Graphviz DOT drawing of an operator (input, weights,
// primitives, output, with a legend).
#pragma once
#include <string>

#include "space.hpp"

namespace syno {

std::string describe_step(const Space& space, const Step& step);
std::string describe_operator(const Space& space, const NodeState& node);
std::string graphviz(const Space& space, const NodeState& node);

}  // namespace syno
