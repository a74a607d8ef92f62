"""The host's own witness in a verdict (docs/host-evidence.md): what a process's newest record
says the vLLM-HUST host saw of its policy (:class:`~ecpa.runtime.model.counters.HostCounts`),
judged as the launch asks.

Under ``host_evidence: "required"`` the host backs the slot: condition 2 (selections > 0)
and the abstention rule are read from the host's counts, never the plugin's, and a slot
whose process the host witnessed nothing of is not covered. Either way, a policy the host
disabled (an ``exception`` or ``invalid`` dispatch) makes the slot false: the host no longer
asks it.
"""

from __future__ import annotations

from typing import Any

from ecpa.runtime.judge.reasons import Reason, ReasonCode
from ecpa.runtime.model.counters import Counters, HostCounts
from ecpa.runtime.model.launch import ExpectedLaunch

__all__ = [
    "SOURCE_HOST",
    "SOURCE_PLUGIN",
    "disabled_reason",
    "host_checks",
    "host_view",
    "newest_dispatch",
    "source",
]

#: What backs a slot's verdict: the host's witness, or the plugin's own reports.
SOURCE_HOST = "host"
SOURCE_PLUGIN = "plugin"


def source(expected: ExpectedLaunch) -> str:
    """Which evidence backs the launch's slots."""
    return SOURCE_HOST if expected.host_evidence == "required" else SOURCE_PLUGIN


def newest_dispatch(expected: ExpectedLaunch, counters: Counters) -> int | None:
    """The Unix second of the newest dispatch as the slot's source says it (``--max-idle``):
    the host's, when its witness is required, else the plugin's."""
    if source(expected) == SOURCE_HOST:
        return None if counters.host is None else counters.host.last_dispatch_at
    return counters.last_dispatch_at


def host_view(host: HostCounts | None) -> dict[str, Any]:
    """A slot's ``host`` in ``ecpa status --json``: whether a policy was resolved and which,
    the dispatches by outcome, and the digest of the newest journal line accounted for."""
    return {
        "resolved": host is not None and host.resolutions > 0,
        "policy": None if host is None else host.policy,
        "dispatches": {
            "selected": 0 if host is None else host.selected,
            "abstained": 0 if host is None else host.abstained,
            "invalid": 0 if host is None else host.invalid,
            "exception": 0 if host is None else host.exception,
        },
        "newest_event_digest": None if host is None else host.newest_event_digest,
    }


def _counts(host: HostCounts) -> str:
    return (
        f"{host.dispatches:,} dispatches: selected {host.selected:,}, abstained "
        f"{host.abstained:,}, invalid {host.invalid:,}, exception {host.exception:,}"
    )


def disabled_reason(host: HostCounts | None) -> Reason | None:
    """``host_policy_disabled`` when the host witnessed the policy fail, else None."""
    if host is None or not (host.invalid or host.exception):
        return None
    text = (
        f"host disabled the policy: it raised on {host.exception:,} and returned an unknown "
        f"request on {host.invalid:,} dispatch(es); the host's builtin victim stands"
    )
    return Reason(ReasonCode.HOST_POLICY_DISABLED, text)


def host_checks(
    expected: ExpectedLaunch,
    host: HostCounts | None,
    now: int,
    failed: list[Reason],
    passed: list[Reason],
) -> None:
    """Condition 2 and the abstention rule from the host's counts (host evidence
    required), appending to ``failed`` and ``passed``."""
    if host is None or host.resolutions + host.dispatches == 0:
        text = (
            "host evidence missing: the plan requires the host's witness, and the host "
            "delivered no policy resolution or dispatch of this process"
        )
        failed.append(Reason(ReasonCode.HOST_EVIDENCE_MISSING, text))
        return
    wanted = expected.host_policy
    if wanted is not None and host.policy != wanted:
        text = f"host resolved policy {host.policy!r}, the plan names {wanted!r}"
        failed.append(Reason(ReasonCode.HOST_POLICY_MISMATCH, text))
    disabled = disabled_reason(host)
    if disabled is not None:
        failed.append(disabled)
    if host.lost:
        text = (
            f"host evidence sink failed: {host.lost:,} event(s) could not be recorded, "
            "and the host delivers no more"
        )
        failed.append(Reason(ReasonCode.HOST_SINK_FAILED, text))
    if host.refused_scheduler:
        text = (
            f"host events refused: {host.refused_scheduler:,} resolution(s) or dispatch(es) "
            "of this process could not be counted (another policy, out of order, not bound: "
            "its refusal log says which)"
        )
        failed.append(Reason(ReasonCode.HOST_EVENTS_REFUSED, text))
    if host.selected == 0:
        cause = "the host has not dispatched it" if not host.dispatches else _counts(host)
        text = f"host witnessed no selection by policy {host.policy!r}: {cause}"
        failed.append(Reason(ReasonCode.HOST_NO_SELECTIONS, text))
        return
    text = f"host witnessed policy {host.policy!r}: {_counts(host)}"
    passed.append(Reason(ReasonCode.HOST_SELECTIONS, text))
    last_call, last_selection = host.last_dispatch_at, host.last_selection_at
    assert last_call is not None, "HostCounts: a dispatch time exactly when dispatched"
    assert last_selection is not None, "HostCounts: a selection time exactly when selected"
    span, limit = last_call - last_selection, expected.max_abstain_s
    if span > limit:
        text = (
            f"abstaining (host): dispatched for {span} s after its newest selection without "
            f"selecting (max_abstain_s {limit} s; {_counts(host)})"
        )
        failed.append(Reason(ReasonCode.ABSTAINING, text))
    else:
        text = (
            f"selecting (host): newest selected dispatch {now - last_selection} s ago, "
            f"dispatches without a selection for {max(span, 0)} s at most "
            f"(max_abstain_s {limit} s)"
        )
        passed.append(Reason(ReasonCode.SELECTING, text))
