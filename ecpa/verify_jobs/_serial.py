"""``ecpa verify`` in one process: today's loop, the reference whose output ``--jobs``
gives byte for byte."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from ecpa.errors import EcpaError, ErrorCode
from ecpa.profile.trust import TrustStore
from ecpa.profile.verify import Binding, Policy, explain_signature_failure
from ecpa.runtime import issued_at_of, verify_evidence
from ecpa.verify_jobs._inputs import Item, evidence_items

if TYPE_CHECKING:
    from ecpa.runtime import ReplayFence
from ecpa.verify_jobs._results import Advance, Echo, Tally, ok_fields, render_result

__all__ = ["verify_in_process"]


def verify_in_process(
    specs: list[str],
    payload: Path | None,
    *,
    store: TrustStore,
    now: int | None,
    policy: Policy,
    binding: Binding | None,
    fence: ReplayFence | None,
    as_json: bool,
    stdout: TextIO,
    echo: Echo,
    advance: Advance | None = None,
) -> Tally:
    """Verify every item of the EVIDENCE arguments ``specs`` in this process, in order, at
    ``now`` by ``policy`` (and ``binding``, and ``fence`` last), printing its result line
    (``as_json``: a JSON object); return how many passed and failed (told to ``advance``
    as they come). ``now`` None: each item as of
    its own ``issued_at`` (``--at-issue``), said on its line.

    Lines go to ``stdout``, the stream ``echo`` writes to (nothing to strip: results never
    hold a control character), but not flushed one by one as it does: they are flushed line
    by line only when a replay fence records nonces (a printed OK is a consumed nonce), else
    by the stream's buffering, and always before ``echo`` writes to standard error.

    Raises:
        EcpaError: after the result lines before it: an input that is not evidence, or a
            fence that cannot be used (``ECPA_REPLAY_STORE``), both exit 2.
    """
    out = stdout
    items = failed = 0

    def warn(line: str) -> None:
        out.flush()
        echo(line, err=True)

    try:
        for spec in specs:
            for item in evidence_items(spec, payload, warn=warn):
                statement = None
                at = None
                if item.evidence is not None and now is None:
                    at = issued_at_of(item.evidence.payload) or 0
                if item.evidence is not None:
                    try:
                        verified = verify_evidence(
                            item.evidence,
                            store,
                            now=now if now is not None else at or 0,
                            policy=policy,
                            binding=binding,
                            replay=fence,
                        )
                    except EcpaError as exc:
                        if exc.code is ErrorCode.REPLAY_STORE:
                            raise  # the fence itself failed: the command stops, exit 2
                        ev = item.evidence
                        exc = explain_signature_failure(exc, ev.payload, ev.detached_jws, store)
                        item = Item(item.input, item.line, item.evidence, exc)
                    else:
                        st = verified.statement
                        # A text line shows four members; only JSON output needs them all.
                        statement = st.to_dict() if as_json else ok_fields(st)
                items, failed = items + 1, failed + (item.error is not None)
                if advance is not None:
                    advance(1)
                text = render_result(
                    item.input, item.line, item.error, statement, as_json, verified_at=at
                )
                if text is not None:
                    out.write(text + "\n")
                    if fence is not None:
                        out.flush()
    finally:
        out.flush()
    return Tally(items - failed, failed)
