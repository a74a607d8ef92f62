"""Predicted output lengths for the DLA value check (DLA.md "Value check (simulator)"):
:func:`predict` over a trace, :func:`predictor` job by job, under one of :data:`PREDICTIONS`.

Deterministic for its arguments; reads no clock or environment.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence

from dla_plugin.sim.workload import Job, WorkloadError, _params_error

__all__ = ["PREDICTIONS", "predict", "predictor"]

PREDICTIONS = (
    "exact",
    "noise-add-0.5",
    "noise-add-1.0",
    "lognormal-0.5",
    "lognormal-1.0",
    "over",
    "none",
)
_ADDITIVE = {"noise-add-0.5": 0.5, "noise-add-1.0": 1.0}
_LOGNORMAL = {"lognormal-0.5": 0.5, "lognormal-1.0": 1.0}
# The names the log-normal models had before the additive ones came (DLA.md).
_RENAMED = {"noise-0.5": "lognormal-0.5", "noise-1.0": "lognormal-1.0"}
_RENAMED_FROM = {new: old for old, new in _RENAMED.items()}


def predict(jobs: Sequence[Job], model: str, seed: int) -> list[int | None]:
    """The predicted output length of every job under the prediction ``model``.

    - ``exact``: the true output length;
    - ``noise-add-0.5``, ``noise-add-1.0``: ``max(1, round(L + N(0, (sigma * L)**2)))`` for the
      true length ``L``: additive normal noise of standard deviation ``sigma * L``, the most
      natural reading of DLA.md's "sigma = 1 x L (about the size of the output itself)";
      unbiased before the floor at 1 (which about one prediction in six meets at sigma 1);
    - ``lognormal-0.5``, ``lognormal-1.0``: ``max(1, round(L * exp(N(0, sigma))))``,
      multiplicative log-normal noise of log-sd sigma: unbiased in log space (the median
      prediction is the true length), and never negative (named ``noise-*`` before the
      additive models came);
    - ``over``: ``ceil(1.5 * output)``, a systematic 50% over-estimate;
    - ``none``: ``None`` for every job (no prediction).

    Deterministic for ``(jobs, model, seed)``; each model draws from its own random stream,
    so one model's predictions do not depend on which other models were computed.

    Raises:
        WorkloadError: (``params``) for an unknown model (the message lists the known ones)
            or a seed that is not an integer.
    """
    predicted = predictor(model, seed)
    return [predicted(job) for job in jobs]


def predictor(model: str, seed: int) -> Callable[[Job], int | None]:
    """The prediction ``model`` as a function of one job, applied to jobs in order (the
    noise models draw from their own random stream of ``(model, seed)``): what
    :func:`predict` applies to a list, and a scheduler to an endless stream.

    Raises:
        WorkloadError: as :func:`predict`.
    """
    if model not in PREDICTIONS:
        renamed = f" (now named {_RENAMED[model]!r})" if model in _RENAMED else ""
        raise WorkloadError(
            "params", "a prediction model among " + ", ".join(PREDICTIONS), repr(model) + renamed
        )
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise _params_error("seed", "an integer", seed)
    if model == "none":
        return lambda job: None
    if model == "exact":
        return lambda job: job.output_tokens
    if model == "over":
        return lambda job: -(-3 * job.output_tokens // 2)  # ceil(1.5 * output), exactly
    # A string seed is hashed with SHA-512 by random.Random: stable across runs and processes.
    # (The log-normal models keep the stream names they had as noise-0.5 and noise-1.0, so
    # their predictions are the ones of before.)
    stream = _RENAMED_FROM.get(model, model)
    rng = random.Random(f"dla-predict:{stream}:{seed}")  # noqa: S311 - reproducible, not a secret
    if model in _ADDITIVE:
        sigma = _ADDITIVE[model]
        return lambda job: max(1, round(job.output_tokens * (1.0 + rng.gauss(0.0, sigma))))
    sigma = _LOGNORMAL[model]
    return lambda job: max(1, round(job.output_tokens * math.exp(rng.gauss(0.0, sigma))))
