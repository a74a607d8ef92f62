"""``python -m ecpa``: the command line."""

from ecpa.cli import script

script()
