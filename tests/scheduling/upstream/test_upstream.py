"""Upstream Karpenter's scheduling test cases, ported as data (`cases/*.yaml`), through simulate and the controller.

See `harness` for the case format. Every case names the upstream `It(...)` it comes from; where karpy deliberately
behaves otherwise the case is not here and README's "Scheduling fidelity" section says why.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.scheduling.upstream import harness

CASES = harness.all_cases()


def test_at_least_150_cases_each_named_once() -> None:
    ids = [case.id for case in CASES]
    assert len(ids) >= 150, len(ids)
    duplicated = sorted({i for i in ids if ids.count(i) > 1})
    assert not duplicated, duplicated


@pytest.mark.parametrize("case", [c for c in CASES if "simulate" in c.paths], ids=lambda c: c.id)
def test_through_simulate(case: harness.Case, tmp_path: Path) -> None:
    res, inp = harness.run_simulate(case, tmp_path)
    harness.check(case, harness.outcome(res, inp))


@pytest.mark.parametrize("case", [c for c in CASES if "controller" in c.paths], ids=lambda c: c.id)
async def test_through_the_controller(case: harness.Case) -> None:
    res, inp, reported = await harness.run_controller(case)
    harness.check(case, harness.outcome(res, inp, reported=reported))
