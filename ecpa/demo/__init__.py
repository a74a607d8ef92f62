"""``ecpa demo``: the main job end to end in a temporary directory (keys, a trust store,
signing, verifying, tampering, replaying, a live launch judged and withdrawn, the value
simulator). The command line hands in how to run ``ecpa`` in this process and where the
narrative goes, so the demo never imports the command line.

May import: every room below the command line (:mod:`ecpa.profile`, :mod:`ecpa.runtime`,
:mod:`ecpa.observer`, :mod:`ecpa.launcher`, :mod:`ecpa.corpus`, :mod:`ecpa.verify_jobs`),
:mod:`ecpa.errors`, :mod:`ecpa._files`, :mod:`ecpa._text`; never cli, never dla_plugin (the
driver and the simulator run as child processes).
"""

from ecpa.demo._steps import run_demo
from ecpa.demo._tour import Ecpa, Say

__all__ = ["Ecpa", "Say", "run_demo"]
