"""Shared pytest configuration: hypothesis settings profiles.

``CI`` set in the environment loads the "ci" profile (derandomized, no example database) so
that a run is reproducible; otherwise hypothesis's default profile applies. Tests set their
own ``max_examples`` and ``deadline``.
"""

from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, database=None, print_blob=True, deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else "default")
