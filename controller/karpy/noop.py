"""`ignore`: the one no-op every observation hook defaults to (metrics callbacks, notes, retag reports).

Reconcilers expose what they observe as plain callables on their `Metrics`/`Deps` values; the operator binds them to
Prometheus, and tests, benchmarks and offline tools leave them here. Nothing else belongs in this module.
"""

from __future__ import annotations


def ignore(*_: object, **__: object) -> None:
    """Accepts any arguments and does nothing (hooks such as `nodeclaim.DisruptedHook` take keywords too)."""
    return None
