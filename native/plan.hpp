// The lowering planner: reorders a lowered program's view steps so that each does only the needed work,
// without changing what the program computes or its FLOPs (docs/architecture.md §2, "Planner").
#pragma once

namespace syno {

struct Program;

// Within each run of view steps between two reduce/contract steps, a stable list schedule over the steps'
// data dependencies: selections (stride) first, then reshapes (split, merge, expand), then rolls (shift), then
// expansions (unfold), so a roll or an unfold copies the smallest tensor and unfolds stay next to the
// contraction that may fuse them into a convolution. Reduce and contract steps do not move (FLOPs unchanged).
void plan(Program& program);

}  // namespace syno
