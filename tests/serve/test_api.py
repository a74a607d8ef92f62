"""``ecpa serve``'s API, metrics, page and guard, on uvicorn in the test's process over
launch directories with a fake ``/proc`` (docs/serve.md)."""

from __future__ import annotations

import gzip
import json
import multiprocessing
import os
import re
import shutil
import signal
import socket
import time
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

import pytest

from bench.launchdir import HOST
from ecpa.errors import EcpaError, ErrorCode
from ecpa.launcher.lifecycle import launch_dir_binding, status_document
from ecpa.runtime import (
    EXIT_SCHEMA,
    judge_launches,
    list_source,
    merge_parts,
    status_from_launch_dir,
)
from ecpa.serve.board import Board
from ecpa.serve.encoding import accepts_gzip
from ecpa.serve.server import Listen, bind
from ecpa.serve.shares import Shares
from tests.serve._served import (
    Served,
    launch_id,
    render_dom,
    sample,
    served,
    sources_of,
    write_runs,
)

ONE = launch_id(1)
TOKEN = b"s3cret-token-0123456789abcdef"


def test_the_listing_and_a_launch_document_are_the_status_derivation(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    written = write_runs(runs, 2)
    with served(sources_of(runs, written)) as srv:
        listing = srv.get_json("/v1/launches")
        assert [x["launch_id"] for x in listing["launches"]] == [ONE, launch_id(2)]
        first = listing["launches"][0]
        assert first["runtime_effective"] is True
        assert first["coverage"] == {"covered": 2, "slots": 2}
        assert first["ended"] is False
        assert listing["stale"] is False
        assert [s["name"] for s in listing["skipped"]] == ["proc"]  # the fake /proc: no launch
        doc = srv.get_json(f"/v1/launches/{ONE}")
    # The same document `ecpa status --json` prints, judged at the board's time.
    directory = written[0].directory
    status = status_from_launch_dir(
        directory, now=doc["now"], proc_root=written[0].proc_root, host=HOST
    )
    want = status_document(status, launch_dir_binding(directory))
    assert {k: v for k, v in doc.items() if k not in ("launch_id", "source")} == want
    assert doc["launch_id"] == ONE
    assert set(doc["lifecycle"]) == {"installed", "configured", "enabled", "runtime_effective"}
    assert doc["lifecycle"]["runtime_effective"]["state"] is True


def test_a_refresh_reads_the_installed_bundle_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each launch's document says whether the bundle is installed; the bundle is read
    once a refresh, whatever the number of launches (each reading scans every installed
    distribution's entry points), and again at the next refresh (installed meanwhile)."""
    from ecpa.errors import ErrorCode
    from ecpa.serve import board as board_module

    calls: list[int] = []
    answers = iter(["missing", "missing", "installed"])

    def manifest() -> tuple[str, bytes]:
        calls.append(1)
        if next(answers) == "missing":
            raise EcpaError(ErrorCode.INVALID_INPUT, "no bundle, as a test says")
        return "a test's manifest", b"{}"

    monkeypatch.setattr(board_module, "bundle_manifest", manifest)
    runs = tmp_path / "runs"
    written = write_runs(runs, 3)
    with served(sources_of(runs, written)) as srv:  # one refresh
        assert len(calls) == 1
        stages = [srv.get_json(f"/v1/launches/{launch_id(n)}")["lifecycle"] for n in (1, 2, 3)]
        assert all("no bundle, as a test says" in s["installed"]["detail"] for s in stages)
        srv.board.refresh()
        srv.board.refresh()
        assert len(calls) == 3
        installed = srv.get_json(f"/v1/launches/{ONE}")["lifecycle"]["installed"]
        assert "a test's manifest has digest sha256:" in installed["detail"]


def test_once_answers_as_the_first_call_did() -> None:
    from ecpa.errors import ErrorCode
    from ecpa.launcher.lifecycle import once

    calls: list[int] = []

    def fails() -> tuple[str, bytes]:
        calls.append(1)
        raise EcpaError(ErrorCode.INVALID_INPUT, "gone")

    read = once(fails)
    for _ in range(3):
        with pytest.raises(EcpaError, match="gone") as caught:
            read()
        assert caught.value.code is ErrorCode.INVALID_INPUT
    assert calls == [1]
    good = once(lambda: ("where", b"data"))
    assert good() == good() == ("where", b"data")


def test_metrics_name_each_launch_and_slot(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    written = write_runs(runs, 1, slots=3)
    with served(sources_of(runs, written)) as srv:
        text = srv.metrics_text()
    assert sample(text, "ecpa_runtime_effective", launch_id=ONE) == 1.0
    assert sample(text, "ecpa_launch_ended", launch_id=ONE) == 0.0
    assert sample(text, "ecpa_launch_slots", launch_id=ONE) == 3.0
    for slot in ("scheduler.0", "scheduler.1", "scheduler.2"):
        assert sample(text, "ecpa_slot_covered", launch_id=ONE, slot=slot) == 1.0
        assert sample(text, "ecpa_slot_evidence_age_seconds", launch_id=ONE, slot=slot) is not None
        # bench.launchdir's newest record (seq 3) counts 12 calls, 9 selections, 3 abstentions
        assert sample(text, "ecpa_slot_calls_total", launch_id=ONE, slot=slot) == 12.0
        assert sample(text, "ecpa_slot_selections_total", launch_id=ONE, slot=slot) == 9.0
        assert sample(text, "ecpa_slot_abstentions_total", launch_id=ONE, slot=slot) == 3.0
        assert sample(text, "ecpa_slot_failures_total", launch_id=ONE, slot=slot) == 0.0
    assert sample(text, "ecpa_serve_derivation_seconds_count") == 1.0
    assert sample(text, "ecpa_serve_stale") == 0.0
    assert sample(text, "ecpa_serve_source_up", source=str(runs)) == 1.0


def test_what_backs_each_slot_and_what_the_host_witnessed(tmp_path: Path) -> None:
    """API, metrics and page say the source of each slot's verdict and the host's counts."""
    runs = tmp_path / "runs"
    written = write_runs(runs, 1, slots=2, host_evidence=True)
    with served(sources_of(runs, written)) as srv:
        doc = srv.get_json(f"/v1/launches/{ONE}")
        text = srv.metrics_text()
        _, _, page = srv.request("GET", "/")
    assert doc["runtime_effective"] is True
    for slot in doc["slots"]:
        assert slot["source"] == "host"
        assert slot["host"]["resolved"] is True
        assert slot["host"]["dispatches"]["selected"] == 9  # the newest record, seq 3
        name = slot["slot"]
        assert (
            sample(text, "ecpa_slot_evidence_source", launch_id=ONE, slot=name, source="host")
            == 1.0
        )
        assert (
            sample(
                text,
                "ecpa_slot_host_dispatches_total",
                launch_id=ONE,
                slot=name,
                outcome="selected",
            )
            == 9.0
        )
        assert (
            sample(
                text,
                "ecpa_slot_host_dispatches_total",
                launch_id=ONE,
                slot=name,
                outcome="exception",
            )
            == 0.0
        )
    assert b"backed by" in page
    assert b"<td>host</td><td>9 / 0 / 0 / 0</td>" in page


def test_a_plugin_backed_slot_says_so(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    written = write_runs(runs, 1, slots=1)
    with served(sources_of(runs, written)) as srv:
        text = srv.metrics_text()
        doc = srv.get_json(f"/v1/launches/{ONE}")
    assert doc["slots"][0]["source"] == "plugin"
    assert doc["slots"][0]["host"]["resolved"] is False
    labels = {"launch_id": ONE, "slot": "scheduler.0"}
    assert sample(text, "ecpa_slot_evidence_source", **labels, source="plugin") == 1.0
    assert sample(text, "ecpa_slot_host_dispatches_total", **labels, outcome="selected") is None


def test_refused_records_are_counted_by_code(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    written = write_runs(runs, 1)
    log = next((written[0].directory / "evidence" / ONE).glob("scheduler.0-*.jsonl"))
    with log.open("ab") as out:
        out.write(b'{"not": "a record"}\n')
    with served(sources_of(runs, written)) as srv:
        text = srv.metrics_text()
        doc = srv.get_json(f"/v1/launches/{ONE}")
    assert doc["refused"], doc["refused"]
    for code, count in doc["refused"].items():
        assert sample(text, "ecpa_records_refused_total", launch_id=ONE, code=code) == count


def test_requests_share_one_derivation_per_refresh(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    written = write_runs(runs, 3)
    with served(sources_of(runs, written)) as srv:
        for _ in range(20):
            srv.get_json("/v1/launches")
            srv.get_json(f"/v1/launches/{ONE}")
            srv.metrics_text()
            srv.request("GET", "/")
        text = srv.metrics_text()
        assert sample(text, "ecpa_serve_refreshes_total") == 1.0
        assert sample(text, "ecpa_serve_derivation_seconds_count") == 3.0
        srv.board.refresh()
        text = srv.metrics_text()
    assert sample(text, "ecpa_serve_refreshes_total") == 2.0
    assert sample(text, "ecpa_serve_derivation_seconds_count") == 6.0


def test_each_launch_is_judged_at_its_own_time_and_a_past_time_saves_no_checkpoint(
    tmp_path: Path,
) -> None:
    """A refresh judges each launch at its own reading of the clock, not at the time the
    refresh started (a launch reached 8 s later would see its newest records as not yet
    valid); a refresh at an explicit past time saves no checkpoint, so a later ``ecpa status``
    is not turned false by refusals that held only then."""
    from ecpa.runtime import judge_launches

    runs = tmp_path / "runs"
    written = write_runs(runs, 2)
    base = int(time.time())
    ticks = iter([base, base + 1])
    seen = judge_launches(
        [runs], proc_root=written[0].proc_root, host=HOST, clock=lambda: next(ticks)
    )
    assert [j.status.now for j in seen.judged] == [base, base + 1]  # a reading per launch
    # An explicit time in the past: judged then, and nothing saved for the present.
    past = int(time.time()) - 8
    judge_launches([runs], now=past, proc_root=written[0].proc_root, host=HOST)
    status = status_from_launch_dir(
        written[0].directory, now=int(time.time()), proc_root=written[0].proc_root, host=HOST
    )
    assert status.effective is True
    assert "ECPA_NOT_YET_VALID" not in status.refused
    assert all("NOT_YET" not in code for code in status.refused), status.refused


def test_a_killed_process_turns_its_slot_and_the_launch_to_0(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    written = write_runs(runs, 1)
    with served(sources_of(runs, written), interval=0.2, refresher=True) as srv:
        assert sample(srv.metrics_text(), "ecpa_runtime_effective", launch_id=ONE) == 1.0
        [pid] = [w.pid for slot, w in written[0].processes.items() if slot.ordinal == 1]
        shutil.rmtree(written[0].proc_root / str(pid))  # the process of scheduler.1 is gone
        deadline = time.monotonic() + 10
        while sample(srv.metrics_text(), "ecpa_runtime_effective", launch_id=ONE) != 0.0:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        text = srv.metrics_text()
    assert sample(text, "ecpa_slot_covered", launch_id=ONE, slot="scheduler.0") == 1.0
    assert sample(text, "ecpa_slot_covered", launch_id=ONE, slot="scheduler.1") == 0.0


def test_the_board_trusts_keys_only_through_the_operator_store_it_is_given(
    tmp_path: Path,
) -> None:
    """ecpa serve --trust FILE: an operator store without the manager's key makes every
    launch not effective, each saying why."""
    runs = tmp_path / "runs"
    written = write_runs(runs, 1)
    empty = tmp_path / "operator.json"
    empty.write_text(json.dumps({"schema": "ecpa-trust-store/0.1", "keys": []}))
    with served(sources_of(runs, written, trust=empty)) as srv:
        doc = srv.get_json(f"/v1/launches/{ONE}")
    assert doc["runtime_effective"] is False
    assert doc["reasons"][0]["code"] == "enrollment_refused"


def test_a_stale_judgement_is_served_as_not_effective(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    written = write_runs(runs, 1)
    with served(sources_of(runs, written), stale_after=0.3) as srv:
        assert srv.get_json(f"/v1/launches/{ONE}")["runtime_effective"] is True
        time.sleep(0.5)  # no refresher: the judgement only ages
        doc = srv.get_json(f"/v1/launches/{ONE}")
        listing = srv.get_json("/v1/launches")
        text = srv.metrics_text()
        status, _, body = srv.request("GET", "/healthz")
        _, _, page = srv.request("GET", "/")
    assert doc["runtime_effective"] is False
    assert doc["reasons"][0]["code"] == "evidence_unreadable"
    assert "last judgement is" in doc["reasons"][0]["text"]
    assert doc["lifecycle"]["runtime_effective"]["state"] is False
    assert [s["covered"] for s in doc["slots"]] == [False, False]
    assert listing["stale"] is True
    assert listing["launches"][0]["runtime_effective"] is False
    assert sample(text, "ecpa_runtime_effective", launch_id=ONE) == 0.0
    assert sample(text, "ecpa_slot_covered", launch_id=ONE, slot="scheduler.0") == 0.0
    assert sample(text, "ecpa_serve_stale") == 1.0
    assert status == 503
    assert json.loads(body)["status"] == "stale"
    assert b"too old" in page


def test_an_unreadable_source_keeps_its_launches_listed_not_effective(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    written = write_runs(runs, 1)
    with served(sources_of(runs, written)) as srv:
        runs.rename(tmp_path / "moved")
        srv.board.refresh()
        doc = srv.get_json(f"/v1/launches/{ONE}")
        text = srv.metrics_text()
    assert doc["runtime_effective"] is False
    assert doc["reasons"][0]["code"] == "evidence_unreadable"
    assert str(runs) in doc["reasons"][0]["text"]
    assert sample(text, "ecpa_runtime_effective", launch_id=ONE) == 0.0
    assert sample(text, "ecpa_serve_source_up", source=str(runs)) == 0.0


def test_withdrawal_reasons_do_not_pile_up_while_a_source_is_down(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    written = write_runs(runs, 1)
    with served(sources_of(runs, written)) as srv:
        before = len(srv.get_json(f"/v1/launches/{ONE}")["reasons"])
        runs.rename(tmp_path / "moved")
        for _ in range(5):
            srv.board.refresh()
        doc = srv.get_json(f"/v1/launches/{ONE}")
        text = srv.metrics_text()
    assert len(doc["reasons"]) == before + 1
    assert [r["code"] for r in doc["reasons"]].count("evidence_unreadable") == 1
    assert sample(text, "ecpa_launch_covered_slots", launch_id=ONE) == 0.0


def test_ended_launches_leave_the_metrics_after_the_retention(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    written = write_runs(runs, 2)
    exit_doc = {"schema": EXIT_SCHEMA, "ended_at": int(time.time()), "exit_status": 0}
    (written[0].directory / "exit.json").write_text(json.dumps(exit_doc))
    with served(sources_of(runs, written), retention_s=0.2) as srv:
        text = srv.metrics_text()
        assert sample(text, "ecpa_launch_ended", launch_id=ONE) == 1.0
        assert sample(text, "ecpa_runtime_effective", launch_id=ONE) == 0.0
        time.sleep(0.3)
        srv.board.refresh()
        text = srv.metrics_text()
        listing = srv.get_json("/v1/launches")
    assert sample(text, "ecpa_launch_ended", launch_id=ONE) is None
    assert sample(text, "ecpa_slot_covered", launch_id=ONE, slot="scheduler.0") is None
    assert sample(text, "ecpa_runtime_effective", launch_id=launch_id(2)) == 1.0
    assert [x["ended"] for x in listing["launches"]] == [True, False]  # the API keeps it


@pytest.mark.parametrize(
    "path",
    [
        "/v1/launches/..%2F..%2Fetc%2Fpasswd",
        "/v1/launches/..",
        "/v1/launches/%2e%2e",
        "/v1/launches/launch-0000000000000001%00",
        "/v1/launches/launch-0000000000000001%0a",
        "/v1/launches/" + "a" * 5000,
        "/v1/launches/launch-ffffffffffffffff",
        "/v1/launches/proc",
        "/v1/launches/%ff%fe",
    ],
)
def test_ids_that_are_no_launch_are_404_never_500(tmp_path: Path, path: str) -> None:
    runs = tmp_path / "runs"
    written = write_runs(runs, 1)
    with served(sources_of(runs, written)) as srv:
        status, headers, body = srv.request("GET", path)
    assert status == 404, (status, body)
    assert headers["content-type"] == "application/json"


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE"])
def test_only_get_and_head(tmp_path: Path, method: str) -> None:
    runs = tmp_path / "runs"
    written = write_runs(runs, 1)
    with served(sources_of(runs, written)) as srv:
        status, headers, _ = srv.request(method, "/v1/launches")
        head_status, head_headers, head_body = srv.request("HEAD", "/v1/launches")
    assert status == 405
    assert headers["allow"] == "GET, HEAD"
    assert head_status == 200
    assert head_body == b""
    assert int(head_headers["content-length"]) > 0


def test_a_request_with_a_body_is_413(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    written = write_runs(runs, 1)
    with served(sources_of(runs, written)) as srv:
        status, _, _ = srv.request("GET", "/v1/launches", body=b"x" * 100)
    assert status == 413


def test_the_token_is_required_when_set(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    written = write_runs(runs, 1)
    with served(sources_of(runs, written), token=TOKEN) as srv:
        for path in ("/v1/launches", f"/v1/launches/{ONE}", "/metrics", "/", "/openapi.json"):
            assert srv.request("GET", path)[0] == 401, path
            wrong = {"Authorization": "Bearer " + "x" * len(TOKEN)}
            assert srv.request("GET", path, wrong)[0] == 401, path
            short = {"Authorization": "Bearer " + TOKEN.decode()[:-1]}
            assert srv.request("GET", path, short)[0] == 401, path
            basic = {"Authorization": "Basic " + TOKEN.decode()}
            assert srv.request("GET", path, basic)[0] == 401, path
            right = {"Authorization": "Bearer " + TOKEN.decode()}
            assert srv.request("GET", path, right)[0] == 200, path
        status, headers, _ = srv.request("GET", "/v1/launches")
        assert status == 401
        assert headers["www-authenticate"].startswith("Bearer")
        assert srv.request("GET", "/healthz")[0] == 200  # probes need no token


def test_a_slow_client_does_not_stall_the_others(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    written = write_runs(runs, 1)
    with served(sources_of(runs, written)) as srv:
        slow = [socket.create_connection(("127.0.0.1", srv.port)) for _ in range(8)]
        try:
            for sock in slow:
                sock.sendall(b"GET /v1/launches HTTP/1.1\r\nHost: x\r\nX-Slow: ")  # never ends
            started = time.monotonic()
            for _ in range(5):
                assert srv.get_json("/healthz")["status"] == "ok"
            assert time.monotonic() - started < 5
        finally:
            for sock in slow:
                sock.close()


def test_a_header_too_large_is_refused_not_buffered(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    written = write_runs(runs, 1)
    with served(sources_of(runs, written)) as srv:
        with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as sock:
            answer = b""
            try:
                sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 1_000_000)
                answer = sock.recv(4096)
            except (ConnectionResetError, BrokenPipeError):
                pass  # closed before all of it was sent: refused all the same
        # Refused (431) or cut off, never answered as a request; the server goes on.
        assert answer == b"" or answer.startswith(b"HTTP/1.1 431"), answer[:100]
        assert srv.get_json("/healthz")["status"] == "ok"


@pytest.mark.parametrize("pieces", [1, 3, 700], ids=["one-write", "three-writes", "trickled"])
def test_the_head_limit_holds_however_the_head_arrives(tmp_path: Path, pieces: int) -> None:
    """A whole head of 20 KiB in one write was parsed and answered: the documented 16 KiB
    limit held only for a head that arrived incomplete."""
    runs = tmp_path / "runs"
    written = write_runs(runs, 1)
    head = b"GET /healthz HTTP/1.1\r\nHost: x\r\n"
    head += b"".join(b"X-H%d: %s\r\n" % (i, b"v" * 90) for i in range(210)) + b"\r\n"
    assert len(head) > 16 * 1024
    with served(sources_of(runs, written)) as srv:
        with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as sock:
            answer = b""
            try:
                step = -(-len(head) // pieces)
                for at in range(0, len(head), step):
                    sock.sendall(head[at : at + step])
                answer = sock.recv(4096)
            except (ConnectionResetError, BrokenPipeError):
                pass  # cut off before all of it was sent: refused all the same
        assert not answer.startswith(b"HTTP/1.1 200"), answer[:200]
        assert answer == b"" or answer.startswith(b"HTTP/1.1 431"), answer[:100]
        small = b"GET /healthz HTTP/1.1\r\nHost: x\r\n" + b"X-A: b\r\n" * 100 + b"\r\n"
        with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as sock:
            sock.sendall(small)  # a head within the limit, in one write: served
            assert sock.recv(4096).startswith(b"HTTP/1.1 200")


def test_a_client_that_never_finishes_its_request_head_is_cut_off(tmp_path: Path) -> None:
    """A client trickling header bytes is cut off after the head timeout, so it cannot hold
    its connection for as long as it trickles (64 such clients would leave every other
    client, token and all, with 503)."""
    runs = tmp_path / "runs"
    written = write_runs(runs, 1)
    with served(sources_of(runs, written), head_timeout_s=0.5) as srv:
        with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as sock:
            sock.sendall(b"GET /v1/launches HTTP/1.1\r\nHost: x\r\n")
            started = time.monotonic()
            closed = False
            while time.monotonic() - started < 5:
                try:
                    sock.sendall(b"X-Slow: 1\r\n")
                except (BrokenPipeError, ConnectionResetError):
                    closed = True
                    break
                sock.settimeout(0.2)
                try:
                    if sock.recv(1) == b"":
                        closed = True
                        break
                except TimeoutError:
                    pass
        assert closed, "still open after 5 s"
        assert time.monotonic() - started < 3
        assert srv.get_json("/healthz")["status"] == "ok"


def _answer(sock: socket.socket) -> bytes:
    sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    return sock.recv(4096)


def test_past_the_cap_only_the_connections_beyond_it_get_503(tmp_path: Path) -> None:
    """70 connections open at once, then each asks: all 70 got 503 (the cap counted every open
    connection at each request), and the 64th connection was already refused."""
    runs = tmp_path / "runs"
    written = write_runs(runs, 1)
    with served(sources_of(runs, written), max_connections=64) as srv:
        socks = [socket.create_connection(("127.0.0.1", srv.port), timeout=10) for _ in range(70)]
        try:
            time.sleep(0.3)  # every connection accepted before any request
            answers = [_answer(sock) for sock in socks]
        finally:
            for sock in socks:
                sock.close()
        ok = [a.startswith(b"HTTP/1.1 200") for a in answers]
        assert ok == [True] * 64 + [False] * 6, [a[:12] for a in answers]
        assert all(a.startswith(b"HTTP/1.1 503") for a in answers[64:])
        time.sleep(0.3)
        assert srv.get_json("/healthz")["status"] == "ok"  # the closed ones made room


def test_the_page_shows_every_launch_escaped(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    written = write_runs(runs, 2)
    (runs / '<img src=x onerror="alert(1)">').write_text("")  # listed as skipped, escaped
    with served(sources_of(runs, written)) as srv:
        status, headers, body = srv.request("GET", "/")
    page = body.decode()
    assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in page
    assert "<img" not in page
    assert status == 200
    assert headers["content-type"].startswith("text/html")
    assert "script-src" not in headers["content-security-policy"]  # default-src 'none'
    assert '<meta http-equiv="refresh"' in page
    assert ONE in page
    assert launch_id(2) in page
    assert "2 of 2 launches runtime_effective" in page
    assert "scheduler.1" in page
    assert "installed" in page
    assert "<script" not in page
    assert "Z (" in page  # times in ISO 8601 UTC, with how long ago


def test_the_openapi_schema_is_served(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    written = write_runs(runs, 1)
    with served(sources_of(runs, written)) as srv:
        schema = srv.get_json("/openapi.json")
    assert {"/v1/launches", "/v1/launches/{launch_id}", "/metrics", "/healthz", "/"} <= set(
        schema["paths"]
    )
    assert "LaunchListing" in schema["components"]["schemas"]


@pytest.mark.e2e  # starts headless Chromium
def test_the_page_as_headless_chromium_renders_it(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    written = write_runs(runs, 2)
    with served(sources_of(runs, written)) as srv:
        dom = render_dom(f"http://127.0.0.1:{srv.port}/")
    assert "<title>ecpa serve: 2/2 effective</title>" in dom
    assert f'<section class="launch" id="{ONE}">' in dom
    assert dom.count("<h3>Lifecycle</h3>") == 2
    assert "scheduler.1" in dom


def test_connections_send_each_write_at_once() -> None:
    """TCP_NODELAY on the listening socket (its connections inherit it): without it, every
    keep-alive response waited 40 ms for the client's delayed ACK (bench/serve.py found it)."""
    sock = bind(Listen("127.0.0.1", 0))
    try:
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
        with socket.create_connection(sock.getsockname()) as client:
            accepted, _ = sock.accept()
            with accepted:
                assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
                del client
    finally:
        sock.close()


def test_a_slow_board_is_not_stale_by_default_but_a_stuck_one_is(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    written = write_runs(runs, 1)
    with served(sources_of(runs, written), stale_after=0.2) as srv:
        board = srv.board
        snapshot, _ = board.view()
        board.adaptive = True
        object.__setattr__(snapshot, "took_s", 1.0)  # as if a refresh took 1 s
        time.sleep(0.4)
        assert board.view()[1] is False  # 0.4 s < interval + 2 x 1 s
        assert board.limit(snapshot) == board.interval + 2.0
        board.adaptive = False
        assert board.view()[1] is True  # an explicit --stale-after stands alone


def test_the_age_of_a_judgement_counts_from_the_start_of_its_refresh(tmp_path: Path) -> None:
    """The age of a judgement counts from the start of its refresh, so a slow refresh never
    makes its first launches' verdicts look younger than they are; an adaptive limit never
    falls below --stale-after."""
    runs = tmp_path / "runs"
    written = write_runs(runs, 1)
    with served(sources_of(runs, written), stale_after=600) as srv:
        snapshot, _ = srv.board.view()
        assert snapshot.started_mono <= snapshot.refreshed_mono
        assert srv.board.age(snapshot) >= time.monotonic() - snapshot.started_mono - 0.01
        srv.board.adaptive = True
        object.__setattr__(snapshot, "took_s", 5.0)
        assert srv.board.limit(snapshot) == 600  # never below --stale-after
        srv.board.stale_after = 1.0
        assert srv.board.limit(snapshot) == srv.board.interval + 2 * 5.0


# -- compression and judging apart -------------------------------------------------------------


@pytest.mark.parametrize(
    ("header", "gzipped"),
    [
        ("gzip", True),
        ("deflate, gzip;q=0.5, br", True),
        ("GZIP", True),
        ("gzip;q=0", False),
        ("gzip; q=0.0", False),
        ("gzip;q=x", False),
        ("br, deflate", False),
        ("", False),
        (None, False),
    ],
)
def test_gzip_is_sent_only_to_a_client_that_accepts_it(header: str | None, gzipped: bool) -> None:
    assert accepts_gzip(header) is gzipped


def _plain_and_gzipped(srv: Served, path: str) -> tuple[bytes, bytes, dict[str, str]]:
    status, plain_headers, plain = srv.request("GET", path)
    assert status == 200
    assert "content-encoding" not in plain_headers
    assert plain_headers["vary"] == "accept-encoding"
    status, headers, packed = srv.request("GET", path, {"Accept-Encoding": "gzip"})
    assert status == 200
    assert headers["content-encoding"] == "gzip"
    assert headers["vary"] == "accept-encoding"
    assert len(packed) < len(plain)
    return plain, gzip.decompress(packed), headers


def test_gzipped_answers_hold_the_same_bytes(tmp_path: Path) -> None:
    """The listing, a launch's document and the page, gzipped, decompress to the very bytes
    sent plain; ``/metrics`` to the same samples, its snapshot age of the moment aside."""
    runs = tmp_path / "runs"
    written = write_runs(runs, 2)
    with served(sources_of(runs, written)) as srv:
        for path in ("/v1/launches", f"/v1/launches/{ONE}", "/"):
            plain, unpacked, _ = _plain_and_gzipped(srv, path)
            assert unpacked == plain, path
        for _ in range(2):  # the compressed prefix is reused, never advanced
            plain, unpacked, headers = _plain_and_gzipped(srv, "/metrics")
            assert headers["content-type"].startswith("text/plain; version=0.0.4")
            age = re.compile(rb"^ecpa_serve_snapshot_age_seconds .*$", re.MULTILINE)
            assert age.sub(b"", unpacked) == age.sub(b"", plain)
            assert sample(unpacked.decode(), "ecpa_runtime_effective", launch_id=ONE) == 1.0


def test_a_stale_judgement_is_stale_gzipped_too(tmp_path: Path) -> None:
    """Once the snapshot is too old, the compressed ``/metrics`` and page say so as the
    plain ones do: no compressed rendering of the fresh snapshot is served for it."""
    runs = tmp_path / "runs"
    written = write_runs(runs, 1)
    with served(sources_of(runs, written), stale_after=0.3) as srv:
        _, fresh, _ = _plain_and_gzipped(srv, "/metrics")
        assert sample(fresh.decode(), "ecpa_serve_stale") == 0.0
        time.sleep(0.5)
        for _ in range(2):
            _, text, _ = _plain_and_gzipped(srv, "/metrics")
            assert sample(text.decode(), "ecpa_serve_stale") == 1.0
            assert sample(text.decode(), "ecpa_runtime_effective", launch_id=ONE) == 0.0
        _, page, _ = _plain_and_gzipped(srv, "/")
        assert b"too old" in page


@pytest.mark.e2e
def test_judging_apart_gives_the_same_verdicts_and_stops_with_the_board(tmp_path: Path) -> None:
    """``apart`` (``ecpa serve``'s way): the launches are judged in a process of their own,
    to the same documents as in the serving interpreter; the board's stop ends it, and no
    refresh after starts it again."""
    runs = tmp_path / "runs"
    written = write_runs(runs, 2)
    with served(sources_of(runs, written)) as here:
        inside = here.get_json("/v1/launches")
    with served(sources_of(runs, written), apart=True) as srv:
        apart = srv.get_json("/v1/launches")
        workers = multiprocessing.active_children()
        assert len(workers) == 1
        srv.board.refresh()  # the same process judges again
        assert multiprocessing.active_children() == workers
    assert [worker.is_alive() for worker in workers] == [False]
    # A refresh still running when the board stopped (past its 30 s wait) starts none again.
    with pytest.raises(RuntimeError, match="judging processes were stopped"):
        srv.board.refresh()
    assert multiprocessing.active_children() == []
    assert [(e["launch_id"], e["runtime_effective"]) for e in apart["launches"]] == [
        (e["launch_id"], e["runtime_effective"]) for e in inside["launches"]
    ]
    assert all(e["runtime_effective"] for e in apart["launches"])
    with pytest.raises(ValueError, match="system clock"):
        Board(sources_of(runs, written), apart=True, clock=lambda: 0.0)


@pytest.mark.e2e
def test_two_judging_processes_each_judge_their_part_to_one_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``judges=2``: each process judges the launches of its part, the same ones each
    refresh; the listing, every document and what was skipped are those of one judge; the
    time each launch's judging took is what shares the next refresh's new launches."""
    from ecpa.serve import judges as judges_module

    seen: list[list[tuple[str, float]]] = []

    class Watched(Shares):
        def judged(self, took: Any) -> None:
            seen.append(list(took))
            super().judged(seen[-1])

    monkeypatch.setattr(judges_module, "Shares", Watched)
    runs = tmp_path / "runs"
    written = write_runs(runs, 6)
    (runs / "not-a-launch").mkdir()
    for broken in _BROKEN:
        (runs / broken).mkdir()  # launch directories without their files, one in each part
    parts = Shares(2).split(list_source(runs, None, limit=100).names)  # as the judges split
    assert [sum(n in _BROKEN for n in part) for part in parts] == [1, 1], parts
    assert all(len(part) == 4 for part in parts), parts  # both processes judge launches
    with served(sources_of(runs, written), apart=True) as one:
        alone = one.get_json("/v1/launches")
        documents = {
            w.directory.name: one.get_json(f"/v1/launches/{w.directory.name}") for w in written
        }
    with served(sources_of(runs, written), apart=True, judges=2) as srv:
        together = srv.get_json("/v1/launches")
        workers = multiprocessing.active_children()
        assert len(workers) == 2
        srv.board.refresh()
        assert multiprocessing.active_children() == workers  # the same two, kept
        assert len(seen) == 3  # a refresh each (the first by the one judge above), with times
        assert all(sorted(n for n, _ in took) == sorted(documents) for took in seen)
        assert all(t > 0 for took in seen for _, t in took)
        for name, doc in documents.items():
            assert _timeless(srv.get_json(f"/v1/launches/{name}")) == _timeless(doc), name
    assert not any(worker.is_alive() for worker in workers)
    assert _listed(together) == _listed(alone)
    assert together["skipped"] == alone["skipped"]
    assert {"not-a-launch", *_BROKEN} <= {s["name"] for s in together["skipped"]}
    with pytest.raises(ValueError, match="one judge"):
        Board(sources_of(runs, written), judges=2)


def _listed(listing: dict[str, Any]) -> list[tuple[str, bool, Any]]:
    return [(e["launch_id"], e["runtime_effective"], e["coverage"]) for e in listing["launches"]]


def _timeless(doc: dict[str, Any]) -> dict[str, Any]:
    """What a launch's document says, without what moves with the time it was judged at
    (ages, texts that give them)."""
    return {
        "launch_id": doc["launch_id"],
        "runtime_effective": doc["runtime_effective"],
        "coverage": doc["coverage"],
        "slots": [(s["slot"], s["covered"], s["process"], s["kid"]) for s in doc["slots"]],
        "reasons": [r["code"] for r in doc["reasons"]],
    }


#: Launch directories without their files, one in each of two parts (the listing is in name
#: order, and new launches of equal work alternate between the parts).
_BROKEN = ("launch-ffffffffffffff00", "launch-ffffffffffffff01")


@pytest.mark.parametrize("limit", [100, 4])
def test_parts_judged_apart_merge_to_what_one_call_gives(tmp_path: Path, limit: int) -> None:
    """The listing once, its names in 3 parts each judged by itself, merged: the launches,
    the entries skipped (not launches, launches that cannot be judged, in every part) and
    the note of a cut are one call's, in its order."""
    runs = tmp_path / "runs"
    written = write_runs(runs, 5)
    (runs / "not-a-launch").mkdir()
    for broken in ("launch-ffffffffffffff00", "launch-ffffffffffffff01", "launch-ffffffffffffff02"):
        (runs / broken).mkdir()
    now = int(time.time())
    where = {"now": now, "proc_root": written[0].proc_root, "host": HOST}
    one = judge_launches([runs], limit=limit, **where)
    listing = list_source(runs, None, limit=limit)
    answers = [
        judge_launches([runs], names=listing.names[i::3], limit=limit, **where) for i in range(3)
    ]
    merged = merge_parts(listing, answers)
    assert [j.summary for j in merged.judged] == [j.summary for j in one.judged]
    assert merged.skipped == one.skipped
    assert merged.truncated == one.truncated
    assert len(merged.judged) + len(merged.skipped) > 3
    if limit == 4:
        assert "judged the first 4 of " in " ".join(merged.truncated)
    with pytest.raises(EcpaError, match="one source"):
        judge_launches([runs, runs], names=[], **where)
    with pytest.raises(EcpaError, match="launch name"):
        judge_launches([runs], names=["../elsewhere"], **where)


@pytest.mark.e2e
def test_a_judging_process_that_dies_is_replaced(tmp_path: Path) -> None:
    """A killed judging process fails that refresh (the snapshot before stays, and ages),
    and the next refresh starts a new one."""
    runs = tmp_path / "runs"
    written = write_runs(runs, 1)
    with served(sources_of(runs, written), apart=True) as srv:
        (worker,) = multiprocessing.active_children()
        assert worker.pid is not None
        os.kill(worker.pid, signal.SIGKILL)
        worker.join(timeout=10)
        with pytest.raises(BrokenProcessPool):
            srv.board.refresh()
        srv.board.refresh()
        (again,) = multiprocessing.active_children()
        assert again.pid != worker.pid
        assert srv.get_json(f"/v1/launches/{ONE}")["runtime_effective"] is True
    assert not again.is_alive()


@pytest.mark.parametrize("enabled", [True, False])
def test_an_answer_is_loaded_with_the_collector_paused_and_left_as_found(
    monkeypatch: pytest.MonkeyPatch, enabled: bool
) -> None:
    """A judging process's answer arrives as bytes, loaded with the cyclic collector
    paused (none of it is garbage), which is then as it was, also when loading fails; and
    what is not an answer is refused by its type."""
    import gc
    import pickle

    from ecpa.runtime import JudgedList
    from ecpa.serve import judges

    seen: list[bool] = []
    loads = pickle.loads

    def watched(data: bytes) -> Any:
        seen.append(gc.isenabled())
        return loads(data)

    monkeypatch.setattr(judges.pickle, "loads", watched)
    answer = JudgedList((), (), ("a note",))
    was = gc.isenabled()
    (gc.enable if enabled else gc.disable)()
    try:
        assert judges._loaded(pickle.dumps(answer)) == answer
        assert gc.isenabled() is enabled
        with pytest.raises(TypeError, match="expected a judging process's JudgedList"):
            judges._loaded(pickle.dumps({"judged": []}))
        assert gc.isenabled() is enabled
        with pytest.raises(pickle.UnpicklingError):
            judges._loaded(b"\x80\x05not a pickle")
        assert gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()
    assert seen == [False, False, False]


def test_a_part_is_judged_with_the_collector_paused_and_left_as_found(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """In the judging process, the part is judged and pickled with the collector paused;
    it is running again after, also when the judging raised."""
    import gc

    from ecpa.runtime import JudgedList
    from ecpa.serve import judges

    seen: list[tuple[Any, ...]] = []
    answer = JudgedList((), (), ("a note",))

    def judge(*args: Any, **kw: Any) -> JudgedList:
        seen.append((gc.isenabled(), args, kw))
        if kw.get("names") == ("boom",):
            raise EcpaError(ErrorCode.INVALID_INPUT, "boom")
        return answer

    monkeypatch.setattr(judges, "judge_launches", judge)
    assert gc.isenabled()
    assert judges._loaded(judges._judged_bytes((), None, names=("a",))) == answer
    assert gc.isenabled()
    with pytest.raises(EcpaError, match="boom"):
        judges._judged_bytes((), None, names=("boom",))
    assert gc.isenabled()
    assert seen == [(False, ((), None), {"names": (n,)}) for n in ("a", "boom")]


def test_a_refresh_builds_and_publishes_with_the_collector_paused_and_leaves_it_as_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A refresh builds each launch's entry (its documents, a few dicts a slot) and
    publishes the snapshot (the metrics and page rendered) with the cyclic collector
    paused, and leaves the collector as it found it, also when building an entry raised."""
    import gc

    from ecpa.serve import board as board_module

    runs = tmp_path / "runs"
    written = write_runs(runs, 2)
    seen: list[tuple[str, bool]] = []
    build = board_module._entry

    def watched(*args: Any, **kw: Any) -> Any:
        seen.append(("entry", gc.isenabled()))
        if os.environ.get("ECPA_TEST_ENTRY_FAILS"):
            raise RuntimeError("an entry failed, as a test says")
        return build(*args, **kw)

    monkeypatch.setattr(board_module, "_entry", watched)
    board = Board(
        sources_of(runs, written), publish=lambda snap: seen.append(("publish", gc.isenabled()))
    )
    was = gc.isenabled()
    try:
        for enabled in (True, False):
            (gc.enable if enabled else gc.disable)()
            seen.clear()
            board.refresh()
            assert gc.isenabled() is enabled
            assert seen == [("entry", False), ("entry", False), ("publish", False)]
            monkeypatch.setenv("ECPA_TEST_ENTRY_FAILS", "1")
            with pytest.raises(RuntimeError, match="as a test says"):
                board.refresh()
            assert gc.isenabled() is enabled
            monkeypatch.delenv("ECPA_TEST_ENTRY_FAILS")
    finally:
        (gc.enable if was else gc.disable)()
