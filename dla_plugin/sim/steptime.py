"""How long an engine step lasts (DLA.md "Value check"): :class:`ConstantStep`, and
:class:`ProfiledStep` built from published profiling data.

A step computes, for every running request, either its prefill (a request admitted in this
step: its prompt and, after a preemption, its output so far, all recomputed) or one decode
token (the others, each attending over the tokens in its KV cache). A model answers
:meth:`StepModel.seconds` for what a step computed:

- ``prefills``: the prefill length of each request prefilled in the step;
- ``decodes``: the number of requests that decoded one token;
- ``decode_kv``: the tokens those requests attend over, summed.

``a100-llama2-7b`` (the default) is Llama-2-7B on one A100 80 GB at tensor parallelism 1, as
Vidur models an iteration (its ``ExecutionTime.model_time``: the decoder layers, CPU overheads
and the embedding and sampling left out), from Vidur's profiled rows
(:mod:`dla_plugin.sim.vidur_a100_llama2_7b`). Per layer, in milliseconds, with ``N`` the tokens
of the step (prefill tokens plus decodes):

- the nine token-wise operators (projections, MLP, norms, rope, add): the sum of their
  profiled medians, interpolated linearly between the 16 profiled ``num_tokens`` rows of
  :data:`~dla_plugin.sim.vidur_a100_llama2_7b.LINEAR` (beyond the last row, extended with the
  slope from 2,048 to 4,096 tokens);
- decode attention: ``a + b * decodes + c * decode_kv``, a least-squares fit (in relative
  error) to the profiled ``attn_decode`` rows;
- prefill attention: ``e0 + e1 * q + e2 * q**2`` with ``q**2`` the sum of the squared
  prefill lengths (Vidur's aggregation of a batch of prefills), a least-squares fit (in
  relative error) to the profiled ``attn_prefill`` rows.

Vidur adds batching overheads (10%) to attention only for grouped-query attention models
(query heads > KV heads); Llama-2-7B has 32 of each, so there are none here.

The step is the per-layer sum times the 32 layers. ``constant`` lasts the same whatever the
step computes (the engine before profiled time); a step that computes nothing lasts 0 s.
Deterministic; reads no clock or environment.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from typing import Protocol

from dla_plugin.sim import vidur_a100_llama2_7b as vidur

__all__ = [
    "STEP_MODELS",
    "ConstantStep",
    "ProfiledStep",
    "StepModel",
    "fit_relative",
    "step_model",
]

#: The step models ``--step-model`` accepts: the profiled default, and a constant step.
STEP_MODELS = ("a100-llama2-7b", "constant")

_EXTEND_FROM = 2048  # beyond the last profiled row, the slope from this row to the last
_MIN_STEP_S, _MAX_STEP_S = 1e-6, 60.0  # a constant step: 1 microsecond to a minute
_FAST_BATCH = 1024  # decode-only steps of fewer requests take a precomputed token-wise time


class StepModel(Protocol):
    """A step's duration as a function of what it computed."""

    name: str

    def seconds(self, prefills: Sequence[int], decodes: int, decode_kv: int) -> float:
        """The step's duration in seconds (0.0 for a step that computed nothing)."""
        ...

    def decode_durations(self, decodes: int, decode_kv: int, steps: int) -> list[float]:
        """The durations of ``steps`` steps that only decode, ``decodes`` requests each, the
        KV cache growing by ``decodes`` tokens a step: element ``i`` is exactly
        ``seconds((), decodes, decode_kv + i * decodes)``."""
        ...


class ConstantStep:
    """Every step that computes something lasts ``step_s`` seconds."""

    name = "constant"

    def __init__(self, step_s: float) -> None:
        if not (
            isinstance(step_s, (int, float))
            and not isinstance(step_s, bool)
            and _MIN_STEP_S <= step_s <= _MAX_STEP_S
        ):
            raise ValueError(
                f"expected a step of {_MIN_STEP_S * 1000:g} ms to {_MAX_STEP_S * 1000:g} ms, "
                f"found {step_s * 1000 if isinstance(step_s, (int, float)) else step_s!r} ms"
            )
        self.step_s = float(step_s)

    def seconds(self, prefills: Sequence[int], decodes: int, decode_kv: int) -> float:
        """``step_s``, or 0.0 when the step computed nothing."""
        del decode_kv
        return self.step_s if prefills or decodes else 0.0

    def decode_durations(self, decodes: int, decode_kv: int, steps: int) -> list[float]:
        """``steps`` times ``step_s`` (as :meth:`StepModel.decode_durations`)."""
        return [self.seconds((), decodes, decode_kv)] * max(steps, 0)


def fit_relative(rows: Sequence[tuple[Sequence[float], float]]) -> tuple[float, ...]:
    """Least squares of ``y ~ sum(coef[i] * x[i])`` over ``(x, y)`` rows, each residual
    divided by its ``y`` (a fit in relative error, so small times count as much as large).

    Raises:
        ValueError: for no rows, rows of different widths, a ``y`` <= 0, or rows that do not
            determine the coefficients.
    """
    if not rows:
        raise ValueError("expected rows to fit, found none")
    width = len(rows[0][0])
    if any(len(x) != width for x, _ in rows) or any(not y > 0 for _, y in rows):
        raise ValueError("expected rows of one width with y > 0")
    # Normal equations of the weighted problem, solved by Gaussian elimination.
    m = [[0.0] * (width + 1) for _ in range(width)]
    for x, y in rows:
        w = 1.0 / (y * y)
        for i in range(width):
            for j in range(width):
                m[i][j] += w * x[i] * x[j]
            m[i][width] += w * x[i] * y
    for col in range(width):
        pivot = max(range(col, width), key=lambda r: abs(m[r][col]))
        if abs(m[pivot][col]) < 1e-300:
            raise ValueError("expected rows that determine every coefficient")
        m[col], m[pivot] = m[pivot], m[col]
        for r in range(width):
            if r != col:
                f = m[r][col] / m[col][col]
                m[r] = [a - f * b for a, b in zip(m[r], m[col], strict=True)]
    return tuple(m[i][width] / m[i][i] for i in range(width))


class ProfiledStep:
    """The step time of Llama-2-7B on one A100 80 GB, from Vidur's profiled rows."""

    name = "a100-llama2-7b"

    def __init__(self) -> None:
        self.layers = vidur.LAYERS
        #: (num_tokens, per-layer ms of the token-wise operators), the interpolation knots.
        self.linear_knots = tuple((n, sum(ops)) for n, ops in vidur.LINEAR)
        self._knot_tokens = [n for n, _ in self.linear_knots]
        last_n, last_ms = self.linear_knots[-1]
        start = dict(self.linear_knots)[_EXTEND_FROM]
        self._extend_slope = (last_ms - start) / (last_n - _EXTEND_FROM)
        #: (a, b, c) of decode attention: a + b * decodes + c * decode_kv, per layer (ms).
        self.decode_coef = fit_relative([((1.0, b, b * kv), ms) for b, kv, ms in vidur.DECODE])
        #: (e0, e1, e2) of prefill attention: e0 + e1 * q + e2 * q**2, per layer (ms).
        self.prefill_coef = fit_relative([((1.0, p, p * p), ms) for p, ms in vidur.PREFILL])
        # Most steps only decode: their token-wise time, looked up by the batch size.
        self._decode_linear = [self.linear_ms(n) for n in range(_FAST_BATCH)]

    def linear_ms(self, tokens: int) -> float:
        """Per-layer ms of the token-wise operators for a step of ``tokens`` tokens."""
        if tokens <= 0:
            return 0.0
        knots = self.linear_knots
        i = bisect.bisect_left(self._knot_tokens, tokens)
        if i == 0:
            return knots[0][1]
        if i == len(knots):
            last_n, last_ms = knots[-1]
            return last_ms + self._extend_slope * (tokens - last_n)
        (n0, t0), (n1, t1) = knots[i - 1], knots[i]
        return t0 + (t1 - t0) * (tokens - n0) / (n1 - n0)

    def decode_ms(self, decodes: int, decode_kv: int) -> float:
        """Per-layer ms of decode attention for ``decodes`` requests over ``decode_kv`` tokens."""
        if decodes <= 0:
            return 0.0
        a, b, c = self.decode_coef
        return (a + b * decodes) + c * decode_kv

    def prefill_ms(self, prefills: Sequence[int]) -> float:
        """Per-layer ms of prefill attention for prompts of ``prefills`` tokens."""
        if not prefills:
            return 0.0
        e0, e1, e2 = self.prefill_coef
        squares = float(sum(p * p for p in prefills))
        return e0 + e1 * math.sqrt(squares) + e2 * squares

    def decode_durations(self, decodes: int, decode_kv: int, steps: int) -> list[float]:
        """As :meth:`StepModel.decode_durations`: the arithmetic of :meth:`seconds`, in a loop."""
        if not 0 < decodes < _FAST_BATCH:
            return [self.seconds((), decodes, decode_kv + i * decodes) for i in range(steps)]
        a, b, c = self.decode_coef
        linear, layers = self._decode_linear[decodes], self.layers
        base = a + b * decodes
        out = []
        for i in range(steps):
            attention = base + c * (decode_kv + i * decodes)
            out.append((linear + attention) * layers / 1000.0)
        return out

    def seconds(self, prefills: Sequence[int], decodes: int, decode_kv: int) -> float:
        """The step's duration: the per-layer times summed, times the layers, in seconds."""
        if not prefills and 0 < decodes < _FAST_BATCH:  # the common step, kept cheap
            a, b, c = self.decode_coef
            attention = (a + b * decodes) + c * decode_kv
            return (self._decode_linear[decodes] + attention) * self.layers / 1000.0
        tokens = sum(prefills) + decodes
        if tokens <= 0:
            return 0.0
        per_layer = (
            self.linear_ms(tokens) + self.decode_ms(decodes, decode_kv) + self.prefill_ms(prefills)
        )
        return per_layer * self.layers / 1000.0


def step_model(name: str, step_ms: float | None = None) -> StepModel:
    """The step model ``name`` (:data:`STEP_MODELS`); ``constant`` needs ``step_ms``.

    Raises:
        ValueError: for an unknown name, ``constant`` without a ``step_ms`` > 0, or a
            ``step_ms`` given to the profiled model (its steps last what they compute).
    """
    if name == "constant":
        if step_ms is None:
            raise ValueError("expected --step-ms with --step-model constant")
        return ConstantStep(step_ms / 1000.0)
    if name == "a100-llama2-7b":
        if step_ms is not None:
            raise ValueError(
                "expected no --step-ms with --step-model a100-llama2-7b "
                "(its steps last what they compute)"
            )
        return ProfiledStep()
    raise ValueError(f"expected a step model among {', '.join(STEP_MODELS)}, found {name!r}")
