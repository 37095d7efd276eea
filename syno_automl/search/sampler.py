"""SynoSampler: an Optuna sampler proposing Syno operators by MCTS, with state rebuilt from the study's trials.

The operator of a trial is chosen in `before_trial` and stored on it once, in the user attrs ``syno.operator``
(the JSON: what the sampler reads, optuna-dashboard shows, and ``enqueue_trial({}, user_attrs={"syno.operator":
json})`` requests) and ``syno.hash`` (search/trial_attrs.py). The objective reads it with `suggest_operator(trial)`;
the objective's other parameters are the independent sampler's, relative sampling included. Any number of
processes may share one storage: every decision rebuilds (incrementally) the search tree from the trials, RUNNING
trials count as virtual loss, and an operator held by any other trial is never proposed again (a write-then-check
protocol resolves simultaneous picks).

Each decision folds in only the trials that finished since the last one (a finished trial is read once), and
records on its trial what it learned (search/learned.py): the rollouts it sampled (``syno:rollouts``: pure
functions of the space, the seed and the leaf, mcts.RolloutFact, which every sampler of the same space and seed
reads back instead of sampling them again; those its prefetch sampled while the trial ran are added when the trial
ends, after_trial) and the nodes it found dead (``syno:dead``: every later decision walks around them). A new
worker or a resumed search thus rebuilds the tree, and what the earlier decisions learned, from one read of the
trials, and proposes what the sampler that made them would have. On an RDB storage a decision reads the trials
once (those Optuna's cache holds, which ``Study.ask`` has just read, when still current; the write-then-check reads
only the unsettled trials' operators) and writes its attrs in one transaction (each attr write is a commit there:
a disk sync on SQLite), all through syno_automl/optuna_private.py. The sampler pickles
(its space as its spec), and ends ``study.optimize`` when the space has nothing left (NothingLeftToPropose).

Example:
    >>> import optuna
    >>> from syno_automl import OperatorSpace
    >>> space = OperatorSpace("[N, C_in]", "[N, C_out]", primary=["N: 0", "C_in: 2", "C_out: 2"],
    ...                       coefficients=["k=2: 1"], mappings=[{"N": 4, "C_in": 8, "C_out": 8}], max_depth=4)
    >>> study = optuna.create_study(direction="maximize", sampler=SynoSampler(space, seed=0))
    >>> study.optimize(lambda trial: 1.0 / (1 + suggest_operator(trial).depth), n_trials=3)
    >>> len({t.user_attrs["syno.hash"] for t in study.trials})
    3
"""
from __future__ import annotations

import logging
import secrets
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
from optuna.distributions import BaseDistribution
from optuna.samplers import BaseSampler, RandomSampler
from optuna.study import Study, StudyDirection
from optuna.trial import FrozenTrial, Trial, TrialState

from syno_automl import vocabulary as V
from syno_automl.errors import NoOperatorError, OperatorFormatError, OptionError, OptionTypeError
from syno_automl.optuna_private import (
    attrs_of_trials,
    current_cached_trials,
    has_constraint,
    retry_history,
    storage_of,
    study_id_of,
    trial_id_of,
    wrapped_sampler,
)
from syno_automl.optuna_private import write_attrs_at_once as _write_rdb_attrs
from syno_automl.search.learned import TrialRecords
from syno_automl.search.mcts import MCTS, Observation, RolloutFact, SearchExhaustedError
from syno_automl.search.pareto import ParetoReward
from syno_automl.search.reward import Reward
from syno_automl.search.trial_attrs import (
    NothingLeftToPropose,
    end_study,
    error_attr,
    operator_json_of,
    operator_text,
    path_and_hash,
    recorded_error,
)
from syno_automl.space import Operator, OperatorSpace

__all__ = ["SynoSampler", "suggest_operator", "syno_sampler_of", "operator_json_of", "NothingLeftToPropose"]

_MAX_CONFLICTS = 16
_PREFETCH_AHEAD = 4                  # decisions a prefetch prepares when its trial runs alone
_log = logging.getLogger(__name__)


def _trial_seed(seed: int, number: int) -> int:
    return int(np.random.SeedSequence([seed, number]).generate_state(1)[0])


class SynoSampler(BaseSampler):
    """Proposes one operator of `space` per trial by MCTS; other parameters go to `independent_sampler`.

    Args:
        space: the OperatorSpace searched (e.g. ``substitute(model, nn.Conv2d, x).space``).
        seed: makes the proposals reproducible: they depend on (seed, trial number, the study's trials).
        exploration: the UCB1-tuned constant.
        reward: maps a finished trial to [0, 1]; default: accuracy in [0, 1] with power 2 for a maximized
            objective, a loss in [0, 10] for a minimized one. Failed and pruned trials get its low constants.
            A ParetoReward reads (accuracy or loss, cost ratio) of a multi-objective study.
        independent_sampler: samples the objective's other parameters, jointly where it samples relatively
            (every sampler call is passed through). By default a RandomSampler seeded from (seed, trial number), so
            a resumed process does not repeat the values of the trials before it.
        widening, widening_power: progressive widening, ceil(widening * N ** widening_power) children.
        virtual_loss: visits with reward 0 that each RUNNING trial adds along its path.
        flops_bins: rollouts drawn over this many FLOPs bands of the space's budget (0: uniformly; MCTS).
        prefetch: after each decision, compute in a background thread the rollouts the next one will likely need
            (MCTS.prefetch: the tree as it is, the trial just assigned running), and when no other trial runs
            those of the few after it, while that trial is evaluated. It changes no proposal, only how long the
            next decisions take.

    Example:
        >>> import optuna
        >>> sampler = SynoSampler(OperatorSpace("[N, C_in]", "[N, C_out]", primary=["N: 0", "C_in: 2",
        ...     "C_out: 2"], coefficients=["k=2: 1"], mappings=[{"N": 4, "C_in": 8, "C_out": 8}], max_depth=4), seed=1)
        >>> study = optuna.create_study(direction="maximize", sampler=sampler)
        >>> study.enqueue_trial({}, user_attrs={V.BASELINE: True})   # the original layer: no operator
        >>> trial = study.ask(); V.BASELINE in trial.user_attrs
        True
    """

    def __init__(self, space: OperatorSpace, *, seed: int | None = None, exploration: float = 1.0,
                 reward: Reward | ParetoReward | None = None, independent_sampler: BaseSampler | None = None,
                 widening: float = 1.0, widening_power: float = 0.5, virtual_loss: int = 1,
                 flops_bins: int = 0, prefetch: bool = True) -> None:
        if not isinstance(space, OperatorSpace):
            raise OptionTypeError(f"SynoSampler needs an OperatorSpace, got {type(space).__name__}")
        if reward is not None and not isinstance(reward, (Reward, ParetoReward)):
            raise OptionTypeError(f"reward must be a syno_automl Reward or ParetoReward, got {type(reward).__name__}")
        self.space = space
        self.seed = secrets.randbits(32) if seed is None else int(seed)
        self.reward = reward
        self._tree_options: dict[str, Any] = dict(exploration=exploration, widening=widening,
                                                  widening_power=widening_power, virtual_loss=virtual_loss,
                                                  flops_bins=flops_bins)
        self._own_independent = independent_sampler is None
        self._independent = independent_sampler or RandomSampler(seed=self.seed)
        self._per_trial: dict[int, BaseSampler] = {}  # trial number -> its RandomSampler (default sampler only)
        self._lock = threading.RLock()
        self._prefetch = bool(prefetch)
        self._prefetch_stop: threading.Event | None = None  # the running prefetch's stop signal
        self._operators: dict[str, Operator] = {}
        self._reset(None)
        MCTS(space, seed=self.seed, **self._tree_options)  # validates the options now, not at the first trial

    current_trial_id: int | None = None   # the trial this sampler last assigned (before_trial)

    # -- pickling (Optuna pickles a study with its sampler; a process may receive it) -----------------------------
    _UNPICKLED = ("_lock", "_prefetch_stop", "_tree", "_records", "_operators", "_per_trial")

    def __getstate__(self) -> dict[str, Any]:
        """The options, the seed and the space's spec: no lock, no native object. What the tree knew is rebuilt
        from the study's trials at the next decision (the proposals do not change: they depend on the trials)."""
        state = {k: v for k, v in self.__dict__.items() if k not in self._UNPICKLED}
        state["space"] = {"config": self.space.config(), "seed": self.space.seed, "threads": self.space.threads}
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        spec = state.pop("space")
        self.__dict__.update(state)
        self.space = OperatorSpace(**spec["config"], seed=spec["seed"], threads=spec["threads"])
        self._lock = threading.RLock()
        self._prefetch_stop = None
        self._operators = {}
        self._per_trial = {}
        self._reset(None)

    def _reset(self, key: Any) -> None:
        self._study_key = key
        # a new study: no statistics, but the rollouts and children known (they do not depend on the study)
        tree = getattr(self, "_tree", None)
        self._tree = tree.fresh() if tree is not None else MCTS(self.space, seed=self.seed, **self._tree_options)
        self._seen: dict[int, Observation | None] = {}  # finished trial number -> observation added (or None)
        # finished trials folded in (each read once: a finished trial no longer changes): number -> (the hash of
        # its operator or None, its state)
        self._done: dict[int, tuple[str | None, TrialState]] = {}
        self._taken_done: set[str] = set()   # the operators of those trials
        self._retried: set[int] = set()      # trial numbers a RetryHeartbeatStaleTrialCallback retried
        self._records = TrialRecords(self._tree)  # what the decisions learned, read from the trials
        self._unsettled: set[int] = set()   # trial numbers unfinished at the last _sync
        self._last_number = -1              # the highest trial number the last _sync read

    # -- Optuna's sampler interface ---------------------------------------------------------------------
    # The operator is not an Optuna parameter (it is chosen in before_trial and kept in the trial's attrs), so the
    # user's other parameters are the independent sampler's whole search space: its relative sampling (Grid,
    # CMA-ES, GP, QMC, multivariate TPE) sees them jointly, as it would without the operator beside them.
    def infer_relative_search_space(self, study: Study, trial: FrozenTrial) -> dict[str, BaseDistribution]:
        if self._own_independent:
            return {}   # the default: random values, one RNG per trial (sample_independent)
        return self._independent.infer_relative_search_space(study, trial)

    def sample_relative(self, study: Study, trial: FrozenTrial,
                        search_space: dict[str, BaseDistribution]) -> dict[str, Any]:
        if self._own_independent:
            return {}
        return self._independent.sample_relative(study, trial, search_space)

    def sample_independent(self, study: Study, trial: FrozenTrial, param_name: str,
                           param_distribution: BaseDistribution) -> Any:
        if not self._own_independent:
            return self._independent.sample_independent(study, trial, param_name, param_distribution)
        with self._lock:
            # one RNG per trial, from (seed, number): every process draws the same values for trial n and none
            # repeats another trial's (one RNG seeded once per process would restart in each resumed process)
            sampler = self._per_trial.get(trial.number)
            if sampler is None:
                sampler = self._per_trial[trial.number] = RandomSampler(seed=_trial_seed(self.seed, trial.number))
            return sampler.sample_independent(study, trial, param_name, param_distribution)

    def after_trial(self, study: Study, trial: FrozenTrial, state: TrialState,
                    values: Sequence[float] | None) -> None:
        self._independent.after_trial(study, trial, state, values)
        with self._lock:
            self._per_trial.pop(trial.number, None)
            if self._study_key == self._key_of(study):
                try:  # the trial is still RUNNING (Optuna finishes it after this call): its last write
                    self._write(study, trial, self._records.rollouts_attr(trial, []))
                except Exception as e:  # noqa: BLE001 -- a record to spare work: never worth failing a trial
                    _log.debug("SynoSampler: rollouts not recorded on trial %d: %s", trial.number, e)

    def reseed_rng(self) -> None:
        """Reseeds the independent sampler (Optuna calls this in each thread of ``optimize(n_jobs>1)``) and nothing
        else: the operators depend on (seed, trial number, the study's trials) by design, so that threads,
        processes and a resumed search propose the same ones; the default independent sampler's values depend on
        (seed, trial number) as well (one RandomSampler per trial), so they are not reseeded either."""
        self._independent.reseed_rng()

    def before_trial(self, study: Study, trial: FrozenTrial) -> None:
        """Assigns the trial's operator, then lets the independent sampler prepare the trial (a GridSampler picks
        its grid point here). Never raises for a search problem: suggest_operator reports it."""
        self._assign(study, trial)
        self._independent.before_trial(study, trial)

    def _assign(self, study: Study, trial: FrozenTrial) -> None:
        # remembered (in memory: no write a Ctrl-C could land in) so that an interrupted worker can fail the trial
        # it was creating (syno_automl.study.lost_trials)
        self.current_trial_id = trial_id_of(trial)
        if trial.user_attrs.get(V.BASELINE) or V.SYS_SOURCE in trial.system_attrs or \
                V.SYS_OPERATOR in trial.system_attrs:
            return  # the baseline, or a retried trial (its attrs were copied from the failed one)
        requested = trial.user_attrs.get(V.OPERATOR)
        with self._lock:
            try:
                if requested is not None:
                    self._assign_requested(study, trial, requested)
                else:
                    self._assign_fresh(study, trial)
            except Exception as e:  # noqa: BLE001 -- raising here would leave a RUNNING trial with no heartbeat behind
                _log.warning("SynoSampler: no operator for trial %d: %s: %s", trial.number, type(e).__name__, e)
                try:
                    self._fail_assignment(study, trial, e)
                except Exception:  # noqa: BLE001 -- best effort
                    pass  # the trial fails in suggest_operator ("has no operator")

    # -- assignment -----------------------------------------------------------------------------------
    def _write(self, study: Study, trial: FrozenTrial, system: dict[str, Any] | None = None,
               user: dict[str, Any] | None = None) -> None:
        """Sets the trial's system and user attrs: in one transaction on an RDB storage (each attr is one there:
        a commit, a disk sync on SQLite), else one by one. Keeps the Trial's cached copy in step."""
        system, user = system or {}, user or {}
        storage, trial_id = storage_of(study), trial_id_of(trial)
        if not _write_rdb_attrs(storage, trial_id, system, user):
            for key, value in system.items():
                storage.set_trial_system_attr(trial_id, key, value)
            for key, value in user.items():
                storage.set_trial_user_attr(trial_id, key, value)
        trial.system_attrs.update(system)
        trial.user_attrs.update(user)

    def _fail_assignment(self, study: Study, trial: FrozenTrial, error: Exception) -> None:
        self._write(study, trial, error_attr(error))

    def _assign_requested(self, study: Study, trial: FrozenTrial, text: Any) -> None:
        try:
            if not isinstance(text, str):
                raise OperatorFormatError(f"user attr {V.OPERATOR!r} must be operator JSON text")
            op = self._load(text)
        except OperatorFormatError as e:
            self._fail_assignment(study, trial, e)
            return
        self._write(study, trial, {V.SYS_SOURCE: "enqueued"},
                    {V.OPERATOR: op.to_json(), V.HASH: op.hash})  # the request, canonical

    def _assign_fresh(self, study: Study, trial: FrozenTrial) -> None:
        if self._prefetch_stop is not None:
            self._prefetch_stop.set()  # this decision's own rollouts come first (the prefetch's so far are kept)
        running, taken = self._sync(study)
        records = self._records
        facts: list[RolloutFact] = []  # the rollouts this decision sampled (and its prefetch), recorded on the trial
        dead: list[str] = []  # the nodes it found dead, recorded on the trial
        for _ in range(_MAX_CONFLICTS):
            try:
                proposal = self._tree.propose(trial.number, running, taken, records.dead.union(dead))
            except SearchExhaustedError as e:
                self._write(study, trial, {**records.rollouts_attr(trial, facts), **error_attr(e)})
                end_study(study, trial.number, e)
                return
            op = proposal.operator
            self._operators[op.hash] = op
            dead += proposal.dead
            # one write (one transaction on an RDB storage): the operator, where it came from, what it learned
            self._write(study, trial, {V.SYS_LEAF: proposal.leaf, V.SYS_SOURCE: "fallback" if proposal.fallback
                                       else "mcts", **records.rollouts_attr(trial, facts), **records.dead_attr(dead)},
                        {V.OPERATOR: op.to_json(), V.HASH: op.hash})
            # Write, then check: of two trials that picked the same operator at once, the one that reads
            # last sees the other and picks again, so no two trials keep the same one.
            if not self._held_elsewhere(study, trial, op.hash):
                break
            taken.add(op.hash)
        if self._prefetch:  # the next decision sees this trial running (or finished: then it may walk elsewhere)
            # Alone (no other trial running: one worker, trials one after another), the next few decisions are
            # foreseen as well (the trials before each running), so that a decision with many rollouts to sample
            # is spread over the evaluations of several trials; with other trials running, whose ends reshape
            # the tree, only the next one.
            self._prefetch_stop = threading.Event()
            self._tree.prefetch(trial.number + 1, [*running, proposal.running()], taken | {op.hash},
                                self._prefetch_stop, ahead=1 if running else _PREFETCH_AHEAD,
                                dead=records.dead.union(dead))

    def _held_elsewhere(self, study: Study, trial: FrozenTrial, op_hash: str) -> bool:
        """Whether a trial other than `trial` holds the operator: of the trials unfinished at this decision's
        _sync or created since (those finished before it held none of `taken`'s complement). On an RDB storage
        one query reads only those trials' operator attrs (optuna_private.attrs_of_trials)."""
        storage, unsettled = storage_of(study), self._unsettled - {trial.number}
        attrs = attrs_of_trials(storage, study_id_of(study), unsettled, self._last_number, V.SYS_OPERATOR,
                                V.OPERATOR)
        if attrs is None:   # another storage: read them all
            attrs = {t.number: (t.system_attrs, t.user_attrs)
                     for t in storage.get_all_trials(study_id_of(study), deepcopy=False)
                     if t.number in unsettled or t.number > self._last_number}
        for number, (system, user) in attrs.items():
            text = operator_text(system, user)
            if number != trial.number and text is not None and (path_and_hash(text) or ((), ""))[1] == op_hash:
                return True
        return False

    # -- the tree, rebuilt from the trials --------------------------------------------------------------
    def _reward_of(self, study: Study, trial: FrozenTrial) -> float:
        reward = self.reward
        if reward is None:
            direction = study.directions[0] if study.directions else StudyDirection.MAXIMIZE
            reward = Reward.for_direction("maximize" if direction == StudyDirection.MAXIMIZE else "minimize")
        if trial.state == TrialState.PRUNED:
            return reward.pruned
        if trial.state != TrialState.COMPLETE or not trial.values:
            return reward.failed
        return reward.value_of(trial.values)

    @staticmethod
    def _key_of(study: Study) -> tuple:
        return study_id_of(study), study.study_name, id(storage_of(study))

    def _sync(self, study: Study) -> tuple[list[Observation], set[str]]:
        """Brings the tree up to date with the study; returns (running observations, taken hashes).

        Incremental: a finished trial is folded in once (the trials finished since the last call are the only ones
        read in full), and each rollout or dead node recorded on a trial is learned once (a running trial's record
        grows when it ends: the rollouts its worker's prefetch sampled meanwhile are added). The dead nodes read so
        far: `self._records.dead`.
        """
        key = self._key_of(study)
        if key != self._study_key:
            self._reset(key)
        storage, study_id = storage_of(study), study_id_of(study)
        trials = current_cached_trials(storage, study_id)   # what Study.ask has just read, when still current
        if trials is None:
            trials = storage.get_all_trials(study_id, deepcopy=False)
        done = self._done
        pending = [t for t in trials if t.number not in done]
        for t in pending:  # retries first: a trial retried is not held against its operator
            for number in retry_history(t.system_attrs):
                if number not in self._retried:
                    self._retried.add(number)
                    seen = self._seen.get(number)
                    if seen is not None and done[number][1] == TrialState.FAIL:
                        self._tree.remove(seen)  # a crashed worker's trial, now retried: not the operator's fault
                        self._seen[number] = None
        running: list[Observation] = []
        taken = set(self._taken_done)
        for t in pending:
            self._records.read(t)  # the rollouts (spare sampling) and dead nodes the trial's decision recorded
            text = operator_json_of(t)
            parsed = path_and_hash(text) if text is not None else None
            finished = t.state.is_finished()
            if parsed is None:
                if finished:
                    done[t.number] = (None, t.state)
                continue
            path, op_hash = parsed
            taken.add(op_hash)
            leaf = t.system_attrs.get(V.SYS_LEAF)
            leaf = leaf if isinstance(leaf, int) else None
            if t.state == TrialState.RUNNING:
                running.append(Observation(path, None, leaf))
            elif finished:
                done[t.number] = (op_hash, t.state)
                self._taken_done.add(op_hash)
                observation = None
                if not (t.state == TrialState.FAIL and t.number in self._retried):
                    observation = Observation(path, self._reward_of(study, t), leaf)
                    self._tree.add(observation)
                self._seen[t.number] = observation
        # what _held_elsewhere reads again: the trials still unfinished, and any numbered above these
        self._unsettled = {t.number for t in pending if not t.state.is_finished()}
        self._last_number = trials[-1].number if trials else -1
        return running, taken

    # -- operators -------------------------------------------------------------------------------------
    def _load(self, text: str) -> Operator:
        parsed = path_and_hash(text)
        if parsed is not None and parsed[1] in self._operators:
            return self._operators[parsed[1]]
        op = Operator.from_json(self.space, text)
        self._operators[op.hash] = op
        return op

    def operator_of(self, trial: Trial | FrozenTrial) -> Operator:
        """The operator assigned to `trial` (see suggest_operator)."""
        if isinstance(trial, Trial):
            trial_id = trial_id_of(trial)
            system = trial.storage.get_trial_system_attrs(trial_id)
            user = trial.storage.get_trial(trial_id).user_attrs
        else:
            system, user = trial.system_attrs, trial.user_attrs
        if user.get(V.BASELINE):
            raise OptionError(f"trial {trial.number} evaluates the baseline (the original layers): no operator")
        error = recorded_error(trial.number, system)
        if error is not None:
            raise error
        text = operator_text(system, user) if V.SYS_SOURCE in system or V.SYS_OPERATOR in system else None
        if text is None:
            raise NoOperatorError(f"trial {trial.number} has no operator: was it created by a SynoSampler's study?")
        return self._load(text)


def suggest_operator(trial: Trial, space: OperatorSpace | None = None) -> Operator:
    """The operator chosen for `trial` by its study's SynoSampler (and its FLOPs recorded as a constraint).

    The constraint ``flops`` is ``total_flops / max_flops - 1`` (feasible when <= 0) when the space has a
    FLOPs budget. The study's sampler may be a SynoSampler or wrap one (syno_sampler_of: Optuna's
    PartialFixedSampler). Raises NothingLeftToPropose (a SearchExhaustedError and an optuna.TrialPruned: the trial is
    pruned with the sampler's message and ``study.optimize`` ends) when the space had nothing left for the trial,
    OperatorFormatError for a malformed requested operator.
    """
    sampler = syno_sampler_of(trial.study.sampler)
    if sampler is None:
        if space is None:
            raise OptionTypeError("suggest_operator needs the study's sampler to be a SynoSampler or to wrap one "
                                  f"(got {type(trial.study.sampler).__name__}), or an explicit space=")
        text = operator_text(trial.storage.get_trial_system_attrs(trial_id_of(trial)), trial.user_attrs)
        if text is None:
            raise NoOperatorError(f"trial {trial.number} has no operator")
        op = Operator.from_json(space, text)
    else:
        op = sampler.operator_of(trial)
    max_flops = op.space.budgets.get("max_flops")
    if max_flops and not has_constraint(trial, "flops"):
        trial.set_constraint("flops", op.total_flops() / max_flops - 1.0)
    return op


def syno_sampler_of(sampler: BaseSampler | None) -> SynoSampler | None:
    """`sampler` when it is a SynoSampler, else the SynoSampler it wraps (Optuna's wrappers keep the sampler they
    delegate to: optuna_private.wrapped_sampler), else None."""
    for _ in range(8):   # wrappers of wrappers, never a loop
        if sampler is None or isinstance(sampler, SynoSampler):
            return sampler
        sampler = wrapped_sampler(sampler)
    return None
