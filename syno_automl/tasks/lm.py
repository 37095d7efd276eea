"""The lm task: the GPT's QKV projections, a trial minimizes val_loss under a step and time budget
(syno_automl.tasks.lm_training), and reports its training tokens/s against the baseline trial's."""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from syno_automl import vocabulary as V
from syno_automl.settings import SettingError
from syno_automl.tasks.base import Task, TrainingContext
from syno_automl.words import counted

if TYPE_CHECKING:
    import optuna

    from syno_automl.config import SearchConfig
    from syno_automl.search.reward import Reward

__all__ = ["LMTask"]


class LMTask(Task):
    """Causal language modelling on a text corpus (the embedded one by default)."""

    name = "lm"
    objective_name = "val_loss"
    direction = "minimize"
    final_metric = "val_loss"
    prunes_in_study = False   # a trial is bounded by steps and time, not pruned over epochs
    counts_tokens = True

    def datamodule_kwargs(self, config: SearchConfig) -> dict[str, Any]:
        if config.dataset != "text":
            raise SettingError(f"--task lm reads text: --dataset must be 'text' (the embedded corpus, or a folder of "
                             f".txt/.md/.py files with --data-dir), got {config.dataset!r}")
        return {"seq_len": config.seq_len, "tokenizer": config.tokenizer}

    def sizes(self, datamodule: Any) -> tuple[int, int]:
        return int(datamodule.vocab_size), 0

    def check_model(self, config: SearchConfig, probe: Any) -> None:
        block_size = getattr(getattr(probe, "config", None), "block_size", None)
        if block_size is not None and config.seq_len > block_size:
            raise SettingError(f"--seq-len {config.seq_len} is longer than the model's context of {block_size} tokens")

    def build_module(self, config: SearchConfig, model: Any, num_classes: int) -> Any:
        from lightning_modules.learners import CausalLM

        assert config.lr is not None  # SearchConfig.__post_init__ gives it the task's default
        return CausalLM(model, lr=config.lr, warmup_steps=min(20, config.max_steps // 10))

    def reward(self, config: SearchConfig, num_classes: int) -> Reward:
        from syno_automl.search.reward import Reward

        # the original's ((max_loss - loss) / max_loss) ** power
        max_loss = config.max_loss if config.max_loss is not None else math.log(num_classes)
        return Reward.for_loss(upper=max_loss, power=config.reward_power)

    def train(self, context: TrainingContext, trial: Any | None, run: Any | None, substitution: Any, *, epochs: int,
              milestones: dict[int, float] | None, timeout: float | None, steps: int | None) -> float:
        """`steps` (default the config's max_steps); `timeout`: -1 for the config's time_budget, None or 0 for
        none (at the budget training stops and the model is validated)."""
        from syno_automl.tasks.lm_training import train_lm

        config = context.config
        budget = config.time_budget if timeout == -1.0 else timeout
        return train_lm(context, self.build(context), trial, run, substitution=substitution,
                        steps=steps or config.max_steps, time_budget=budget or None)

    def near_chance(self, value: float, num_classes: int) -> str | None:
        uniform = math.log(max(num_classes, 2))   # the loss of guessing every token alike
        if value < 0.95 * uniform:
            return None
        return f"val_loss {value:.3f} is near a uniform guess's ({uniform:.3f} for {num_classes} tokens)"

    def trial_budget(self, config: SearchConfig) -> int:
        return int(config.max_steps)

    def budget_label(self, config: SearchConfig) -> str:
        return counted(config.max_steps, "steps")

    def trial_line(self, trial: optuna.trial.Trial, run: Any | None, baseline: bool) -> str:
        """Training tokens/s against the baseline trial's, measured in the same study ('' when unknown)."""
        from syno_automl.search.objectives import baseline_trial

        tokens_per_s = trial.user_attrs.get(V.TOKENS_PER_S)
        if tokens_per_s is None:
            return ""
        if baseline:
            return f"  {tokens_per_s:,.0f} tokens/s"
        base = baseline_trial(trial.study)
        if base is None or not base.user_attrs.get(V.TOKENS_PER_S):
            return f"  {tokens_per_s:,.0f} tokens/s"
        ratio = tokens_per_s / base.user_attrs[V.TOKENS_PER_S]
        trial.set_user_attr(V.THROUGHPUT_RATIO, ratio)
        if run is not None:
            run.log_metrics({"throughput_ratio": ratio})
        return f"  {tokens_per_s:,.0f} tokens/s ({ratio:.2f}x baseline)"

    def latency_sizes(self, config: SearchConfig) -> dict[str, int]:
        return {"N": config.seq_len}   # one sequence, as the paper's latency figures

    def final_budget(self, config: SearchConfig) -> tuple[int, str]:
        # by default twice the search's steps, without its time budget
        return (int(config.final_steps) if config.final_steps else 2 * int(config.max_steps)), "steps"

    def final_changes(self, budget: int) -> dict[str, Any]:
        # the learning-rate schedule (warmup, cosine) follows the budget, as in a trial of that many steps
        return {"max_steps": budget, "time_budget": None}

    def final_steps(self, budget: int) -> int | None:
        return budget

    def timing_batch(self, datamodule: Any, example: Any) -> Any:
        """The tokens of the first validation batch (the validation loader does not shuffle: the same batch in
        every process and run)."""
        batch = next(iter(datamodule.val_dataloader()))
        return batch[0] if isinstance(batch, (tuple, list)) else batch

    def timing_label(self, example: Any) -> str:
        return f"batch {int(example.shape[0])} × {int(example.shape[1])} tokens"
