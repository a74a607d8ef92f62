"""``ecpa verify`` over many inputs: the EVIDENCE arguments read as items, each verified and
its result line rendered the same way wherever it was verified, in this process or by N
worker processes (``--jobs``), whose output is byte for byte that of one process. The command
line parses the options, calls this room, and maps the outcome to an exit status.

Names are imported on first use: verifying in this process never loads the worker pool.

May import: :mod:`ecpa.profile`, :mod:`ecpa.runtime`, :mod:`ecpa.errors`,
:mod:`ecpa._files`, :mod:`ecpa._text`; never observer, launcher, corpus, demo or cli.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ecpa.verify_jobs._inputs import Item as Item
    from ecpa.verify_jobs._inputs import evidence_items as evidence_items
    from ecpa.verify_jobs._parallel import VerifyConfig as VerifyConfig
    from ecpa.verify_jobs._parallel import verify_with_jobs as verify_with_jobs
    from ecpa.verify_jobs._results import Advance as Advance
    from ecpa.verify_jobs._results import Echo as Echo
    from ecpa.verify_jobs._results import Tally as Tally
    from ecpa.verify_jobs._serial import verify_in_process as verify_in_process

_EXPORTS = {
    "Advance": "_results",
    "Echo": "_results",
    "Item": "_inputs",
    "Tally": "_results",
    "VerifyConfig": "_parallel",
    "evidence_items": "_inputs",
    "verify_in_process": "_serial",
    "verify_with_jobs": "_parallel",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    """An exported name, imported from its module on first use (PEP 562)."""
    try:
        module = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module 'ecpa.verify_jobs' has no attribute {name!r}") from None
    return getattr(importlib.import_module(f"ecpa.verify_jobs.{module}"), name)
