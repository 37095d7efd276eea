"""Monte-Carlo tree search over an OperatorSpace: pure statistics, no Optuna and no storage.

The tree is keyed by node keys and rebuilt from observations, one per evaluated operator: its path (child keys
from the root), its reward in [0, 1] and `leaf`, how many steps of the path were inside the tree when it was
proposed. Running evaluations are passed to `propose` and count as virtual loss (a visit with reward 0).

Selection is UCB1-tuned with progressive widening: a node visited N times may have ceil(widening * N**power)
visited children; the next child to reveal comes from a fixed seeded order. The first child outside the tree is
the leaf, and a rollout completes it to an operator with `space.sample(1, seed=derived, prefix=leaf)` (a probe of
`limits.probe_attempts` descents: none found, the leaf is dead), then 4, 16 completions while those found are
taken. Operators in `taken` (evaluated, running or queued) are never proposed. With `flops_bins` > 0 each rollout
draws from one of that many log-uniform FLOPs bands of the space's budget (chosen by the rollout's seed:
space.sample), so that rollouts do not pile up at the cheapest operators.

Everything is deterministic for (seed, decision number, observations, running, taken, dead): sums are kept in
fixed point, so the order observations arrive in does not matter; rollouts depend on (seed, leaf) only and are
memoized. `dead` holds the nodes earlier decisions found with nothing left below them (leaves whose rollout found
no completion not taken, subtrees all of whose children are dead): a decision walks around them, as it does around
the ones it finds itself, and returns these (`Proposal.dead`) for the caller to keep beside its observations (the
SynoSampler records them on the trial). A node once dead stays dead: `taken` only grows and rollouts are pure
functions. A node found dead only because the decision ran out of time or of sample requests is not returned.

The memoized rollouts are RolloutFacts (the completions' hashes and their paths below the leaf): a pure function
of (`facts_key`, leaf, count), so they can be stored and handed to another tree (`take_new_facts`, `learn`: the
SynoSampler keeps them on the trials) to spare it the rollouts, the expensive part of a decision, without changing
what it proposes. A completion is returned along the path the walk took to its leaf. For the same reason the next
decision's rollouts may be computed ahead, while the operator just proposed is evaluated (`prefetch`, whose thread
search/prefetch.py runs): a decision that finds them memoized takes milliseconds, and proposes what it would have
without them.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import math
import random
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from syno_automl.errors import EmptySpaceError, OptionError, SynoError
from syno_automl.options import check_int
from syno_automl.search import prefetch as _prefetch
from syno_automl.space import Node, Operator, OperatorSpace

__all__ = ["MCTS", "MCTSLimits", "Observation", "Proposal", "RolloutFact", "SearchExhaustedError", "derive_seed"]

_SCALE = 1 << 32  # rewards in fixed point: integer sums are exact and order-independent
_ROOT = ""


class SearchExhaustedError(EmptySpaceError):
    """Every operator of the space has been evaluated (or is being evaluated): nothing is left to propose."""


def derive_seed(*parts: object) -> int:
    """A 63-bit seed from any printable parts (stable across processes and platforms)."""
    digest = hashlib.blake2b(repr(parts).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") & ((1 << 63) - 1)


@dataclass(frozen=True)
class Observation:
    """One evaluated (or, with ``reward=None``, running) operator.

    Example:
        >>> Observation(("a", "b", "c"), 0.5, leaf=2).tree_path
        ('a', 'b')
    """

    path: tuple[str, ...]
    reward: float | None
    leaf: int | None = None  # steps of `path` inside the tree; None: the whole path (a seeded operator)

    @property
    def tree_path(self) -> tuple[str, ...]:
        return tuple(self.path if self.leaf is None else self.path[: self.leaf])


@dataclass(frozen=True)
class Proposal:
    """What `MCTS.propose` chose, and how much work it took."""

    operator: Operator
    leaf: int          # steps of operator.path inside the tree (store it with the observation)
    restarts: int      # walks that ended in an exhausted subtree before this one
    rollouts: int      # space.sample calls
    fallback: bool     # True when the tree was exhausted and a global sample was used
    dead: tuple[str, ...] = ()  # nodes this decision found dead that `propose`'s `dead` did not hold (in order)

    def running(self) -> Observation:
        """The proposed operator as a running evaluation (for the decisions taken while it is evaluated)."""
        return Observation(tuple(self.operator.path), None, self.leaf)


@dataclass(frozen=True)
class RolloutFact:
    """What ``space.sample(count, prefix=leaf)`` returned to a rollout: the completions (each its operator's hash
    and its path below the leaf) and whether they exhausted the leaf's subtree. A pure function of (the tree's
    `facts_key`, leaf, count): any tree with that key may use it instead of sampling.

    Example:
        >>> fact = RolloutFact("ab", 1, (("cd", ("ef", "cd")),), False)
        >>> RolloutFact.from_data(fact.to_data()) == fact
        True
    """

    leaf: str
    count: int
    completions: tuple[tuple[str, tuple[str, ...]], ...]
    exhausted: bool

    def to_data(self) -> list:
        """A JSON-serializable form (as a trial's system attr holds it)."""
        return [self.leaf, self.count, int(self.exhausted), [[h, list(suffix)] for h, suffix in self.completions]]

    @classmethod
    def from_data(cls, data: object) -> RolloutFact | None:
        """The fact of `to_data`'s form, or None when `data` is not one."""
        if not isinstance(data, (list, tuple)) or len(data) != 4:
            return None
        leaf, count, exhausted, completions = data
        if not (isinstance(leaf, str) and isinstance(count, int) and isinstance(completions, (list, tuple))):
            return None
        pairs: list[tuple[str, tuple[str, ...]]] = []
        for item in completions:
            if not (isinstance(item, (list, tuple)) and len(item) == 2):
                return None
            op_hash, suffix = item
            if not (isinstance(op_hash, str) and isinstance(suffix, (list, tuple))
                    and all(isinstance(k, str) for k in suffix)):
                return None
            pairs.append((op_hash, tuple(suffix)))
        return cls(leaf, count, tuple(pairs), bool(exhausted))


_Kid = tuple[str, bool, Node]  # a child: (key, is_final, node), read from the native node once


@dataclass(frozen=True)
class NodeStats:
    visits: int
    mean: float


# consecutive decisions that share the fallback's first draws (4 of them: one per decision in a run of fallbacks),
# and how many groups' draws a fallback reads before drawing more at once
_FALLBACK_GROUP = 4
_FALLBACK_AHEAD = 8


@dataclass(frozen=True)
class MCTSLimits:
    """How much work one `MCTS.propose` decision may do before it gives up on the tree (then samples the space).

    Attributes:
        max_restarts: walks from the root that may end in an exhausted subtree.
        max_rollout: the most completions one rollout asks of a leaf (1, then 4, ... up to this).
        max_sample_calls: space.sample requests (memoized ones included).
        rollout_attempts: the sampler's attempts per completion asked, when a rollout asks for more than one (up to
            4 completions' worth).
        probe_attempts: the sampler's attempts when a rollout asks for its first completion of a leaf. A leaf whose
            probe finds none is dead (completions too rare to find): at 1,000 trials most such probes found nothing
            in 48 attempts either, and they took half of a decision's time (docs/measurements).
        max_sample_seconds: wall time of new (not memoized) rollouts.
    """

    max_restarts: int = 2048
    max_rollout: int = 16
    max_sample_calls: int = 128
    rollout_attempts: int = 48
    probe_attempts: int = 16
    max_sample_seconds: float = 60.0


class MCTS:
    """UCT tree over `space`, fed with observations, proposing operators not yet taken.

    Example:
        >>> from syno_automl import OperatorSpace
        >>> space = OperatorSpace("[N, C_in]", "[N, C_out]", primary=["N: 0", "C_in: 2", "C_out: 2"],
        ...                       mappings=[{"N": 4, "C_in": 8, "C_out": 8}], max_depth=4)
        >>> tree = MCTS(space, seed=0)
        >>> first = tree.propose(decision=0)
        >>> tree.add(Observation(tuple(first.operator.path), 0.8, first.leaf))
        >>> second = tree.propose(decision=1, taken={first.operator.hash})
        >>> second.operator.hash != first.operator.hash
        True
    """

    def __init__(self, space: OperatorSpace, *, seed: int = 0, exploration: float = 1.0, widening: float = 1.0,
                 widening_power: float = 0.5, virtual_loss: int = 1, flops_bins: int = 0,
                 limits: MCTSLimits = MCTSLimits()) -> None:
        if exploration < 0 or not math.isfinite(exploration):
            raise OptionError(f"exploration must be a finite number >= 0, got {exploration}")
        if widening <= 0 or not 0 < widening_power <= 1:
            raise OptionError(f"progressive widening needs widening > 0 and 0 < widening_power <= 1, got "
                             f"{widening}, {widening_power}")
        if virtual_loss < 0:
            raise OptionError(f"virtual_loss must be >= 0 visits, got {virtual_loss}")
        check_int("flops_bins", flops_bins, 0, 64)  # as space.sample checks it, before the first rollout
        self.space = space
        self.seed = seed
        self.exploration = exploration
        self.widening = widening
        self.widening_power = widening_power
        self.virtual_loss = virtual_loss
        self.flops_bins = flops_bins
        self.limits = limits
        self._n: dict[str, int] = {}
        self._sum: dict[str, int] = {}
        self._sq: dict[str, int] = {}
        self._edges: dict[tuple[str, str], int] = {}
        self._observations = 0
        self._root: Node | None = None
        self._kids: dict[str, list[_Kid]] = {}
        self._deadline = math.inf
        self._samples: dict[tuple[str, int], RolloutFact] = {}  # (leaf, count) -> its completions
        self._ops: dict[str, Operator] = {}  # a completion's hash -> it, built (by hash: a fact's index is not stable)
        self._new_facts: list[RolloutFact] = []  # sampled since the last take_new_facts
        self._fallbacks: dict[tuple[int, int], tuple[list[Operator], bool]] = {}  # recent groups' global draws
        self._facts_key: str | None = None
        # one space.sample at a time among the trees sharing these caches (a prefetch runs in another thread; the
        # space's last_report is read after each call)
        self._sample_lock = threading.Lock()
        self._stop: threading.Event | None = None  # a prefetching snapshot's stop signal
        self._threads: int | None = None  # space.sample's threads (None: the space's; the same draws whatever it is)

    def fresh(self) -> MCTS:
        """A tree with the same options and no observations that shares this one's caches (children, rollouts)."""
        tree = MCTS(self.space, seed=self.seed, exploration=self.exploration, widening=self.widening,
                    widening_power=self.widening_power, virtual_loss=self.virtual_loss, flops_bins=self.flops_bins,
                    limits=self.limits)
        tree._root, tree._kids, tree._samples, tree._ops = self._root, self._kids, self._samples, self._ops
        tree._new_facts, tree._fallbacks, tree._sample_lock = self._new_facts, self._fallbacks, self._sample_lock
        tree._facts_key = self._facts_key
        return tree

    def prefetch(self, decision: int, running: Sequence[Observation], taken: Iterable[str],
                 stop: threading.Event, ahead: int = 1, *, dead: Iterable[str] = ()) -> threading.Thread:
        """Computes, in a thread (search.prefetch), the rollouts that `propose(decision, running, taken, dead)` would
        on a copy of the statistics now, then those of the `ahead` - 1 decisions after it (each with the operators
        proposed before it running, the nodes found dead before it dead); they are memoized (and reported by
        take_new_facts) as if sampled by this tree. Setting `stop` ends it at its next rollout not yet memoized (and
        at exit, see prefetch.stop_prefetches); it ends at a decision that samples the whole space (a fallback),
        having drawn that decision's group of 4 (not the 64 or 256 drawn when those are taken). What any decision
        proposes is unchanged: only how much of its sampling is already done."""
        tree = self.fresh()
        tree._n, tree._sum, tree._sq, tree._edges = dict(self._n), dict(self._sum), dict(self._sq), dict(self._edges)
        tree._observations, tree._stop = self._observations, stop
        tree._threads = 1  # beside the evaluation of a trial: one core
        return _prefetch.start(tree, decision, running, taken, dead, stop, ahead)

    # -- rollout facts ---------------------------------------------------------------------------------
    @property
    def facts_key(self) -> str:
        """What the rollouts depend on besides (leaf, count): the space, the seed, flops_bins, the sampling limits
        and this package's version. Trees with the same key compute the same RolloutFacts."""
        if self._facts_key is None:
            from syno_automl import __version__

            parts = [self.space.config(), self.seed, self.flops_bins, self.limits.rollout_attempts,
                     self.limits.probe_attempts, __version__]
            self._facts_key = f"{derive_seed('rollouts', json.dumps(parts, sort_keys=True, default=str)):016x}"
        return self._facts_key

    @property
    def dead_key(self) -> str:
        """What a node's death depends on besides `taken`: the rollouts (`facts_key`) and how many completions a
        rollout asks at most. Trees with the same key find the same nodes dead (Proposal.dead)."""
        return f"{self.facts_key}-{self.limits.max_rollout}"

    def take_new_facts(self) -> list[RolloutFact]:
        """The rollouts this tree (or a prefetch of it) sampled, not learned, since the last call."""
        facts = self._new_facts[:]
        del self._new_facts[: len(facts)]  # a prefetch may append meanwhile: those stay for the next call
        return facts

    def learn(self, facts: Iterable[RolloutFact]) -> None:
        """Memoizes rollouts computed by a tree of the same `facts_key` (the caller checks the key)."""
        for fact in facts:
            self._samples.setdefault((fact.leaf, fact.count), fact)

    # -- observations ----------------------------------------------------------------------------------
    def add(self, observation: Observation) -> None:
        """Back-propagates a finished evaluation along the in-tree part of its path."""
        self._update(observation, +1)

    def remove(self, observation: Observation) -> None:
        """Exactly undoes `add` (e.g. a failure that turned out to be a worker crash, later retried)."""
        self._update(observation, -1)

    def _update(self, observation: Observation, sign: int) -> None:
        if observation.reward is None:
            raise OptionError("a running evaluation is not an observation: pass it to propose(running=...)")
        reward = float(observation.reward)
        if not 0.0 <= reward <= 1.0:
            raise OptionError(f"rewards must be in [0, 1], got {reward}")
        fixed, fixed_sq = round(reward * _SCALE), round(reward * reward * _SCALE)
        keys = (_ROOT, *observation.tree_path)
        for key in keys:
            n = self._n.get(key, 0) + sign
            if n < 0:
                raise OptionError(f"removing an observation that was never added (node {key or 'root'})")
            self._n[key] = n
            self._sum[key] = self._sum.get(key, 0) + sign * fixed
            self._sq[key] = self._sq.get(key, 0) + sign * fixed_sq
        for edge in zip(keys, keys[1:]):
            self._edges[edge] = self._edges.get(edge, 0) + sign
        self._observations += sign

    def __len__(self) -> int:
        return self._observations

    def stats(self, path: Sequence[str] = ()) -> NodeStats:
        """Visits and mean reward of the node at `path` (the root for an empty path)."""
        key = path[-1] if path else _ROOT
        n = self._n.get(key, 0)
        return NodeStats(n, self._sum.get(key, 0) / (n * _SCALE) if n else 0.0)

    # -- proposing -------------------------------------------------------------------------------------
    def propose(self, decision: int, running: Iterable[Observation] = (), taken: Iterable[str] = (),
                dead: Iterable[str] = ()) -> Proposal:
        """The operator to evaluate next: deterministic for (seed, decision, observations, running, taken, dead).

        `dead`: nodes earlier decisions found dead (their Proposal.dead), never walked into. Raises
        SearchExhaustedError when every operator is taken.
        """
        taken = set(taken)
        v_nodes: dict[str, int] = {}
        v_edges: dict[tuple[str, str], int] = {}
        for obs in running:
            keys = (_ROOT, *obs.tree_path)
            for key in keys:
                v_nodes[key] = v_nodes.get(key, 0) + self.virtual_loss
            for edge in zip(keys, keys[1:]):
                v_edges[edge] = v_edges.get(edge, 0) + self.virtual_loss
        blocked = set(dead)
        # the nodes found dead here, in order, up to the first one only a limit (time, sample requests) blocked:
        # a node blocked after it may be so because of it
        learned: list[str] = []
        sure = True
        calls = [0]
        self._deadline = time.monotonic() + self.limits.max_sample_seconds
        restart = 0
        for restart in range(self.limits.max_restarts + 1):
            rng = random.Random(derive_seed(self.seed, "select", decision))  # the same stream on every restart
            leaf, depth, key = self._walk(rng, v_nodes, v_edges, taken, blocked)
            if leaf is None:  # the walk ended in a node with nothing left below it (now blocked)
                if sure:
                    learned.append(key)
                if depth == 0:
                    break  # the root itself
                continue
            if calls[0] >= self.limits.max_sample_calls:
                break
            operator, is_dead = self._rollout(leaf, taken, calls)
            if operator is not None:
                return Proposal(operator, depth, restart, calls[0], fallback=False, dead=tuple(learned))
            blocked.add(leaf.key)
            sure = sure and is_dead
            if sure:
                learned.append(leaf.key)
        operator = self._fallback(decision, taken, calls)
        return Proposal(operator, 0, restart, calls[0], fallback=True, dead=tuple(learned))

    def _root_node(self) -> Node:
        if self._root is None:
            self._root = self.space.root()
        return self._root

    def _children(self, key: str, node: Node) -> list[_Kid]:
        """Children in this tree's fixed reveal order (seeded, so progressive widening is reproducible)."""
        kids = self._kids.get(key)
        if kids is None:
            kids = sorted(((c.key, c.is_final, c) for c in node.children()),
                          key=lambda c: derive_seed(self.seed, "order", key, c[0]))
            self._kids[key] = kids
        return kids

    def _walk(self, rng: random.Random, v_nodes: dict[str, int], v_edges: dict[tuple[str, str], int],
              taken: set[str], blocked: set[str]) -> tuple[Node | None, int, str]:
        """Descends from the root to the first node outside the tree: (leaf, its depth, its key).

        A node found with nothing left below it is added to `blocked` and (None, its depth, its key) returned.
        """
        n_of, edges = self._n, self._edges
        node = self._root_node()
        key, final, depth = _ROOT, node.is_final, 0
        while True:
            if final:  # a final inside the tree (a seeded operator's path) is a leaf when not taken
                if (key or node.key) not in taken:
                    return node, depth, key
                blocked.add(key)
                return None, depth, key
            candidates = [c for c in self._children(key, node)
                          if c[0] not in blocked and not (c[1] and c[0] in taken)]
            if not candidates:
                blocked.add(key)
                return None, depth, key
            visits = n_of.get(key, 0) + v_nodes.get(key, 0)
            visited = [c for c in candidates if edges.get((key, c[0]), 0) + v_edges.get((key, c[0]), 0) > 0]
            allowed = max(1, math.ceil(self.widening * visits ** self.widening_power)) if visits else 1
            if len(visited) < allowed and len(visited) < len(candidates):
                child = next(c for c in candidates
                             if edges.get((key, c[0]), 0) + v_edges.get((key, c[0]), 0) == 0)
                if n_of.get(child[0], 0) + v_nodes.get(child[0], 0) == 0:
                    return child[2], depth + 1, child[0]  # expansion: the first node outside the tree
                # else: a transposition already in the tree through another parent; keep descending
            else:
                child = self._best(rng, key, visits, visited, v_nodes, v_edges)
            key, final, node = child
            depth += 1

    def _best(self, rng: random.Random, key: str, visits: int, visited: list[_Kid], v_nodes: dict[str, int],
              v_edges: dict[tuple[str, str], int]) -> _Kid:
        """UCB1-tuned: mean + c * sqrt(ln N / n * min(1/4, var + sqrt(2 ln N / n))); ties broken by `rng`."""
        log_n = math.log(max(visits, 1))
        best: list[_Kid] = []
        best_score = -math.inf
        for child in visited:
            ckey = child[0]
            n_edge = self._edges.get((key, ckey), 0) + v_edges.get((key, ckey), 0)
            n_node = self._n.get(ckey, 0) + v_nodes.get(ckey, 0)
            mean = self._sum.get(ckey, 0) / (n_node * _SCALE) if n_node else 0.0
            var = max(0.0, self._sq.get(ckey, 0) / (n_node * _SCALE) - mean * mean) if n_node else 0.25
            score = mean + self.exploration * math.sqrt(
                log_n / n_edge * min(0.25, var + math.sqrt(2.0 * log_n / n_edge)))
            if score > best_score:
                best, best_score = [child], score
            elif score == best_score:
                best.append(child)
        return best[0] if len(best) == 1 else best[rng.randrange(len(best))]

    def _sample(self, count: int, seed: int, prefix: Node | None, attempts: int) -> tuple[list[Operator], bool]:
        """(operators, whether the prefix's completions were exhausted); no completion at all -> ([], True). For the
        whole space (no prefix) that is SearchExhaustedError with the space's own reason (a budget that empties it)."""
        try:
            ops = self.space.sample(count, seed=seed, prefix=prefix, max_attempts=attempts, time_limit=600.0,
                                    flops_bins=self.flops_bins, threads=self._threads)
        except EmptySpaceError as e:
            if prefix is None:
                raise SearchExhaustedError(str(e)) from e
            return [], True
        return ops, self.space.last_report.stop_reason == "exhausted"

    @contextlib.contextmanager
    def _sampling(self) -> Iterator[None]:
        """Around a space.sample call: the lock the trees sharing these caches take in turn; a prefetch first waits
        for a timing to end (prefetch.Stopped when told to stop meanwhile), so that a decision never waits for the
        lock behind a prefetch that is waiting itself."""
        with _prefetch.rollout_slot(self._stop) if self._stop is not None else contextlib.nullcontext(), \
                self._sample_lock:
            yield

    def _completions_of(self, leaf: Node, count: int) -> RolloutFact | None:
        """`count` random completions of `leaf`: a pure function of (seed, leaf, count), hence memoized; None when
        the decision's time for new rollouts is up."""
        memo_key = (leaf.key, count)
        fact = self._samples.get(memo_key)
        if fact is not None:
            return fact
        if self._stop is not None and self._stop.is_set():
            raise _prefetch.Stopped
        if time.monotonic() > self._deadline:  # rare: a decision that keeps hitting new hard subtrees
            return None
        with self._sampling():
            fact = self._samples.get(memo_key)  # a prefetch may have sampled it meanwhile
            if fact is not None:
                return fact
            seed = derive_seed(self.seed, "rollout", leaf.key, count)
            attempts = self.limits.probe_attempts if count == 1 else self.limits.rollout_attempts * min(count, 4)
            ops, exhausted = self._sample(count, seed, leaf, attempts)
            depth = len(leaf.path)
            fact = RolloutFact(leaf.key, count, tuple((op.hash, tuple(op.path[depth:])) for op in ops), exhausted)
            for op in ops:
                self._ops[op.hash] = op
            self._samples[memo_key] = fact
            self._new_facts.append(fact)
        return fact

    def _completion(self, leaf: Node, fact: RolloutFact, index: int) -> Operator | None:
        """Completion `index` of `fact` as an Operator whose path goes through `leaf`'s (the walk's route to it),
        or None when the fact does not hold in this space (then it is forgotten)."""
        op_hash, suffix = fact.completions[index]
        # cached by hash, not by (leaf, count, index): a fact forgotten and then learned again from another worker's
        # record for the same (leaf, count) may list other completions, and the caller checked `op_hash`
        op = self._ops.get(op_hash)
        leaf_path = leaf.path
        if op is not None and op.path[: len(leaf_path)] == leaf_path:
            return op
        node = leaf
        try:
            for step in suffix:
                node = node.apply(step)
            op = node.to_operator() if node.key == op_hash else None
        except SynoError:
            op = None
        if op is None:
            self._samples.pop((fact.leaf, fact.count), None)
            return None
        self._ops[op_hash] = op
        return op

    def _rollout(self, leaf: Node, taken: set[str], calls: list[int]) -> tuple[Operator | None, bool]:
        """(a completion of `leaf` that is not taken, False), or (None, whether `leaf` is dead: nothing left below
        it, or completions too rare to find; False when a limit of the decision stopped the rollout first).

        `calls` counts logical sample requests (memoized or not), so the per-decision limit is reached at the
        same point by a long-lived tree and by one rebuilt from scratch.
        """
        if leaf.is_final:
            return (None, True) if leaf.key in taken else (leaf.to_operator(), False)
        count = 1
        while calls[0] < self.limits.max_sample_calls:
            calls[0] += 1
            fact = self._completions_of(leaf, count)
            if fact is None:
                return None, False
            fresh = next((i for i, (h, _) in enumerate(fact.completions) if h not in taken), None)
            if fresh is not None:
                operator = self._completion(leaf, fact, fresh)
                if operator is None:  # a learned fact that does not hold here: sample it
                    fact = self._completions_of(leaf, count)
                    if fact is None:
                        return None, False
                    fresh = next((i for i, (h, _) in enumerate(fact.completions) if h not in taken), None)
                    operator = self._completion(leaf, fact, fresh) if fresh is not None else None
                if operator is not None:
                    return operator, False
            if fact.exhausted or not fact.completions or count >= self.limits.max_rollout:
                return None, True  # all taken, none at all, or completions too rare to find
            count = min(4 * count, self.limits.max_rollout)
        return None, False

    def _fallback(self, decision: int, taken: set[str], calls: list[int]) -> Operator:
        """The tree is exhausted (or its subtrees too hard to complete): sample the whole space. The draws are
        seeded by groups of ``_FALLBACK_GROUP`` decisions, not by the decision itself: the first operator not taken
        among the 4 draws of the decision's group, then (all taken) of the next groups' 4 draws, up to
        ``_FALLBACK_AHEAD`` of them, then of 64 and 256 draws. So a run of fallbacks samples the space once per group
        instead of once per decision (4 draws of the default space took 60-230 ms, one decision after another at
        1,000 trials; 16 at once, 0.7 s), and a sampler started anew samples only the draws its decision reads."""
        # kept for a group's decisions, a decision's retries (a conflict), its prefetch; the oldest 8 dropped past
        # 32 (a decision reads up to 10, so clearing them all would redraw those a run of fallbacks reads next)
        if len(self._fallbacks) > 32:
            for old in list(self._fallbacks)[:8]:   # (insertion order: the oldest first)
                self._fallbacks.pop(old, None)
        group = decision // _FALLBACK_GROUP
        draws = [(group + ahead, 4) for ahead in range(_FALLBACK_AHEAD)] + [(group, 64), (group, 256)]
        for key in draws:
            calls[0] += 1
            drawn = self._fallbacks.get(key)
            if drawn is None:
                count = key[1]
                if self._stop is not None and count > _FALLBACK_GROUP:
                    # a prefetch draws a group's 4 (60-180 ms in the default space at 1,000 trials), not the
                    # 64 or 256 (seconds): each of its calls stays short (see prefetch.stop_prefetches)
                    raise _prefetch.Stopped
                with self._sampling():
                    drawn = self._fallbacks.get(key)
                    if drawn is None:
                        drawn = self._sample(count, derive_seed(self.seed, "fallback", *key), None,
                                             max(1000, 100 * count))
                        self._fallbacks[key] = drawn
            ops, exhausted = drawn
            fresh = [op for op in ops if op.hash not in taken]
            if fresh:
                return fresh[0]
            if exhausted:
                raise SearchExhaustedError(
                    f"all {len(ops)} operators of the space are evaluated or being evaluated")
        raise SearchExhaustedError(
            f"no operator left to propose: {len(ops)} operators sampled from the space were all taken")
