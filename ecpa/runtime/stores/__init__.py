"""Stores shared across hosts (RUNTIME.md "Replay fence"; docs/runtime.md "Evidence
store"): the durable replay fences (SQLite, PostgreSQL), the one place that opens the fence
a status asks for, the PostgreSQL evidence store and ``ecpa status --db`` over it, and the
operator's trust store (docs/keys.md), which every reader of either trusts keys by.

May import: :mod:`ecpa.runtime.judge`, :mod:`ecpa.runtime.model`, :mod:`ecpa.profile`,
:mod:`ecpa.errors`, :mod:`ecpa._files`.
"""
