"""Tolerations against taints, with Kubernetes' matching rules (core: pkg/scheduling/taints.go).

Every taint on a NodePool template must be tolerated, PreferNoSchedule included: upstream treats PreferNoSchedule
as binding at first and relaxes it last, by adding a PreferNoSchedule toleration (see `preferences`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from karpy.api import labels, meta

OP_EXISTS = "Exists"
OP_EQUAL = "Equal"


@dataclass(frozen=True, slots=True)
class Toleration:
    """corev1.Toleration. Empty key with operator Exists tolerates every taint; empty effect matches every effect."""

    key: str = ""
    operator: str = OP_EQUAL
    value: str = ""
    effect: str = ""

    def tolerates(self, taint: meta.Taint) -> bool:
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == OP_EXISTS:
            return True
        # An empty key only matches every taint together with Exists (apiserver validation enforces this).
        return bool(self.key) and self.value == taint.value


TOLERATE_PREFER_NO_SCHEDULE = Toleration(operator=OP_EXISTS, effect=labels.EFFECT_PREFER_NO_SCHEDULE)


def untolerated(taints: Iterable[meta.Taint], tolerations: Iterable[Toleration]) -> str | None:
    """None when every taint is tolerated, else a reason naming each taint that is not."""
    tols = tuple(tolerations)
    missing = [t for t in taints if not any(tol.tolerates(t) for tol in tols)]
    if not missing:
        return None
    return "; ".join(f"did not tolerate {t.key}={t.value}:{t.effect}" for t in missing)


def has_prefer_no_schedule(taints: Iterable[meta.Taint]) -> bool:
    return any(t.effect == labels.EFFECT_PREFER_NO_SCHEDULE for t in taints)
