"""Shared helpers of the state tests: a Cluster on a ManualClock and event shorthands."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from karpy import clock
from karpy.kube import client, resources
from karpy.state import cluster

START = 1_700_000_000.0


@pytest.fixture
def manual() -> clock.ManualClock:
    return clock.ManualClock(START)


@pytest.fixture
def state(manual: clock.ManualClock) -> cluster.Cluster:
    return cluster.Cluster(clock=manual)


def add(state: cluster.Cluster, res: resources.Resource, *objs: Mapping[str, Any]) -> None:
    for obj in objs:
        state.apply(res, client.WatchEvent(client.ADDED, obj))


def modify(state: cluster.Cluster, res: resources.Resource, obj: Mapping[str, Any]) -> None:
    state.apply(res, client.WatchEvent(client.MODIFIED, obj))


def delete(state: cluster.Cluster, res: resources.Resource, obj: Mapping[str, Any]) -> None:
    state.apply(res, client.WatchEvent(client.DELETED, obj))
