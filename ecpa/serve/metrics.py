"""``GET /metrics``: the board's snapshot in the Prometheus text format (docs/serve.md,
"Metrics"), rendered once per refresh by the official ``prometheus_client`` and cached; a
scrape adds only the snapshot's age. Ended launches are left out once the board has seen
them ended for longer than the retention window, so the series count stays bounded.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from ecpa.serve.board import Entry, Snapshot

__all__ = ["CONTENT_TYPE", "Metrics"]

#: The Prometheus text format, version 0.0.4.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
#: The derivation time histogram's buckets, seconds.
_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
#: Slot counters exported from the newest signed counters record: (key, metric, help).
_COUNTS = (
    ("calls", "ecpa_slot_calls", "Calls of the plugin the slot's newest signed counters count."),
    ("selections", "ecpa_slot_selections", "Victims the plugin selected (newest counters)."),
    ("abstentions", "ecpa_slot_abstentions", "Calls where the plugin abstained."),
    ("failures", "ecpa_slot_failures", "Calls outside the host contract (the plugin failed)."),
    ("changed", "ecpa_slot_changed", "Selections that differed from the host's own rule."),
)


class _SnapshotCollector(Collector):
    def __init__(self, entries: list[Entry]) -> None:
        self.entries = entries

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        launch = ["launch_id"]
        slot_labels = ["launch_id", "slot"]
        effective = GaugeMetricFamily(
            "ecpa_runtime_effective", "1 when runtime_effective is true now.", labels=launch
        )
        ended = GaugeMetricFamily(
            "ecpa_launch_ended", "1 when the launch has ended.", labels=launch
        )
        slots = GaugeMetricFamily("ecpa_launch_slots", "Slots the launch obligates.", labels=launch)
        covered_slots = GaugeMetricFamily(
            "ecpa_launch_covered_slots", "Obligated slots covered now.", labels=launch
        )
        covered = GaugeMetricFamily(
            "ecpa_slot_covered", "1 when the slot is covered now.", labels=slot_labels
        )
        age = GaugeMetricFamily(
            "ecpa_slot_evidence_age_seconds",
            "Age of the slot's newest accepted record at the judgement.",
            labels=slot_labels,
        )
        counts = {
            key: CounterMetricFamily(name, text, labels=slot_labels) for key, name, text in _COUNTS
        }
        backed = GaugeMetricFamily(
            "ecpa_slot_evidence_source",
            "1 for what backs the slot's verdict: host (the host's own witness, required by "
            "the plan) or plugin (the plugin's reports).",
            labels=[*slot_labels, "source"],
        )
        witnessed = CounterMetricFamily(
            "ecpa_slot_host_dispatches",
            "Dispatches of the slot's process the host witnessed, by outcome (newest account).",
            labels=[*slot_labels, "outcome"],
        )
        accepted = CounterMetricFamily(
            "ecpa_records_accepted", "Records of the launch accepted.", labels=launch
        )
        refused = CounterMetricFamily(
            "ecpa_records_refused",
            "Records of the launch refused, by code.",
            labels=[*launch, "code"],
        )
        for entry in self.entries:
            lid = [entry.launch_id]
            effective.add_metric(lid, float(entry.effective))
            ended.add_metric(lid, float(entry.ended))
            status = entry.status
            if status is None:
                continue
            slots.add_metric(lid, float(len(status.slots)))
            covered_now = 0 if entry.withdrawn else sum(s.covered for s in status.slots)
            covered_slots.add_metric(lid, float(covered_now))
            accepted.add_metric(lid, float(status.accepted))
            for code, count in sorted(status.refused.items()):
                refused.add_metric([entry.launch_id, code], float(count))
            for slot in status.slots:
                labels = [entry.launch_id, slot.slot]
                covered.add_metric(labels, float(slot.covered and not entry.withdrawn))
                if slot.age_s is not None:
                    age.add_metric(labels, float(slot.age_s))
                for key, family in counts.items():
                    value = (slot.counters or {}).get(key)
                    if isinstance(value, int) and not isinstance(value, bool):
                        family.add_metric(labels, float(value))
                backed.add_metric([*labels, slot.source], 1.0)
                if slot.host is not None:
                    for outcome, n in slot.host_json()["dispatches"].items():
                        witnessed.add_metric([*labels, outcome], float(n))
        yield from (effective, ended, slots, covered_slots, covered, age)
        yield from counts.values()
        yield from (backed, witnessed, accepted, refused)


class Metrics:
    """The server's own metrics (a registry of its own, never the process-wide default) and
    the snapshot's, rendered by :meth:`publish` once per refresh."""

    def __init__(self, retention_s: float) -> None:
        self.retention_s = retention_s
        self.registry = CollectorRegistry(auto_describe=False)
        self.derivation = Histogram(
            "ecpa_serve_derivation_seconds",
            "Seconds one launch's derivation took (reading its files or rows included).",
            buckets=_BUCKETS,
            registry=self.registry,
        )
        self.refresh_seconds = Gauge(
            "ecpa_serve_refresh_seconds",
            "Seconds the newest refresh of every launch took.",
            registry=self.registry,
        )
        self.refreshes = Counter(
            "ecpa_serve_refreshes", "Refreshes of every launch made.", registry=self.registry
        )
        self.launches = Gauge(
            "ecpa_serve_launches", "Launches judged by the newest refresh.", registry=self.registry
        )
        self.source_up = Gauge(
            "ecpa_serve_source_up",
            "1 when the source could be read at the newest refresh.",
            ["source"],
            registry=self.registry,
        )

    def kept(self, snapshot: Snapshot) -> list[Entry]:
        """The launches exported: all but those seen ended longer than the retention ago."""
        now = snapshot.refreshed_mono
        return [
            entry
            for entry in snapshot.entries.values()
            if entry.ended_seen is None or now - entry.ended_seen <= self.retention_s
        ]

    def render(self, snapshot: Snapshot) -> bytes:
        """The snapshot's metrics and the server's own, in the text format."""
        registry = CollectorRegistry(auto_describe=False)
        registry.register(_SnapshotCollector(self.kept(snapshot)))
        return generate_latest(registry) + generate_latest(self.registry)

    def publish(self, snapshot: Snapshot) -> None:
        """Account for a new snapshot and cache its rendering in it."""
        for took in snapshot.derivations:
            self.derivation.observe(took)
        self.refresh_seconds.set(snapshot.took_s)
        self.refreshes.inc()
        self.launches.set(len(snapshot.entries))
        for name, error in snapshot.sources:
            self.source_up.labels(name).set(0.0 if error else 1.0)
        snapshot.rendered["metrics"] = self.render(snapshot)

    def body(self, snapshot: Snapshot) -> bytes:
        """A scrape's bytes but its last lines: the cached rendering (rendered again when
        ``snapshot`` is the stale view)."""
        return snapshot.rendered.get("metrics") or self.render(snapshot)

    def tail(self, snapshot: Snapshot, stale: bool) -> bytes:
        """A scrape's last lines, of the moment: the snapshot's age, and whether it is stale."""
        age = time.monotonic() - snapshot.refreshed_mono
        return (
            "# HELP ecpa_serve_snapshot_age_seconds Seconds since the newest refresh ended.\n"
            "# TYPE ecpa_serve_snapshot_age_seconds gauge\n"
            f"ecpa_serve_snapshot_age_seconds {age:.3f}\n"
            "# HELP ecpa_serve_stale 1 when the newest refresh is too old to be served as true.\n"
            "# TYPE ecpa_serve_stale gauge\n"
            f"ecpa_serve_stale {int(stale)}\n"
        ).encode()

    def scrape(self, snapshot: Snapshot, stale: bool) -> bytes:
        """The bytes of one scrape: :meth:`body`, then :meth:`tail`."""
        return self.body(snapshot) + self.tail(snapshot, stale)
