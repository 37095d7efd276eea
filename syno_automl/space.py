"""The operator space: OperatorSpace, Node and Operator, a thin façade over the native core.

Example:
    >>> from syno_automl import OperatorSpace
    >>> space = OperatorSpace("[N, C_in, H, W]", "[N, C_out, H, W]",
    ...                       primary=["N: 0", "C_in: 2", "C_out: 2", "H: 2", "W: 2"],
    ...                       coefficients=["k=3: 2"],
    ...                       mappings=[{"N": 2, "C_in": 4, "C_out": 4, "H": 8, "W": 8}], max_depth=6)
    >>> ops = space.sample(3, seed=0)
    >>> len({op.hash for op in ops})
    3
"""
from __future__ import annotations

import json
import os
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from syno_automl import _native
from syno_automl.cost_profile import resolve as resolve_profile
from syno_automl.echo import shown
from syno_automl.errors import (
    EmptySpaceError,
    MappingIndexError,
    NotAChildError,
    NotFinalError,
    NothingSampledWarning,
    OperatorFormatError,
    OptionTypeError,
    ValuationError,
)
from syno_automl.options import (
    check_built_space,
    check_enumerate_arguments,
    check_mappings,
    check_replay_path,
    check_sample_arguments,
    check_space_arguments,
)

FORMAT = "syno-operator/1"
#: FLOPs bins sample() spreads its draws over by default (when the space has a finite max_flops): 0, uniform
#: descents, as stratified draws cost about 5x more time per operator today (docs/priors.md)
FLOPS_BINS = 0
MappingLike = "int | Mapping[str, int] | None"


@dataclass(frozen=True)
class SampleReport:
    """Why a sample() call stopped and what it cost."""

    requested: int
    returned: int
    stop_reason: str  # "count", "exhausted", "attempts", "time"
    attempts: int
    failed: int
    seconds: float
    threads: int


@dataclass
class Enumeration:
    """Result of walking the whole canonical space (or as much as the limits allowed)."""

    operators: list[Operator]
    operator_count: int
    nodes_per_depth: list[int]
    finals_per_depth: list[int]
    stop_reason: str  # "exhausted", "limit", "time"
    seconds: float
    hashes: set[str] = field(default_factory=set)  # every operator found, also beyond max_operators


class OperatorSpace:
    """All canonical operators from `input_shape` to `output_shape` built from the Syno primitives.

    Budgets (`max_flops`, `max_params`, ...) are hard limits summed over the mappings (one mapping per
    placeholder). `seed` is the default seed of `sample`.
    """

    def __init__(
        self,
        input_shape: str,
        output_shape: str,
        primary: Sequence[str] = (),
        coefficients: Sequence[str] = (),
        mappings: Sequence[Mapping[str, int]] | None = None,
        *,
        max_depth: int = 8,
        max_flops: float | None = None,
        min_flops: float | None = None,
        max_params: float | None = None,
        min_params: float | None = None,
        max_memory: float | None = None,
        max_cost: float | None = None,
        cost_profile: Any = None,
        fixed: Sequence[str] = (),
        seed: int = 0,
        threads: int | None = None,
        **options: Any,
    ) -> None:
        budgets = {
            "max_flops": max_flops, "min_flops": min_flops, "max_params": max_params,
            "min_params": min_params, "max_memory": max_memory, "max_cost": max_cost,
        }
        # every argument checked once, here, with a message naming it (syno_automl/options.py)
        native_options = check_space_arguments(input_shape, output_shape, primary, coefficients,
                                               {"max_depth": max_depth, **budgets, **options}, seed, threads, fixed)
        # the target whose coefficients price the planned cost (max_cost, its pruning, total_cost); None: cpu.eager
        self.cost_profile = resolve_profile(cost_profile)
        if self.cost_profile is not None:
            native_options["cost_profile"] = self.cost_profile.native()
        self.input_shape = input_shape
        self.output_shape = output_shape
        self.primary = list(primary)
        self.coefficients = list(coefficients)
        self.mappings = check_mappings(mappings)
        self.fixed = list(fixed)
        self.seed = seed
        self.threads = threads or min(os.cpu_count() or 1, 8)
        self.max_depth = max_depth
        self.budgets = {k: native_options[k] for k in budgets if k in native_options}
        self.options = dict(options)
        self._native = _native.Space(
            input_shape, output_shape, self.primary, self.coefficients, self.mappings, self.fixed, native_options
        )
        self._budget_conflict = check_built_space(self._native, input_shape, output_shape, native_options,
                                                  self.budgets)  # why the budgets empty the space, if proven

    # -- structure -------------------------------------------------------------------------------------
    def config(self) -> dict[str, Any]:
        """JSON-serializable constructor arguments (enough to rebuild an equal space)."""
        return {
            "input_shape": self.input_shape, "output_shape": self.output_shape, "primary": self.primary,
            "coefficients": self.coefficients, "mappings": self.mappings, "fixed": self.fixed,
            "max_depth": self.max_depth, **self.budgets, **self.options,
            **({"cost_profile": self.cost_profile.to_dict()} if self.cost_profile is not None else {}),
        }

    def signature(self) -> dict[str, Any]:
        """What an operator's identity depends on: shapes and variable specs (not valuations or budgets)."""
        return {"input_shape": self.input_shape, "output_shape": self.output_shape,
                "primary": self.primary, "coefficients": self.coefficients, "fixed": self.fixed}

    def with_mappings(self, mappings: Sequence[Mapping[str, int]], keep_budgets: bool = False) -> OperatorSpace:
        """The same space over other valuations (budgets dropped unless asked: they were for the old ones)."""
        config = self.config()
        config["mappings"] = [dict(m) for m in mappings]
        if not keep_budgets:
            for k in self.budgets:
                config.pop(k, None)
        return OperatorSpace(**config, seed=self.seed, threads=self.threads)

    @property
    def variables(self) -> list[dict[str, Any]]:
        return self._native.variables()

    @property
    def num_mappings(self) -> int:
        return self._native.num_mappings

    def mapping(self, index: int) -> dict[str, int]:
        """The full valuation (every variable) of mapping `index`."""
        return {v["name"]: v["values"][index] for v in self.variables}

    def root(self) -> Node:
        return Node(self, self._native.root())

    # -- search ----------------------------------------------------------------------------------------
    def sample(
        self,
        count: int,
        seed: int | None = None,
        *,
        threads: int | None = None,
        time_limit: float = 60.0,
        max_attempts: int | None = None,
        budget: int = 64,
        prefix: Node | None = None,
        flops_bins: int = FLOPS_BINS,
    ) -> list[Operator]:
        """`count` distinct canonical operators (fewer if the space or a limit runs out: see `last_report`).

        With a finite `max_flops` and `flops_bins` > 0, draws are spread over that many log-uniform FLOPs bins
        from the floor (`min_flops`, else max_flops / 100) to `max_flops`, the least served bin first
        (native/sample.cpp); 0 draws uniformly over the tree, which piles up at the cheapest operators unless a
        FLOPs floor (syno_automl.priors) keeps them out.
        Deterministic for a seed, whatever `threads` is. Raises EmptySpaceError if no operator exists.
        """
        seed = self.seed if seed is None else seed
        check_sample_arguments(count, seed, threads, time_limit, max_attempts, budget, flops_bins)
        if count > 0 and self._budget_conflict:
            raise EmptySpaceError(self._budget_conflict)  # proven by a bound: no need to search
        attempts = max_attempts if max_attempts is not None else max(1000, 200 * count)
        nodes, info = self._native.sample(
            int(count), int(seed) & 0xFFFFFFFFFFFFFFFF, int(threads or self.threads), int(attempts),
            float(time_limit), int(budget),
            prefix._native if prefix is not None else None, int(flops_bins),
        )
        self.last_report = SampleReport(count, len(nodes), info["stop_reason"], info["attempts"], info["failed"],
                                        info["seconds"], info["threads"])
        if count > 0 and not nodes and info["stop_reason"] == "exhausted":
            raise EmptySpaceError(
                f"no operator exists from {self.input_shape} to {self.output_shape} within max_depth="
                f"{self.max_depth} and the budgets {self.budgets or '{}'}"
            )
        if count > 0 and not nodes and prefix is None and "max_cost" in self.budgets:
            # tiny layers: every operator's chain of steps may cost more than the one conv or matmul it replaces;
            # not proven (the search stopped early), but a user asking for operators gets none: say why
            profile = self.cost_profile.target if self.cost_profile is not None else "cpu.eager"
            raise EmptySpaceError(
                f"no operator found within max_cost={self.budgets['max_cost']:.6g} ({profile} cost) in "
                f"{info['attempts']} descents (stopped by {info['stop_reason']}): the cost budget leaves this space "
                f"empty or nearly so (typical of tiny layers, where any operator costs more than one convolution); "
                f"raise cost_ratio / max_cost, or pass cost_ratio=None to turn the cost budget off")
        # other budgets: a warning, not an error (none is proven impossible); below a prefix (an MCTS rollout) an
        # empty draw is routine
        if count > 0 and not nodes and prefix is None:
            warnings.warn(
                f"sample() found no operator in {info['attempts']} attempts ({info['seconds']:.1f} s, stopped by "
                f"{info['stop_reason']}): the budgets {self.budgets or '{}'} may leave none or very few; raise "
                f"them, max_attempts or time_limit", NothingSampledWarning, stacklevel=2)
        return [Operator(self, n) for n in nodes]

    def enumerate(self, max_depth: int | None = None, *, max_nodes: int = 10_000_000,
                  time_limit: float | None = 600.0, max_operators: int = 100_000,
                  start: Node | None = None) -> Enumeration:
        """Walks every canonical node (memoized by hash) and collects the distinct final operators.

        `max_depth` (1 to the space's max_depth; None: the space's) bounds the walk, `time_limit` (seconds > 0,
        None for no limit) and `max_nodes` stop it early (see `stop_reason`).

        Only the first `max_operators` become Operator objects; `hashes` holds every operator found, so
        counting or comparing spaces needs no objects (max_operators=0 keeps memory flat). The walk frees the
        coordinates of the subtrees it has left; returned operators (and `start`) keep theirs.
        """
        check_enumerate_arguments(max_depth, self.max_depth, max_nodes, time_limit, max_operators)
        if start is not None and (not isinstance(start, Node) or start.space is not self):
            raise OptionTypeError(f"start must be a Node of this space (from its root()), got {shown(start)}")
        info = self._native.enumerate(max_depth or self.max_depth, int(max_nodes),
                                      0.0 if time_limit is None else float(time_limit),  # the core's "no limit"
                                      int(max_operators), start._native if start is not None else None)
        ops = [Operator(self, n) for n in info["operators"]]
        return Enumeration(ops, info["operator_count"], info["nodes_per_depth"], info["finals_per_depth"],
                           info["stop_reason"], info["seconds"], set(info["operator_hashes"]))

    def stats(self) -> dict[str, Any]:
        """Rule counters (tried/rejected), per-depth canonical rates, interned coordinates.

        `dims_interned` counts the coordinates alive now (walks free theirs when done with a subtree, so it
        can drop after a walk), `dims_created` every coordinate ever interned, `dims_reclaimed` those freed.
        """
        s = self._native.stats()
        for d in s["depths"]:
            d["canonical_rate"] = d["canonical"] / d["candidates"] if d["candidates"] else 1.0
        return s

    def replay(self, path: Sequence[str]) -> Node:
        """Follows child keys from the root. Every step must be a canonical child by structure (the same at
        every valuation); its sizes must be positive integers under this space's mappings (ValuationError).
        Search-time filters (budgets, sizes >= 2, window limits) do not apply: they chose what to propose."""
        path = check_replay_path(path)
        node, info = self._structural().replay(path)
        if node is None:
            i = info["failed_step"]
            if info["invalid_size"]:
                raise ValuationError(f"step {i} {info['reason']}: the operator does not exist at these sizes")
            raise OperatorFormatError(f"step {i} (key {shown(path[i])}) {info['reason']}")
        return Node(self, node)

    def _structural(self) -> Any:
        """This space's twin that decides children by structure only (built once, on the first replay)."""
        if getattr(self, "_structural_native", None) is None:
            options = {"max_depth": self.max_depth, **self.options, "structural": True}
            # a replayed operator's native node lives here and prices its cost here: without the profile, a
            # cuda.compiled space's replayed operators were priced on cpu.eager (192,524x their layers' cost)
            if self.cost_profile is not None:
                options["cost_profile"] = self.cost_profile.native()
            self._structural_native = _native.Space(self.input_shape, self.output_shape, self.primary,
                                                    self.coefficients, self.mappings, self.fixed, options)
        return self._structural_native


class Node:
    """A search node: a frontier reached bottom-up from the output."""

    def __init__(self, space: OperatorSpace, native: Any) -> None:
        self.space = space
        self._native = native

    key = property(lambda self: self._native.key)
    depth = property(lambda self: self._native.depth)
    distance = property(lambda self: self._native.distance)
    is_final = property(lambda self: self._native.is_final)
    primitive = property(lambda self: self._native.primitive)
    description = property(lambda self: self._native.description)
    #: planned cost (Operator.total_cost) that every operator below is at least; a final node's own cost
    cost_bound = property(lambda self: self._native.cost_bound)
    #: FLOPs (summed over the mappings) that every operator below is at most (native/bounds.hpp); a final's own
    flops_upper = property(lambda self: self._native.flops_upper)

    @property
    def path(self) -> list[str]:
        return self._native.path()

    def children(self) -> list[Node]:
        return [Node(self.space, c) for c in self._native.children()]

    def apply(self, child: str | Node) -> Node:
        key = child.key if isinstance(child, Node) else child
        for c in self._native.children():
            if c.key == key:
                return Node(self.space, c)
        raise NotAChildError(f"{shown(key)} is not a child of node {self.key}")

    def to_operator(self) -> Operator:
        if not self.is_final:
            raise NotFinalError(f"only a final node is an operator (node {self.key} at depth {self.depth} is not)")
        return Operator(self.space, self._native)

    def __repr__(self) -> str:
        return f"Node(depth={self.depth}, distance={self.distance}, {self.description})"


class Operator:
    """A final canonical operator. Its `hash` is a stable 64-bit structural hash (16 hex digits)."""

    def __init__(self, space: OperatorSpace, native: Any) -> None:
        if not native.is_final:
            raise NotFinalError("an Operator needs a final node")
        self.space = space
        self._native = native

    @property
    def hash(self) -> str:
        return self._native.key

    @property
    def path(self) -> list[str]:
        return self._native.path()

    @property
    def depth(self) -> int:
        return self._native.depth

    @property
    def primitives(self) -> list[str]:
        """Readable primitives in search (bottom-up) order."""
        return [s for s in self._native.steps() if s != "FINALIZE"]

    def primitive_counts(self) -> dict[str, int]:
        return self._native.primitive_counts()

    def __str__(self) -> str:
        return self._native.describe()

    def __repr__(self) -> str:
        return f"Operator({self.hash}, depth={self.depth})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Operator) and other.hash == self.hash

    def __hash__(self) -> int:
        return int(self.hash, 16)

    # -- valuations ------------------------------------------------------------------------------------
    def _resolve(self, mapping: int | Mapping[str, int] | None) -> tuple[Operator, int]:
        """(an operator over a space holding `mapping`, the mapping's index there)."""
        if mapping is None:
            return self, 0
        if isinstance(mapping, int):
            if not 0 <= mapping < self.space.num_mappings:
                raise MappingIndexError(f"mapping index {mapping} out of range ({self.space.num_mappings} mappings)")
            return self, mapping
        wanted = dict(mapping)
        for i in range(self.space.num_mappings):
            full = self.space.mapping(i)
            if all(full.get(k) == v for k, v in wanted.items()):
                return self, i
        other = self.space.with_mappings([{**self.space.mapping(0), **wanted}])
        node = other.replay(self.path)
        return Operator(other, node._native), 0

    def program(self, mapping: int | Mapping[str, int] | None = None) -> dict[str, Any]:
        """The kernel IR for one valuation (docs/architecture.md §2)."""
        op, index = self._resolve(mapping)
        return op._native.program(index)

    def flops(self, mapping: int | Mapping[str, int] | None = None) -> int:
        return int(self.program(mapping)["flops"])

    def params(self, mapping: int | Mapping[str, int] | None = None) -> int:
        return int(self.program(mapping)["params"])

    def total_flops(self) -> float:
        """FLOPs summed over all the space's mappings (what the budgets limit)."""
        return self._native.totals()["flops"]

    def total_params(self) -> float:
        return self._native.totals()["params"]

    def cost(self, mapping: int | Mapping[str, int] | None = None, target: Any = None) -> dict[str, float]:
        """Cost of the planned program for one valuation (docs/architecture.md §2, "Cost"): ``flops`` computed,
        elements ``materialized`` and ``read``, ``kernels`` launched, ``peak`` (largest tensor, elements), the
        view copies among them, and ``total``: their price on ``target`` (syno_automl.cost_profile: a shipped
        target's name such as ``"cuda.compiled"``, a profile file's path or a CostProfile). Without a target, the
        space's profile prices them (what ``max_cost`` limits): for a space built without one, today's cost,
        flops + ELEMENT_COST x materialized. ``flops()`` stays the paper's metric."""
        counts = dict(self.program(mapping)["cost"])
        profile = resolve_profile(target)
        if profile is not None:
            counts["total"] = profile.total(counts)
        return counts

    def total_cost(self) -> float:
        """Cost summed over all the space's mappings, under the space's cost profile (what ``max_cost`` limits)."""
        return self._native.totals()["cost"]

    # -- artifacts -------------------------------------------------------------------------------------
    def graphviz(self) -> str:
        """DOT text of the coordinate graph (weights filled blue, reductions as diamonds)."""
        return self._native.graphviz()

    def to_module(self, mapping: int | Mapping[str, int] | None = None, contraction: str = "conv"):
        """A trainable torch.nn.Module computing this operator for one valuation (``contraction="matmul"``:
        contractions as mm/bmm, never a convolution; codegen/torch.py)."""
        from syno_automl.codegen.torch import build_module

        return build_module(self.program(mapping), class_name=f"Syno_{self.hash}", contraction=contraction)

    def to_source(self, mapping: int | Mapping[str, int] | None = None, contraction: str = "conv") -> str:
        """A standalone Python file (torch only) defining the module."""
        from syno_automl.codegen.torch import program_to_source

        header = f"Syno operator {self.hash}\n" + str(self)
        return program_to_source(self.program(mapping), class_name=f"Syno_{self.hash}", header=header,
                                 contraction=contraction)

    def to_tvm(self, mapping: int | Mapping[str, int] | None = None, target: str = "llvm"):
        """A compiled TVM kernel `kernel(x, *weights) -> numpy array` (weights as in to_module's parameters)."""
        from syno_automl.codegen.tvm import build_kernel

        return build_kernel(self.program(mapping), target=target)

    # -- serialization ---------------------------------------------------------------------------------
    def to_json(self) -> str:
        return json.dumps({
            "format": FORMAT, "hash": self.hash, "depth": self.depth, "space": self.space.signature(),
            "path": self.path, "primitives": self.primitives,
        }, indent=1)

    @classmethod
    def from_json(cls, space: OperatorSpace, text: str | bytes) -> Operator:
        """Loads and validates (plain JSON, no code execution): replays the path in `space`."""
        data = _parse_json(text)
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise OperatorFormatError(f"not a {FORMAT} document")
        path, expected = data.get("path"), data.get("hash")
        if not isinstance(path, list) or not all(isinstance(k, str) for k in path) or not isinstance(expected, str):
            raise OperatorFormatError("operator JSON needs a 'path' (list of keys) and a 'hash' (string)")
        for i, key in enumerate(path):  # before the core: pybind11 cannot take them (a TypeError)
            _check_text(key, f"'path' step {i}")
        _check_text(expected, "'hash'")
        if data.get("space") != space.signature():
            raise OperatorFormatError(
                f"operator was made in space {shown(data.get('space'))}, not in {space.signature()}")
        node = space.replay(path)
        if not node.is_final or node.key != expected:
            raise OperatorFormatError(f"path does not end at operator {expected} (got {node.key})")
        return cls(space, node._native)


def _check_text(value: str, field: str) -> None:
    """OperatorFormatError naming `field` when `value` is no text UTF-8 can encode: JSON's ``"\\udcff"`` escapes
    parse into a lone surrogate (half a UTF-16 pair), which no key or hash holds."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as e:
        raise OperatorFormatError(f"operator JSON's {field} holds a lone surrogate {value[e.start]!r} at character "
                                  f"{e.start} (half a UTF-16 pair: not text)") from None


def _parse_json(text: Any) -> Any:
    """json.loads with every failure as an OperatorFormatError saying what is wrong (no bare ValueError or
    RecursionError escapes: bad UTF-8, nesting, huge integers)."""
    if isinstance(text, (bytes, bytearray, memoryview)):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as e:
            raise OperatorFormatError(f"operator JSON is not valid UTF-8: byte {e.start} ({e.reason})") from None
    if not isinstance(text, str):
        raise OperatorFormatError(f"operator JSON must be a str or bytes, got a {type(text).__name__}")
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise OperatorFormatError(f"operator JSON does not parse: {e}") from None
    except RecursionError:
        raise OperatorFormatError("operator JSON is nested too deeply (an operator document has depth 3)") from None
    except ValueError as e:  # e.g. an integer of thousands of digits (Python's int_max_str_digits)
        raise OperatorFormatError(f"operator JSON holds an unreadable value: {e}") from None
