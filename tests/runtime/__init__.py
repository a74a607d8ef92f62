"""Tests of ``ecpa.runtime``: evidence, processes, replay fences, derivation, status and ship
(RUNTIME.md, docs/runtime.md)."""
