"""Tooling for developers beside the ``ecpa dev`` command: a throw-away PostgreSQL cluster
(:mod:`.pgcluster`) for the tests, the benches and the demo. Nothing here is needed to sign,
verify or judge evidence.

May import: the standard library only (``scripts/pg-up`` runs :mod:`.pgcluster` before
any install).
"""
