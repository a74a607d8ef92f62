"""Tests of ``ecpa.corpus``: the generated corpora, the runner and the cross-checks
(docs/conformance.md)."""
