"""``python -m bench``: every benchmark, one table (see :mod:`bench.run`)."""

import sys

from bench.run import main

sys.exit(main())
