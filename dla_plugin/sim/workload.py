"""Workloads for the DLA value check (DLA.md "Value check (simulator)"): traces and predictions.

- :func:`synthetic`: a bursty, heavy-tailed synthetic trace with documented parameters
  (:class:`SyntheticParams`);
- :func:`load_burstgpt` / :func:`load_burstgpt_report`: a real BurstGPT CSV file;
- predictions of output lengths are in :mod:`dla_plugin.sim.predict`.

Everything is deterministic for its arguments (seeds included) and reads no clock or
environment. Every problem with an input raises :class:`WorkloadError`, whose message names
the file, line and column when there are any, and what was expected and what was found.
"""

from __future__ import annotations

import functools
import itertools
import math
import os
import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from dla_plugin.sim.burstgpt import RowProblem, WorkloadCode, read_rows, show

__all__ = [
    "Job",
    "LoadReport",
    "SyntheticParams",
    "WorkloadCode",
    "WorkloadError",
    "load_burstgpt",
    "load_burstgpt_report",
    "located",
    "synthetic",
    "synthetic_stream",
]


# The prediction models (DLA.md "prediction error", in dla_plugin.sim.predict): the true length,
# additive normal noise (sd 0.5 and 1.0 times the length), log-normal noise (log-sd 0.5 and
# 1.0), a systematic 50% over-estimate, and no prediction.

_MAX_JOBS = 10_000_000  # bound for synthetic(n): beyond it a trace is a mistake, not a workload
_POISSON_CHUNK = 30.0  # Knuth's method is exact and fast for small means; larger ones are split


class WorkloadError(ValueError):
    """A problem with a workload input: a trace file, a generator or loader argument.

    Attributes ``code`` (a stable :data:`WorkloadCode`), ``expected``, ``found`` and, when
    known, ``path``, ``line`` (1-based; the header is line 1) and ``column`` (a column name).
    """

    def __init__(
        self,
        code: WorkloadCode,
        expected: str,
        found: str,
        *,
        path: str | None = None,
        line: int | None = None,
        column: str | None = None,
    ) -> None:
        where = [] if path is None else [path]
        if line is not None:
            where = [f"{where[0]}:{line}" if where else f"line {line}"]
        if column is not None:
            where.append(f"column {column!r}")
        prefix = ": ".join(where) + ": " if where else ""
        super().__init__(f"{prefix}expected {expected}, found {found} [{code}]")
        self.code: WorkloadCode = code
        self.expected = expected
        self.found = found
        self.path = path
        self.line = line
        self.column = column

    def __reduce__(self) -> tuple[Any, ...]:
        # Keyword-only arguments: pickle (multiprocessing) needs to be told how to rebuild.
        rebuild = functools.partial(
            WorkloadError, path=self.path, line=self.line, column=self.column
        )
        return (rebuild, (self.code, self.expected, self.found))


def located(problem: RowProblem, path: str) -> WorkloadError:
    """The :class:`WorkloadError` of a file's ``problem``, naming the file ``path``."""
    return WorkloadError(
        problem.code,
        problem.expected,
        problem.found,
        path=path,
        line=problem.line,
        column=problem.column,
    )


def _params_error(name: str, expected: str, value: object) -> WorkloadError:
    return WorkloadError("params", f"{name} to be {expected}", repr(value))


def _int(name: str, value: object, low: int, high: int | None = None) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise _params_error(name, f"an integer >= {low}", value)
    if high is not None and value > high:
        raise _params_error(name, f"an integer <= {high}", value)


def _float(name: str, value: object, low: float, high: float = math.inf) -> None:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not (math.isfinite(value) and low <= value <= high)
    ):
        bounds = f"<= {high}" if math.isfinite(high) else "finite"
        raise _params_error(name, f"a number >= {low}, {bounds}", value)


@dataclass(frozen=True)
class Job:
    """One request of a trace.

    Raises:
        WorkloadError: (``params``) for a negative or non-finite arrival, or a token count
            below 1.
    """

    arrival_s: float  # seconds since the trace start (first job at 0.0), non-decreasing
    prompt_tokens: int  # >= 1
    output_tokens: int  # >= 1 (the true output length)

    def __post_init__(self) -> None:
        _float("Job.arrival_s", self.arrival_s, 0.0)
        _int("Job.prompt_tokens", self.prompt_tokens, 1)
        _int("Job.output_tokens", self.output_tokens, 1)


# ---------------------------------------------------------------------------------------------
# Synthetic traces


@dataclass(frozen=True)
class SyntheticParams:
    """The synthetic trace: bursty Poisson arrivals, log-normal prompts, Pareto outputs.

    Each second of the trace is a burst with probability ``burst_prob``; its number of
    arrivals is Poisson with mean ``rate_per_s`` (times ``burst_factor`` in a burst), spread
    uniformly within the second. The expected overall rate is therefore
    ``rate_per_s * (1 - burst_prob + burst_prob * burst_factor)`` (1.35/s by default).
    Prompts are log-normal with the given median and log-sd; outputs are
    ``floor(output_min * Pareto(output_alpha))`` (median ``output_min * 2 ** (1 / alpha)``,
    about 342 by default, with an infinite variance for ``alpha <= 2``). Both are capped at
    ``max_tokens`` separately.

    The default lengths sit near BurstGPT's: the first 38 non-failed rows of its
    ``BurstGPT_1.csv`` (as shown by the dataset's public viewer) have a median of 594
    request tokens and 337 response tokens. The default rate keeps a 2,048-block pool
    (32,768 tokens) busy enough to preempt, without an ever-growing queue.
    """

    rate_per_s: float = 1.0  # mean arrival rate outside bursts
    burst_prob: float = 0.05  # chance that a given second is a burst
    burst_factor: float = 8.0  # arrival rate multiplier during a burst
    prompt_median: int = 600  # log-normal prompts (median, sigma)
    prompt_sigma: float = 1.0
    output_alpha: float = 1.2  # Pareto (heavy-tailed) outputs: alpha, minimum
    output_min: int = 192
    max_tokens: int = 2048  # cap for prompt and for output separately

    def check(self) -> None:
        """Check every parameter's type and range.

        Raises:
            WorkloadError: (``params``) naming the parameter, its bounds and its value.
                ``rate_per_s`` must lie in [0.01, 1e6] (a sparser trace would spend its time
                drawing empty seconds), ``burst_prob`` in [0, 1], ``burst_factor`` in
                [1, 1000], ``prompt_sigma`` in [0, 10], ``output_alpha`` in [0.1, 100] (so
                a draw never overflows); ``prompt_median`` and ``output_min`` in
                [1, ``max_tokens``].
        """
        _float("rate_per_s", self.rate_per_s, 0.01, 1e6)
        _float("burst_prob", self.burst_prob, 0.0, 1.0)
        _float("burst_factor", self.burst_factor, 1.0, 1000.0)
        _int("max_tokens", self.max_tokens, 1)
        _int("prompt_median", self.prompt_median, 1, self.max_tokens)
        _float("prompt_sigma", self.prompt_sigma, 0.0, 10.0)
        _float("output_alpha", self.output_alpha, 0.1, 100.0)
        _int("output_min", self.output_min, 1, self.max_tokens)


def _poisson(rng: random.Random, mean: float) -> int:
    """A Poisson draw: Knuth's product of uniforms, over chunks of the mean (a sum of
    independent Poisson counts is Poisson), so ``exp(-mean)`` never underflows."""
    count = 0
    while mean > 0:
        chunk = min(mean, _POISSON_CHUNK)
        mean -= chunk
        limit, p = math.exp(-chunk), rng.random()
        while p > limit:
            count += 1
            p *= rng.random()
    return count


def synthetic(n: int, seed: int, params: SyntheticParams = SyntheticParams()) -> list[Job]:
    """``n`` jobs of a bursty, heavy-tailed synthetic trace (see :class:`SyntheticParams`),
    the first at 0.0 s: the first ``n`` of :func:`synthetic_stream`. Deterministic for
    ``(n, seed, params)``.

    Raises:
        WorkloadError: (``params``) for ``n`` outside [1, 10**7], a seed that is not an
            integer, or a parameter out of range (:meth:`SyntheticParams.check`).
    """
    _int("n", n, 1, _MAX_JOBS)
    return list(itertools.islice(synthetic_stream(seed, params), n))


def synthetic_stream(seed: int, params: SyntheticParams = SyntheticParams()) -> Iterator[Job]:
    """The endless synthetic trace of ``seed``, the first job at 0.0 s (a scheduler that runs
    for a given time reads as much of it as it needs).

    Raises:
        WorkloadError: (``params``) for a seed that is not an integer or a parameter out of
            range, when called (not on the first ``next``).
    """
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise _params_error("seed", "an integer", seed)
    params.check()
    return _stream(random.Random(seed), params)  # noqa: S311 - reproducible, not a secret


def _stream(rng: random.Random, params: SyntheticParams) -> Iterator[Job]:
    log_median = math.log(params.prompt_median)
    start: float | None = None
    second = 0
    while True:
        burst = rng.random() < params.burst_prob
        mean = params.rate_per_s * (params.burst_factor if burst else 1.0)
        for at in sorted(second + rng.random() for _ in range(_poisson(rng, mean))):
            prompt = round(rng.lognormvariate(log_median, params.prompt_sigma))
            output = math.floor(params.output_min * rng.paretovariate(params.output_alpha))
            start = at if start is None else start
            yield Job(
                at - start,
                max(1, min(prompt, params.max_tokens)),
                max(1, min(output, params.max_tokens)),
            )
        second += 1


# ---------------------------------------------------------------------------------------------
# BurstGPT


@dataclass(frozen=True)
class LoadReport:
    """What :func:`load_burstgpt_report` did with the data rows it read.

    ``rows = kept + skipped_zero + filtered`` (rows after the ``limit``-th kept one are not
    read); ``clamped`` counts kept jobs with a token count cut to ``max_tokens``.
    """

    rows: int  # data rows read
    kept: int  # jobs returned
    skipped_zero: int  # rows with 0 request or 0 response tokens (failed requests), skipped
    clamped: int  # kept jobs whose prompt or output was cut to max_tokens
    filtered: int  # rows of another model or log type than asked for


def load_burstgpt_report(
    path: str | os.PathLike[str],
    *,
    limit: int | None = None,
    model: str | None = None,
    log_type: str | None = None,
    max_tokens: int = 2048,
) -> tuple[list[Job], LoadReport]:
    """The jobs of a BurstGPT CSV file, and what was kept, skipped, clamped and filtered.

    The header must hold exactly the columns ``Timestamp, Model, Request tokens, Response
    tokens, Total tokens, Log Type`` (in the order the file gives). Each row's Timestamp is
    a non-negative number of seconds, not smaller than the previous row's; the token counts
    are non-negative integers with Total tokens = Request tokens + Response tokens; Model and
    Log Type are free text. The file may open with a UTF-8 byte order mark, use CRLF line
    ends, and end with blank lines. It is read one line at a time.

    Rows are taken in this order: rows of another ``model`` or ``log_type`` (exact match,
    when given) are filtered out; rows with 0 request or 0 response tokens are skipped —
    BurstGPT records failed requests with 0 response tokens, and a job needs at least one
    token of each; the token counts of the rest are clamped to ``max_tokens`` each. A job
    arrives at its Timestamp minus the first kept row's. Reading stops after ``limit`` jobs.

    Raises:
        WorkloadError: (``params``) for ``limit`` or ``max_tokens`` below 1; (``io``) when
            the file cannot be read; (``encoding``, ``header``, ``row``, ``value``,
            ``total``, ``order``) for a file that breaks the format, naming its line and
            column; (``empty``) when no job is left.
    """
    if limit is not None:
        _int("limit", limit, 1)
    _int("max_tokens", max_tokens, 1)
    for name, value in (("model", model), ("log_type", log_type)):
        if value is not None and not isinstance(value, str):
            raise _params_error(name, "a string or None", value)
    name = os.fspath(path)
    jobs: list[Job] = []
    rows = skipped = clamped = filtered = 0
    seen: dict[str, set[str]] = {"Model": set(), "Log Type": set()}
    first: float | None = None
    try:
        with open(name, "rb") as stream:
            for row in read_rows(stream):
                rows += 1
                for column, value in (("Model", row.model), ("Log Type", row.log_type)):
                    if len(seen[column]) < 10:  # for the message when nothing is kept
                        seen[column].add(value)
                if (model is not None and row.model != model) or (
                    log_type is not None and row.log_type != log_type
                ):
                    filtered += 1
                    continue
                if row.request_tokens == 0 or row.response_tokens == 0:
                    skipped += 1
                    continue
                prompt = min(row.request_tokens, max_tokens)
                output = min(row.response_tokens, max_tokens)
                clamped += (prompt, output) != (row.request_tokens, row.response_tokens)
                first = row.timestamp if first is None else first
                jobs.append(Job(row.timestamp - first, prompt, output))
                if limit is not None and len(jobs) >= limit:
                    break
    except RowProblem as problem:
        raise located(problem, name) from None
    except OSError as exc:
        raise WorkloadError("io", "a readable file", exc.strerror or str(exc), path=name) from exc
    if not jobs:
        if rows == 0:
            raise WorkloadError("empty", "at least one data row", "only the header", path=name)
        values = "; ".join(
            f"{column} values seen: " + ", ".join(map(show, sorted(found)))
            for column, found in seen.items()
        )
        raise WorkloadError(
            "empty",
            "at least one job"
            + (f" with model={model!r}" if model is not None else "")
            + (f" and log_type={log_type!r}" if log_type is not None else ""),
            f"none of {rows} rows kept ({filtered} filtered out, {skipped} with 0 tokens); "
            + values,
            path=name,
        )
    return jobs, LoadReport(rows, len(jobs), skipped, clamped, filtered)


def load_burstgpt(
    path: str | os.PathLike[str],
    *,
    limit: int | None = None,
    model: str | None = None,
    log_type: str | None = None,
    max_tokens: int = 2048,
) -> list[Job]:
    """The jobs of a BurstGPT CSV file: :func:`load_burstgpt_report` without the report.

    Raises:
        WorkloadError: as :func:`load_burstgpt_report`.
    """
    jobs, _ = load_burstgpt_report(
        path, limit=limit, model=model, log_type=log_type, max_tokens=max_tokens
    )
    return jobs
