"""How many requests the emulated API server answered, served at `/metrics` as kube-apiserver serves its
`apiserver_request_total` counter (staging/src/k8s.io/apiserver/pkg/endpoints/metrics/metrics.go: labelled by verb,
group, version, resource, subresource, scope and code; the verb is the HTTP method, but LIST and WATCH for reads
of a collection).

Benchmarks scrape it before and after a phase to count what the controller asked for (GETs, status writes) per
phase; a counter per label set stays bounded by what the clients do, not by how often.
"""

from __future__ import annotations

import collections
import threading

import kmock

from karpy_emulator.apiserver import audit

PATH = "/metrics"
METRIC = "apiserver_request_total"
LABELS = ("verb", "group", "version", "resource", "subresource", "scope", "code")


def labels(request: kmock.Request, code: int) -> tuple[str, ...]:
    """The label values of one object request (`request.resource` and its plural set), in `LABELS` order."""
    resource = request.resource
    assert resource is not None
    assert resource.plural is not None
    named = request.name is not None
    # metrics.go's cleanVerb: the HTTP method, but LIST and WATCH for the collection reads.
    verb = audit.verb(request.method, named=named, watch=request.action == kmock.action.WATCH).upper()
    if verb not in ("LIST", "WATCH"):
        verb = str(request.method.value)
    scope = "resource" if named else ("namespace" if request.namespace else "cluster")
    return (
        verb,
        resource.group or "",
        resource.version or "",
        str(resource.plural),
        request.subresource or "",
        scope,
        str(code),
    )


class Counts:
    """The counter, safe across threads (the server's loop writes it, anything may read it)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: collections.Counter[tuple[str, ...]] = collections.Counter()

    def record(self, request: kmock.Request, code: int) -> None:
        key = labels(request, code)
        with self._lock:
            self._counts[key] += 1

    def exposition(self) -> str:
        """The Prometheus text format of the counter, one sample per label set seen."""
        with self._lock:
            counted = sorted(self._counts.items())
        lines = [f"# HELP {METRIC} Counter of apiserver requests.", f"# TYPE {METRIC} counter"]
        for values, count in counted:
            rendered = ",".join(f'{name}="{value}"' for name, value in zip(LABELS, values, strict=True))
            lines.append(f"{METRIC}{{{rendered}}} {count}")
        return "\n".join(lines) + "\n"
