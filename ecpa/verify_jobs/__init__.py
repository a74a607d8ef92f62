"""``ecpa verify`` over many inputs: the EVIDENCE arguments read as items, each verified and
its result line rendered the same way wherever it was verified, in this process or by N
worker processes (``--jobs``), whose output is byte for byte that of one process. The command
line parses the options, calls this room, and maps the outcome to an exit status.

May import: :mod:`ecpa.profile`, :mod:`ecpa.runtime`, :mod:`ecpa.errors`,
:mod:`ecpa._files`, :mod:`ecpa._text`; never observer, launcher, corpus, demo or cli.
"""

from ecpa.verify_jobs._inputs import Item, evidence_items
from ecpa.verify_jobs._parallel import VerifyConfig, verify_with_jobs
from ecpa.verify_jobs._results import Advance, Echo, Tally
from ecpa.verify_jobs._serial import verify_in_process

__all__ = [
    "Advance",
    "Echo",
    "Item",
    "Tally",
    "VerifyConfig",
    "evidence_items",
    "verify_in_process",
    "verify_with_jobs",
]
