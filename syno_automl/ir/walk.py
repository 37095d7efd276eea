"""The one step walker of the kernel IR: T's logical dims through the steps, and the backends' tables.

The running tensor T (docs/architecture.md §2) is tracked as a :class:`State`: its logical dims in order, and
which of them are *broadcast* (T is constant along them: an EXPAND not yet consumed; SPLIT, SHIFT and STRIDE
of a broadcast dim keep it broadcast, UNFOLD and a MERGE with a varying dim end it). Whether a backend stores a
broadcast dim is its own business; that T is constant along it is the program's semantics, decided here once.

:func:`advance` is the only place that knows how each step op changes T's dims, and it validates the step
(dims present or fresh, sizes consistent). :func:`walk` drives a :class:`StepBackend`: for each step it calls
``backend.STEPS[op](backend, transition)``; a backend may also claim a run of steps as a whole through
``PATTERNS`` (e.g. unfold + unfold + contract as one convolution).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar

from syno_automl.ir.errors import IRError
from syno_automl.ir.program import Contract, Expand, Merge, Program, Reduce, Shift, Split, Step, Stride, Tensor, Unfold

__all__ = ["State", "ContractInfo", "Transition", "StepBackend", "advance", "walk", "initial_state", "viewed_weight",
           "weight_program", "weight_order"]


@dataclass(frozen=True)
class State:
    dims: tuple[int, ...]
    bcast: frozenset[int] = frozenset()

    @property
    def stored(self) -> tuple[int, ...]:
        """The dims along which T varies (a backend's materialized tensor needs at least these)."""
        return tuple(d for d in self.dims if d not in self.bcast)

    def __str__(self) -> str:
        return "[" + ", ".join(f"{d}*" if d in self.bcast else str(d) for d in self.dims) + "]"


@dataclass(frozen=True)
class ContractInfo:
    """A contract step resolved against T: T after the rename, the weight, and the einsum's letter groups."""

    k: int
    weight: Tensor
    renamed: State        # T after the rename (same order, broadcast dims renamed too)
    out: tuple[int, ...]
    letters: tuple[int, ...]   # T's dims, then the weight's, then out's (each once)
    summed: tuple[int, ...]    # letters not in out
    factor_dims: tuple[int, ...]   # summed, broadcast in T and not in the weight: a constant factor Π|d|
    still_bcast: frozenset[int]    # out dims broadcast in T and not provided by the weight


#: the step class of a :class:`Transition` (a handler of STEPS[op] takes ``Transition[<op's step class>]``)
StepT = TypeVar("StepT", bound=Step)


@dataclass(frozen=True)
class Transition(Generic[StepT]):
    """One step as a backend sees it: the step, T before and after, and (contract only) the resolved einsum.
    ``Transition[Split]``: a transition of a split step (what ``STEPS["split"]`` receives: the walker dispatches on
    the step's op, and parse builds each op's own step class)."""

    index: int
    step: StepT
    pre: State
    post: State
    contract: ContractInfo | None = None


class StepBackend:
    """A consumer of the steps. ``STEPS`` maps every op of STEP_OPS to ``handler(self, transition)``;
    ``PATTERNS`` maps a tuple of ops to ``handler(self, transitions) -> bool`` (True: handled, the single-step
    handlers are skipped for those steps; False: they run as usual). ``finish(state)`` runs after the last step."""

    STEPS: ClassVar[Mapping[str, Callable]] = {}
    PATTERNS: ClassVar[Mapping[tuple[str, ...], Callable]] = {}

    def finish(self, state: State) -> None:  # noqa: B027 - optional hook
        pass


def initial_state(program: Program) -> State:
    return State(tuple(program.input.dims))


def _need(state: State, d: int) -> None:
    if d not in state.dims:
        raise IRError(f"dim {d} is not in T {state}")


def _fresh(state: State, d: int, *allowed: int) -> None:
    if d in state.dims and d not in allowed:
        raise IRError(f"dim {d} is already in T {state}")


def _size(program: Program, d: int) -> int:
    try:
        return program.sizes[d]
    except KeyError:
        raise IRError(f"dim {d} has no size in the program") from None


def _replace(dims: tuple[int, ...], d: int, new: tuple[int, ...]) -> tuple[int, ...]:
    i = dims.index(d)
    return dims[:i] + tuple(new) + dims[i + 1:]


def _split(p: Program, s: State, st: Split) -> State:
    d, (a, b) = st.src, st.dst
    _need(s, d)
    if a == b:
        raise IRError(f"split {d}: dst dims must differ")
    _fresh(s, a, d)
    _fresh(s, b, d)
    if _size(p, a) * _size(p, b) != _size(p, d):
        raise IRError(f"split {d} ({_size(p, d)}) into {a} ({_size(p, a)}) x {b} ({_size(p, b)}): sizes do not match")
    bc = (s.bcast - {d}) | {a, b} if d in s.bcast else s.bcast
    return State(_replace(s.dims, d, (a, b)), bc)


def _merge(p: Program, s: State, st: Merge) -> State:
    (a, b), d = st.src, st.dst
    _need(s, a)
    _need(s, b)
    if a == b:
        raise IRError(f"merge: src dims must differ ({a})")
    _fresh(s, d, a, b)
    if _size(p, a) * _size(p, b) != _size(p, d):
        raise IRError(f"merge {a} ({_size(p, a)}) x {b} ({_size(p, b)}) into {d} ({_size(p, d)}): sizes do not match")
    dims = _replace(tuple(x for x in s.dims if x != b), a, (d,))
    both = a in s.bcast and b in s.bcast
    return State(dims, (s.bcast - {a, b}) | ({d} if both else set()))


def _rename(s: State, d: int, e: int) -> State:
    return State(_replace(s.dims, d, (e,)), (s.bcast - {d}) | {e} if d in s.bcast else s.bcast)


def _shift(p: Program, s: State, st: Shift) -> State:
    _need(s, st.src)
    _fresh(s, st.dst, st.src)
    if _size(p, st.src) != _size(p, st.dst):
        raise IRError(f"shift {st.src} -> {st.dst}: sizes differ")
    return _rename(s, st.src, st.dst)


def _stride(p: Program, s: State, st: Stride) -> State:
    _need(s, st.src)
    _fresh(s, st.dst, st.src)
    if st.stride < 1:
        raise IRError(f"stride {st.stride} < 1")
    n, e = _size(p, st.src), _size(p, st.dst)
    if e != -(-n // st.stride):  # ceil: T[::s] (native programs have s dividing |src|)
        raise IRError(f"stride {st.src} -> {st.dst} by {st.stride}: |{st.dst}| = {e}, but |{st.src}| = {n} "
                      f"keeps ceil({n} / {st.stride}) = {-(-n // st.stride)}")
    return _rename(s, st.src, st.dst)


def _unfold(p: Program, s: State, st: Unfold) -> State:
    d, (m, w), k = st.src, st.dst, st.window
    _need(s, d)
    if m == w:
        raise IRError(f"unfold {d}: dst dims must differ")
    _fresh(s, m, d)
    _fresh(s, w, d)
    if k < 1 or k % 2 == 0:
        raise IRError(f"unfold window {k} must be odd")
    if _size(p, w) != k:
        raise IRError(f"unfold window dim {w} has size {_size(p, w)} != window {k}")
    if _size(p, m) != _size(p, d):
        raise IRError(f"unfold main dim {m} ({_size(p, m)}) differs in size from src {d} ({_size(p, d)})")
    # zero padding makes T vary along (m, w) even when it was constant along d
    return State(_replace(s.dims, d, (m, w)), s.bcast - {d})


def _expand(p: Program, s: State, st: Expand) -> State:
    _fresh(s, st.dst)
    _size(p, st.dst)
    return State(s.dims + (st.dst,), s.bcast | {st.dst})


def _reduce(p: Program, s: State, st: Reduce) -> State:
    _need(s, st.src)
    return State(tuple(x for x in s.dims if x != st.src), s.bcast - {st.src})


def resolve_contract(p: Program, s: State, st: Contract) -> ContractInfo:
    if not 0 <= st.weight < len(p.weights):
        raise IRError(f"contract: no weight {st.weight} (the program has {len(p.weights)})")
    ren = st.renaming
    for src, dst in ren.items():
        _need(s, src)
        if _size(p, dst) != _size(p, src):
            raise IRError(f"contract: rename {src} -> {dst} changes the size ({_size(p, src)} -> {_size(p, dst)})")
    dims = tuple(ren.get(d, d) for d in s.dims)
    if len(set(dims)) != len(dims):
        raise IRError(f"contract: rename {ren} makes T's dims {list(dims)} collide")
    bcast = frozenset(ren.get(d, d) for d in s.bcast)
    w = viewed_weight(p, st.weight)
    if len(set(st.out)) != len(st.out):
        raise IRError(f"contract: duplicate dims in out {list(st.out)}")
    for d in st.out:
        if d not in dims and d not in w.dims:
            raise IRError(f"contract: out dim {d} is in neither T {list(dims)} nor w{st.weight} {list(w.dims)}")
    letters = tuple(dict.fromkeys(dims + w.dims + st.out))
    summed = tuple(d for d in letters if d not in st.out)
    factor = tuple(d for d in summed if d in bcast and d not in w.dims)
    still = frozenset(d for d in st.out if d in bcast and d not in w.dims)
    return ContractInfo(st.weight, w, State(dims, bcast), tuple(st.out), letters, summed, factor, still)


# each handler takes its op's step class (parse builds the step class from the op; the walker looks the handler up
# by that op): a per-key type that a dict's type cannot say, hence Any for the step
ADVANCE: dict[str, Callable[[Program, State, Any], State]] = {
    "split": _split, "merge": _merge, "shift": _shift, "stride": _stride, "unfold": _unfold,
    "expand": _expand, "reduce": _reduce,
    "contract": lambda p, s, st: State(st.out, resolve_contract(p, s, st).still_bcast),
}


def viewed_weight(program: Program, k: int) -> Tensor:
    """Weight k as its contract step reads it: the parameter with its ``views`` applied (validated like T's
    steps; a weight is never broadcast). Without views, the weight itself."""
    w = program.weights[k]
    if not w.views:
        return w
    s = State(tuple(w.dims))
    for i, st in enumerate(w.views):
        try:
            s = ADVANCE[st.op](program, s, st)
        except IRError as e:
            raise IRError(f"weights[{k}].views[{i}] ({st.text()}): {e}") from e
    return Tensor(s.dims, tuple(_size(program, d) for d in s.dims), w.fan_in)


def weight_program(program: Program, k: int) -> Program:
    """Weight k's views as a program of their own (input: the parameter, output: the viewed weight), so a step
    backend emits them with its ordinary step table."""
    w = program.weights[k]
    viewed = viewed_weight(program, k)
    return Program(Tensor(w.dims, w.shape), program.weights, Tensor(viewed.dims, viewed.shape), program.sizes,
                   w.views, dtype=program.dtype)


def weight_order(program: Program) -> list[int]:
    """The weights with views, each after the weights its views contract with (emit them in this order)."""
    done: list[int] = []

    def visit(k: int, seen: tuple[int, ...]) -> None:
        if k in done:
            return
        if k in seen:
            raise IRError(f"weights[{k}].views: a cycle of weight contractions through {list(seen)}")
        for v in program.weights[k].views:
            if isinstance(v, Contract):
                if not 0 <= v.weight < len(program.weights):
                    raise IRError(f"weights[{k}].views: no weight {v.weight}")
                visit(v.weight, seen + (k,))
        done.append(k)

    for k in range(len(program.weights)):
        visit(k, ())
    return [k for k in done if program.weights[k].views]


def advance(program: Program, state: State, step: StepT, index: int = 0) -> Transition[StepT]:
    """T after ``step`` (validated), as a :class:`Transition`."""
    info = resolve_contract(program, state, step) if isinstance(step, Contract) else None
    post = State(info.out, info.still_bcast) if info is not None else ADVANCE[step.op](program, state, step)
    return Transition(index, step, state, post, info)


def check_end(program: Program, state: State) -> None:
    if sorted(state.dims) != sorted(program.output.dims):
        raise IRError(f"after the last step T has dims {list(state.dims)}, output wants {list(program.output.dims)}")


def walk(program: Program, backend: StepBackend | None = None) -> State:
    """Run the steps through ``backend`` (None: validate only). Errors name the step: ``step i (text): ...``."""
    steps = program.steps
    state = initial_state(program)
    i = 0
    while i < len(steps):
        handled = False
        for ops, handler in (backend.PATTERNS.items() if backend is not None else ()):
            if tuple(st.op for st in steps[i:i + len(ops)]) != ops:
                continue
            trs, s = [], state
            try:
                for j in range(len(ops)):
                    trs.append(advance(program, s, steps[i + j], i + j))
                    s = trs[-1].post
            except IRError:
                break  # the single-step path reports it, with the step named
            if handler(backend, trs):
                state, i, handled = s, i + len(ops), True
                break
        if handled:
            continue
        step = steps[i]
        try:
            tr = advance(program, state, step, i)
            if backend is not None:
                backend.STEPS[step.op](backend, tr)
        except (IRError, ValueError) as e:
            raise IRError(f"step {i} ({step.text()}): {e}") from e
        state = tr.post
        i += 1
    check_end(program, state)
    if backend is not None:
        backend.finish(state)
    return state
