"""The PyTorch generator as a step backend over the IR walker: one handler per step op (``TorchGen.STEPS``).

The walker (syno_automl.ir.walk) decides T's logical dims and which are broadcast (T constant along them);
here a broadcast dim stays *virtual* (not stored in the tensor ``t``) until a MERGE with a stored dim, an UNFOLD
or the end needs it stored (``unsqueeze`` + ``expand``, still a view). Contractions are emitted by
codegen/torch_contract.py. Positions ``p`` in the emitted code are positions in the *stored* tensor.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from syno_automl.codegen.torch_contract import emit_contract, emit_conv
from syno_automl.ir import Program, State, StepBackend, Transition, walk, weight_order, weight_program
from syno_automl.ir.errors import IRError
from syno_automl.ir.program import Contract, Expand, Merge, Reduce, Shift, Split, Stride, Unfold

__all__ = ["TorchGen"]


class TorchGen(StepBackend):
    """Emits the body of ``forward`` (``self.lines``) for a program walked by ``ir.walk``."""

    def __init__(self, program: Program) -> None:
        self.p = program
        self.free = set(program.free_dims)
        self.dims: list[int] = list(program.input.dims)
        self.virtual: set[int] = set()
        self.lines: list[str] = []

    # -- helpers ----------------------------------------------------------------------------------------
    def emit(self, line: str) -> None:
        self.lines.append(line)

    def size(self, d: int) -> int:
        return self.p.sizes[d]

    def group_size(self, ds: Iterable[int]) -> str:
        """Π|d| as code, ``-1`` when a run-time sized dim is among them."""
        return "-1" if any(d in self.free for d in ds) else str(math.prod(self.size(d) for d in ds))

    def weight_name(self, k: int) -> str:
        """Weight k as its contraction reads it: the parameter, or its viewed copy made in ``weight_lines``."""
        return f"w{k}" if self.p.weights[k].views else f"self.w{k}"

    def phys(self) -> list[int]:
        return [d for d in self.dims if d not in self.virtual]

    def ppos(self, d: int) -> int:
        return self.phys().index(d)

    def set_state(self, state: State) -> None:
        self.dims, self.virtual = list(state.dims), set(state.bcast)

    def describe(self) -> str:
        return str(State(tuple(self.dims), frozenset(self.virtual)))

    def materialize(self, ds) -> None:
        ds = [d for d in self.dims if d in ds and d in self.virtual]
        if not ds:
            return
        for d in ds:  # in logical order, so each unsqueeze position is final
            if d in self.free:
                raise IRError(f"broadcast dim {d} is free (run-time sized): cannot materialize it")
            self.virtual.discard(d)
            self.emit(f"t = t.unsqueeze({self.ppos(d)})")
        shape = ["-1"] * len(self.phys())
        for d in ds:
            shape[self.ppos(d)] = str(self.size(d))
        self.emit(f"t = t.expand({', '.join(shape)})  # materialize broadcast dims {ds}")

    def begin(self, tr: Transition) -> None:
        self.emit(f"# {tr.step.text()}")

    def end(self, tr: Transition) -> None:
        self.set_state(tr.post)
        self.emit(f"# T dims {self.describe()}")

    # -- steps ------------------------------------------------------------------------------------------
    def split(self, tr: Transition[Split]) -> None:
        self.begin(tr)
        d, (a, b) = tr.step.src, tr.step.dst
        if d not in self.virtual:
            sa, sb = self.size(a), self.size(b)
            shape = f"(-1, {sb})" if a in self.free else f"({sa}, -1)" if b in self.free else f"({sa}, {sb})"
            self.emit(f"t = t.unflatten({self.ppos(d)}, {shape})")
        self.end(tr)

    def merge(self, tr: Transition[Merge]) -> None:
        self.begin(tr)
        a, b = tr.step.src
        if not (a in self.virtual and b in self.virtual):
            self.materialize([a, b])
            phys = self.phys()
            order = [x for x in phys if x != b]
            order.insert(order.index(a) + 1, b)
            if order != phys:
                self.emit(f"t = t.permute({', '.join(str(phys.index(x)) for x in order)})")
            pa = order.index(a)
            self.emit(f"t = t.flatten({pa}, {pa + 1})")
        self.end(tr)

    def shift(self, tr: Transition[Shift]) -> None:
        self.begin(tr)
        if tr.step.src not in self.virtual:  # out[e] = in[(e + 1) mod n]
            self.emit(f"t = torch.roll(t, -1, {self.ppos(tr.step.src)})")
        self.end(tr)

    def stride(self, tr: Transition[Stride]) -> None:
        self.begin(tr)
        if tr.step.src not in self.virtual:  # out[e] = in[e * s]
            self.emit(f"t = t[{':, ' * self.ppos(tr.step.src)}::{tr.step.stride}]")
        self.end(tr)

    def unfold(self, tr: Transition[Unfold]) -> None:
        self.begin(tr)
        d, k = tr.step.src, tr.step.window
        self.materialize([d])
        p, nd, h = self.ppos(d), len(self.phys()), k // 2
        expr = "t"
        if h:
            pad = ", ".join(["0, 0"] * (nd - 1 - p) + [f"{h}, {h}"])
            expr = f"F.pad(t, ({pad}))"
        expr += f".unfold({p}, {k}, 1)"  # out[m, w] = in[m + w - k//2], zero outside
        if p + 1 != nd:
            expr += f".movedim(-1, {p + 1})"
        self.emit(f"t = {expr}")
        self.end(tr)

    def expand(self, tr: Transition[Expand]) -> None:
        self.begin(tr)
        if tr.step.dst in self.free:
            raise IRError(f"expand of a free (run-time sized) dim {tr.step.dst} is not supported")
        self.end(tr)

    def reduce(self, tr: Transition[Reduce]) -> None:
        self.begin(tr)
        d, mean = tr.step.src, tr.step.mean
        if d in self.virtual:
            n = self.size(d)
            if not mean and n != 1:
                self.emit(f"t = t * {n}  # sum over broadcast dim {d}")
        else:
            self.emit(f"t = t.{'mean' if mean else 'sum'}({self.ppos(d)})")
        self.end(tr)

    def contract(self, tr: Transition[Contract]) -> None:
        self.begin(tr)
        assert tr.contract is not None  # advance resolves every contract step
        emit_contract(self, tr.contract)
        self.end(tr)

    def conv(self, trs: list[Transition]) -> bool:
        return emit_conv(self, trs)

    def shift_stride(self, trs: list[Transition]) -> bool:
        """SHIFT d -> e then STRIDE e -> f by s >= 2 with |e| = |f| * s: ``out[f] = in[(f * s + 1) mod n] =
        in[f * s + 1]`` (f * s + 1 <= n - s + 1 < n), one offset slice (a view) instead of a roll that copies T.
        The planner (native/plan.cpp) puts a roll right before the stride of its dim so this applies."""
        sh: Transition[Shift]
        st: Transition[Stride]
        sh, st = trs
        d, e = sh.step.src, sh.step.dst
        if st.step.src != e or st.step.stride < 2 or d in self.virtual:
            return False
        if self.size(st.step.dst) * st.step.stride != self.size(e):
            return False
        self.begin(sh)
        self.emit(f"# {st.step.text()}")
        self.emit(f"t = t[{':, ' * self.ppos(d)}1::{st.step.stride}]  # roll by -1 then stride")
        self.end(st)
        return True

    STEPS = {"split": split, "merge": merge, "shift": shift, "stride": stride, "unfold": unfold, "expand": expand,
             "reduce": reduce, "contract": contract}
    # tried in this order at each step, as native/cost.cpp does: two unfolds make a conv2d before one a conv1d
    PATTERNS = {("unfold", "unfold", "contract"): conv, ("unfold", "contract"): conv, ("shift", "stride"): shift_stride}

    def weight_lines(self) -> list[str]:
        """The planner's views of each weight (``Tensor.views``), emitted with this same step table on the
        parameter: ``w{k} = <views of self.w{k}>``. They run before T's steps (they do not depend on x)."""
        lines: list[str] = []
        for k in weight_order(self.p):
            w = self.p.weights[k]
            sub = TorchGen(weight_program(self.p, k))
            walk(sub.p, sub)
            lines += [f"# w{k} viewed before its contraction: dims {list(w.dims)}", f"t = self.w{k}", *sub.lines,
                      f"w{k} = t"]
        return lines

    def finish(self, state: State) -> None:
        out = list(self.p.output.dims)
        self.materialize(list(self.virtual))
        phys = self.phys()
        if phys != out:
            self.emit(f"t = t.permute({', '.join(str(phys.index(d)) for d in out)})")
