"""``python -m ecpa``: the command line."""

import sys

from ecpa.cli import main

sys.exit(main())
