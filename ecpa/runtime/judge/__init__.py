"""The pure judgement (RUNTIME.md "Deriving runtime_effective"): records checked against the
expected launch, streams and histories walked, each log decided from its end, the verdict
per slot and its reasons, each with a stable code (:mod:`~ecpa.runtime.judge.reasons`).
Every log is a :class:`~ecpa.runtime.judge.sources.LogSource` given by the caller, and what
a status or audit judges with is one :class:`~ecpa.runtime.judge.context.Judgement`: nothing
here opens a file or a store.

May import: :mod:`ecpa.runtime.model`, :mod:`ecpa.profile`, :mod:`ecpa.errors`,
:mod:`ecpa._files`.
"""
