"""The Grafana dashboards the chart ships (`dashboards.enabled`): one ConfigMap each, for Grafana's sidecar, and every
panel's queries name only series the controller exports, grouped and legended by labels those series carry."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from tests.runtime import exporting

from .conftest import CHART, Render, by_kind

SERIES = re.compile(r"\b((?:karpenter|karpy|operator|leader_election)_[a-z0-9_]+)\b")
GROUPING = re.compile(r"\b(?:by|without)\s*\(([^)]*)\)")
LEGEND_LABEL = re.compile(r"\{\{\s*(\w+)\s*\}\}")
HISTOGRAM_PARTS = ("_bucket", "_sum", "_count")
EXPECTED = {"karpy-capacity.json", "karpy-disruption.json", "karpy-pod-startup.json"}


@pytest.fixture(scope="module")
def exported() -> dict[str, dict[str, Any]]:
    return exporting.exported(exporting.driven())


def dashboards(render: Render, values: dict[str, str]) -> dict[str, dict[str, Any]]:
    docs = render(values)
    return {
        key: {"configmap": cm, "dashboard": json.loads(text)}
        for cm in by_kind(docs, "ConfigMap")
        for key, text in cm["data"].items()
    }


def queries(dashboard: Mapping[str, Any]) -> Iterator[tuple[str, str, str]]:
    """(where, PromQL, legend format) of every panel target and every query variable (no legend)."""
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            yield f"{dashboard['uid']} / {panel['title']}", target["expr"], target.get("legendFormat", "")
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            yield f"{dashboard['uid']} / ${variable['name']}", variable["query"]["query"], ""


def series_of(name: str, exported: Mapping[str, Any]) -> str | None:
    """The exported series a query's name reads (histograms and summaries through their _bucket/_sum/_count)."""
    if name in exported:
        return name
    for part in HISTOGRAM_PARTS:
        base = name.removesuffix(part)
        if base != name and exported.get(base, {}).get("type") in ("histogram", "summary"):
            return base
    return None


def test_off_by_default_and_one_configmap_per_dashboard_when_on(render: Render) -> None:
    assert not dashboards(render, {})
    shipped = dashboards(render, {"dashboards.enabled": "true"})
    assert set(shipped) == EXPECTED == {p.name for p in (CHART / "dashboards").glob("*.json")}
    for found in shipped.values():
        cm = found["configmap"]
        assert cm["metadata"]["namespace"] == "karpy"
        assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"


def test_namespace_labels_and_annotations_are_the_sidecars(render: Render) -> None:
    shipped = dashboards(
        render,
        {
            "dashboards.enabled": "true",
            "dashboards.namespace": "monitoring",
            "json:dashboards.labels": '{"team-dashboards": "yes"}',
            "dashboards.annotations.grafana_folder": "Karpenter",
        },
    )
    for found in shipped.values():
        md = found["configmap"]["metadata"]
        assert md["namespace"] == "monitoring"
        assert md["labels"]["team-dashboards"] == "yes"
        assert md["labels"]["grafana_dashboard"] == "1"  # helm merges maps: set it to null to drop it
        assert md["annotations"] == {"grafana_folder": "Karpenter"}


def test_every_panel_reads_only_exported_series_by_labels_they_carry(
    render: Render, exported: dict[str, dict[str, Any]]
) -> None:
    problems = []
    panels = 0
    for found in dashboards(render, {"dashboards.enabled": "true"}).values():
        for where, expr, legend in queries(found["dashboard"]):
            panels += 1
            names = set(SERIES.findall(expr))
            if not names:
                problems.append(f"{where}: names no series: {expr}")
            read = {n: series_of(n, exported) for n in names}
            problems += [f"{where}: {n} is not exported" for n, s in read.items() if s is None]
            carried = {"le"}.union(*(exported[s]["labels"] for s in read.values() if s is not None))
            wanted = set(LEGEND_LABEL.findall(legend))
            for clause in GROUPING.findall(expr):
                wanted |= {label.strip() for label in clause.split(",") if label.strip()}
            problems += [f"{where}: no exported series of it has label {label!r}" for label in wanted - carried]
    assert panels >= 20
    assert not problems, "\n".join(problems)


def test_the_check_is_live(exported: dict[str, dict[str, Any]]) -> None:
    """A query naming a series karpy does not export (upstream's pre-v1 name) is caught."""
    assert series_of("karpenter_provisioner_scheduling_duration_seconds_bucket", exported) is None
    assert series_of("karpenter_scheduler_scheduling_duration_seconds_bucket", exported) is not None
    assert series_of("karpenter_nodes_created_bucket", exported) is None  # a counter has no buckets
