"""The in-process observer (RUNTIME.md "Observer", "Hot-path budget"): counters on the
scheduler's thread (:class:`Observer`, :func:`process_observer`; its configuration resolved
by :mod:`~ecpa.observer._config`), the record builder
(:mod:`~ecpa.observer.record`) and the sink that appends off the hot path
(:mod:`~ecpa.observer._sink`); the process-wide observer (:mod:`~ecpa.observer._process`);
the vLLM-HUST host's evidence sink (:mod:`~ecpa.observer.host_sink`, its recorder
:mod:`~ecpa.observer._host`), whose journal's account every record then carries.

May import: :mod:`ecpa.profile`, :mod:`ecpa.runtime`, :mod:`ecpa.errors`; never launcher,
corpus or cli.
"""

from ecpa.observer._observer import ABSTENTION, CHANGED, FAILURE, SELECTION, Observer
from ecpa.observer._process import process_observer
from ecpa.observer.record import DEFAULT_EMIT_INTERVAL_S, EMIT_INTERVAL_ENV

__all__ = [
    "ABSTENTION",
    "CHANGED",
    "DEFAULT_EMIT_INTERVAL_S",
    "EMIT_INTERVAL_ENV",
    "FAILURE",
    "SELECTION",
    "Observer",
    "process_observer",
]
