"""The ``ecpa`` command line: parses arguments, calls the library, prints.

One place, :func:`main`, maps failures to exit codes: 0 success, 1 evidence refused,
2 usage or configuration errors, 3 an internal error (one line, never a traceback).
"""

from __future__ import annotations

import sys
import time
from typing import Any

import typer

import ecpa
from ecpa import jws
from ecpa._b64 import b64u_encode
from ecpa.errors import EcpaError, ErrorCode

app = typer.Typer(
    name="ecpa",
    help="Produce and verify ECPA 0.1 signed evidence (RFC 8785 JCS + detached JWS, Ed25519).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

EXIT_OK, EXIT_INVALID, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3


@app.callback()
def _root() -> None:
    """ecpa: signed evidence that a plugin really runs."""


@app.command()
def version() -> None:
    """Print the library version and the profile it implements."""
    typer.echo(f"ecpa {ecpa.__version__} ({ecpa.PROFILE_ID})")


def _demo_statement(now: int, nonce: str) -> dict[str, Any]:
    return {
        "schema": ecpa.STATEMENT_SCHEMA,
        "profile": ecpa.PROFILE_ID,
        "issuer": "urn:ecpa:issuer:demo-host",
        "kid": "demo-key",
        "subject": "host-runtime",
        "plan_id": "plan:demo",
        "launch_id": "launch-demo",
        "plugin_id": "plugin:dla",
        "obligation": "victim-selector-dispatch",
        "event": "invoked",
        "challenge_nonce": nonce,
        "artifact_digest": "sha256:" + "ab" * 32,
        "evidence_digest": "sha256:" + "cd" * 32,
        "process": {
            "host": "demo-host",
            "role": "scheduler",
            "start_identity": "pid:1:start_ticks:1:boot:demo",
            "ordinal": 0,
            "epoch": 1,
        },
        "observed_at": now,
        "issued_at": now,
        "expires_at": now + 60,
        "critical_claims": [],
    }


def _expect(label: str, expected: str, action: Any) -> bool:
    try:
        result = action()
        got = "OK"
    except EcpaError as exc:
        got, result = exc.code.value, exc.detail
    ok = got == expected
    mark = "ok  " if ok else "FAIL"
    shown = result if got != "OK" else "accepted"
    typer.echo(f"  [{mark}] {label:<44} -> {got}" + (f"  ({shown})" if got != "OK" else ""))
    return ok


@app.command()
def demo() -> None:
    """Run the whole loop once: key, trust store, sign, verify, and each refusal with its code.

    Exits 1 if anything behaves other than the profile says.
    """
    now = int(time.time())
    key = ecpa.SigningKey.generate()
    entry = {
        "issuer": "urn:ecpa:issuer:demo-host",
        "kid": "demo-key",
        "public_key_b64": key.public_key.to_b64(),
        "subjects": ["host-runtime"],
        "enabled": True,
        "not_before": now - 3600,
        "not_after": now + 3600,
    }
    store = ecpa.TrustStore.from_dict({"schema": ecpa.TRUST_STORE_SCHEMA, "keys": [entry]})
    typer.echo(f"ecpa {ecpa.__version__} demo, profile {ecpa.PROFILE_ID}, now={now}")
    typer.echo(f"1. key demo-key, public {key.public_key.to_b64()}, trusted for demo-host")

    st = _demo_statement(now, "challenge-demo:1")
    signed = ecpa.sign(st, key)
    typer.echo(f"2. signed a statement: payload {len(signed.payload)} bytes (JCS), detached JWS")
    typer.echo(f"   {signed.detached_jws[:60]}...{signed.detached_jws[-12:]}")
    binding = ecpa.Binding(
        plan_id="plan:demo",
        launch_id="launch-demo",
        plugin_id="plugin:dla",
        artifact_digest=st["artifact_digest"],
        process_epoch=1,
        challenge_nonce="challenge-demo:1",
    )
    fence = ecpa.MemoryReplayFence()

    def check(payload: bytes, detached: str, **kw: Any) -> Any:
        kw.setdefault("now", now)
        return ecpa.verify(payload, detached, store, **kw)

    typer.echo("3. verify:")
    results = [
        _expect(
            "wrong launch binding (nonce not consumed)",
            ErrorCode.BINDING_MISMATCH.value,
            lambda: check(
                signed.payload,
                signed.detached_jws,
                binding=binding.model_copy(update={"launch_id": "launch-other"}),
                replay=fence,
            ),
        ),
        _expect(
            "the signed evidence, bound, first time",
            "OK",
            lambda: check(signed.payload, signed.detached_jws, binding=binding, replay=fence),
        ),
        _expect(
            "the same evidence again (replay)",
            ErrorCode.REPLAYED_NONCE.value,
            lambda: check(signed.payload, signed.detached_jws, binding=binding, replay=fence),
        ),
        _expect(
            "payload changed by one byte",
            ErrorCode.INVALID_SIGNATURE.value,
            lambda: check(
                signed.payload.replace(b"launch-demo", b"launch-demO"), signed.detached_jws
            ),
        ),
        _expect(
            "one minute after it expired",
            ErrorCode.EXPIRED.value,
            lambda: check(signed.payload, signed.detached_jws, now=now + 121),
        ),
        _expect(
            "header alg 'none'",
            ErrorCode.WRONG_ALGORITHM.value,
            lambda: check(
                signed.payload,
                b64u_encode(ecpa.canonicalize({**jws.protected_header("demo-key"), "alg": "none"}))
                + "..",
            ),
        ),
        _expect(
            "a small-order key in a trust store",
            ErrorCode.TRUST_STORE_CONFIG.value,
            lambda: ecpa.TrustStore.from_dict(
                {
                    "schema": ecpa.TRUST_STORE_SCHEMA,
                    "keys": [{**entry, "public_key_b64": "AQ" + "A" * 41}],
                }
            ),
        ),
    ]
    passed = sum(results)
    typer.echo(f"{passed} of {len(results)} behaved as the profile says")
    if passed != len(results):
        raise typer.Exit(EXIT_INVALID)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``ecpa`` script; returns the exit status."""
    try:
        app(args=argv, prog_name="ecpa")
    except SystemExit as exc:  # click's standalone mode: usage errors exit 2 with a message
        code = exc.code
        return code if isinstance(code, int) else (EXIT_OK if code is None else EXIT_USAGE)
    except EcpaError as exc:
        typer.echo(f"ecpa: {exc.code.value}: {exc.detail}", err=True)
        return EXIT_USAGE if exc.code is ErrorCode.TRUST_STORE_CONFIG else EXIT_INVALID
    except KeyboardInterrupt:
        typer.echo("ecpa: interrupted", err=True)
        return 130
    except Exception as exc:
        typer.echo(f"ecpa: internal error: {type(exc).__name__}: {exc}", err=True)
        return EXIT_INTERNAL
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
