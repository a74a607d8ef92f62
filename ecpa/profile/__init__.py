"""The pure core of PROFILE.md: strict JSON (and its reference parser), base64url, JCS, keys
and Ed25519 backends, JWS, the statement, the trust store model, sign and verify.

No clock, no environment, no files of its own: time, keys, trust stores and replay fences
are parameters (``SigningKey.load`` and ``TrustStore.load`` are conveniences at the edge,
through :mod:`ecpa._files`).

May import: :mod:`ecpa.errors`, :mod:`ecpa._files` and itself; never runtime, observer,
launcher, corpus or cli.
"""
