"""``ecpa serve``: the verdicts of launches where operators look (docs/serve.md): an HTTP API
(``/v1/launches``), Prometheus metrics (``/metrics``), a status page (``/``) and a probe
(``/healthz``), read-only, over evidence directories and the evidence store.

:mod:`~ecpa.serve.board` judges every launch once per refresh; :mod:`~ecpa.serve.app` serves
the newest judgement behind its guard; :mod:`~ecpa.serve.metrics` and
:mod:`~ecpa.serve.page` render it; :mod:`~ecpa.serve.server` runs it all on uvicorn. Needs the
``serve`` extra (FastAPI, uvicorn, prometheus_client); nothing else imports this room.

May import: :mod:`ecpa.runtime`, :mod:`ecpa.launcher`, :mod:`ecpa.profile`, ``ecpa.errors``,
``ecpa._files``.
"""

from __future__ import annotations

__all__: list[str] = []
