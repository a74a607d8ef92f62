"""What ``ecpa demo`` shows, act by act: each act says its title as it begins, and
``ecpa demo --help`` lists the same titles (this module is data only, so the help costs
nothing to build)."""

__all__ = ["ACTS"]

ACTS = {
    "evidence": "evidence by hand: a key and a trust store, a statement signed and verified; "
    "replayed, changed by one byte, an hour later: each refused with its code",
    "own": "runtime_effective from this process's own signed records, then stale; "
    "inspect without verifying; a withdrawn key",
    "launch": "launch the DLA driver (a scheduler with the plugin inside) under ecpa run",
    "slots": "a launch with two scheduler processes (data parallelism 2): one slot each",
    "hosts": "several hosts: the evidence shipped into PostgreSQL, judged from there",
    "serve": "where operators look: ecpa serve (HTTP API, Prometheus metrics, a status page)",
    "audit": "after the launch: when was it effective? (ecpa audit, from its evidence)",
    "host": "the host's own witness: ecpa as the vLLM-HUST host's evidence sink, host evidence "
    "required, its journal audited",
    "sim": "does DLA pay off? the value simulator, steps timed as on an A100 80 GB",
}
