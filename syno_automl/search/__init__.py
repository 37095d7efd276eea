"""The search algorithm and its adapters: MCTS over an OperatorSpace (mcts; its background look-ahead: prefetch),
the rewards it learns from (reward, pareto), reading a study's objectives (objectives), the Optuna sampler that
runs the MCTS (sampler), and the Lightning callbacks a trial trains with (callbacks, time_limits, fidelity).

Nothing here runs a study (that is syno_automl.study) or knows a task by name (syno_automl.tasks). Importing the
package imports none of its modules: ``from syno_automl.search.sampler import SynoSampler``, or the public names
from ``syno_automl`` itself.
"""
