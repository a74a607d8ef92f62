"""``python -m dla_plugin.sim``: the DLA value simulator's table (:mod:`dla_plugin.sim.report`)."""

import os
import sys

from dla_plugin.sim.report import main

try:
    status = main()
    sys.stdout.flush()
except BrokenPipeError:  # the reader went away (``| head``): stop quietly, as other tools do
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    status = 1
raise SystemExit(status)
