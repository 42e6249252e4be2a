"""Shared builders for the cloud-provider tests: real EC2 shapes and VPC limits of a few instance types."""

from __future__ import annotations

import json
import pathlib
from collections.abc import Callable, Mapping
from typing import Any

import pytest

# Records copied from moto's DescribeInstanceTypes data and ../shared/data/aws-vpc-limits.json (fields we read).
_RECORDS = pathlib.Path(__file__).with_name("ec2_records.json")

Record = tuple[Mapping[str, Any], Mapping[str, Any]]


@pytest.fixture(scope="session")
def ec2_records() -> Mapping[str, Mapping[str, Any]]:
    records: Mapping[str, Mapping[str, Any]] = json.loads(_RECORDS.read_text())
    return records


@pytest.fixture
def ec2_record(ec2_records: Mapping[str, Mapping[str, Any]]) -> Callable[[str], Record]:
    """`ec2_record("m5.large")` → (DescribeInstanceTypes record, VPC limits record)."""

    def get(name: str) -> Record:
        return ec2_records[name]["ec2"], ec2_records[name]["vpc"]

    return get
