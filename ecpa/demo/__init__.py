"""``ecpa demo``: the main job end to end in a temporary directory (keys, a trust store,
signing, verifying, tampering, replaying, a live launch judged and withdrawn, the value
simulator). The command line hands in how to run ``ecpa`` in this process and where the
narrative goes, so the demo never imports the command line. :mod:`ecpa.demo.acts` names what
it shows; :mod:`ecpa.dev.pgcluster` is its throw-away PostgreSQL (``ecpa dev pg-up``).
Names are imported on first use, so the help and ``ecpa dev`` load none of the demo.

May import: every room below the command line (:mod:`ecpa.profile`, :mod:`ecpa.runtime`,
:mod:`ecpa.observer`, :mod:`ecpa.launcher`, :mod:`ecpa.corpus`, :mod:`ecpa.verify_jobs`),
:mod:`ecpa.errors`, :mod:`ecpa._files`, :mod:`ecpa._text`; never cli, never dla_plugin (the
driver and the simulator run as child processes).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ecpa.demo._steps import run_demo as run_demo
    from ecpa.demo._tour import Ecpa as Ecpa
    from ecpa.demo._tour import Say as Say

__all__ = ["Ecpa", "Say", "run_demo"]


def __getattr__(name: str) -> Any:
    """``run_demo``, ``Ecpa``, ``Say``, imported on first use (PEP 562)."""
    if name == "run_demo":
        from ecpa.demo._steps import run_demo

        return run_demo
    if name in ("Ecpa", "Say"):
        from ecpa.demo import _tour

        return getattr(_tour, name)
    raise AttributeError(f"module 'ecpa.demo' has no attribute {name!r}")
