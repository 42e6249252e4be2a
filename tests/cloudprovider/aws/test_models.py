"""The controller's service models are cut down to the operations it calls, and still serve every one of them.

- `models.CALLED` names every operation of each service that the product's code names (an attribute such as
  `ec2.describe_instances`, or a string such as "describe_instance_types" or "ec2:CreateFleet"), derived here from
  controller/karpy's syntax trees, so a new call without its entry fails;
- a pruned model has exactly those operations, and every shape each of them reaches resolves (botocore builds
  input, output and error shapes from it as a call does);
- a client of the pruned session answers a call through moto as a full one does.
"""

from __future__ import annotations

import ast
import pathlib
import re
from collections.abc import Iterator
from typing import Any

import botocore.config
import botocore.model
import botocore.session
import pytest
from botocore import xform_name
from tests.cloudprovider.aws import moto_fixtures

from karpy.cloudprovider.aws import models, sessions

PRODUCT = pathlib.Path(__file__).resolve().parents[3] / "controller" / "karpy"


def _names_in_code() -> set[str]:
    """Every attribute name and every word of every string in the product's code."""
    words: set[str] = set()
    for path in PRODUCT.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute):
                words.add(node.attr)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                words.update(re.findall(r"[A-Za-z_]+", node.value))
    return words


def _full(service: str) -> botocore.model.ServiceModel:
    return botocore.session.get_session().get_service_model(service)


def test_called_names_every_operation_the_code_calls() -> None:
    words = _names_in_code()
    assert len(words) > 1000  # the scan read the product
    for service, called in models.CALLED.items():
        operations = set(_full(service).operation_names)
        named = {op for op in operations if op in words or xform_name(op) in words}
        assert named - called == set(), f"{service}: called in the code, missing from models.CALLED"
        assert called <= operations, f"{service}: not an operation of the model"


def _below(shape: botocore.model.Shape | None) -> list[str]:
    """The names of `shape` and every shape below it, each resolved from its model (a missing one raises)."""
    return [s.name for s in _shapes_below(shape)]


def _shapes_below(shape: botocore.model.Shape | None) -> Iterator[botocore.model.Shape]:
    seen: set[str] = set()
    pending = [shape] if shape is not None else []
    while pending:
        current = pending.pop()
        if current.name in seen:
            continue
        seen.add(current.name)
        yield current
        if isinstance(current, botocore.model.StructureShape):
            pending.extend(current.members.values())
        elif isinstance(current, botocore.model.ListShape):
            pending.append(current.member)
        elif isinstance(current, botocore.model.MapShape):
            pending.extend((current.key, current.value))


@pytest.mark.parametrize("service", sorted(models.CALLED))
def test_a_pruned_model_serves_every_called_operation(service: str) -> None:
    pruned = sessions.botocore_session(operations=models.CALLED).get_service_model(service)
    assert set(pruned.operation_names) == models.CALLED[service]
    full = _full(service)
    for name in pruned.operation_names:
        op, whole = pruned.operation_model(name), full.operation_model(name)
        for part in ("input_shape", "output_shape"):
            assert _below(getattr(op, part)) == _below(getattr(whole, part)), f"{name}: {part}"
        assert [_below(e) for e in op.error_shapes] == [_below(e) for e in whole.error_shapes]
    assert {s.name for s in pruned.error_shapes} == {s.name for s in full.error_shapes}
    if service == "ec2":
        assert len(pruned.shape_names) < len(full.shape_names) / 5  # what the cut is for


def test_a_pruned_client_answers_as_a_full_one(aws_env: str) -> None:
    def client(session: Any) -> Any:
        return session.client("ec2", region_name=moto_fixtures.REGION)

    pruned = client(sessions.session(moto_fixtures.REGION, operations=models.CALLED))
    full = client(sessions.session(moto_fixtures.REGION))
    assert not hasattr(pruned, "create_vpc")  # dropped: the controller never creates a VPC
    ask = {"InstanceTypes": ["m5.large", "c5.xlarge"]}
    answer = pruned.describe_instance_types(**ask)["InstanceTypes"]
    assert answer == full.describe_instance_types(**ask)["InstanceTypes"]
    assert {t["InstanceType"] for t in answer} == {"m5.large", "c5.xlarge"}


def test_endpoint_prefixes_are_those_of_the_called_services() -> None:
    assert {str(_full(service).endpoint_prefix) for service in models.CALLED} == models.ENDPOINT_PREFIXES


@pytest.mark.parametrize("region", ["us-west-2", "eu-central-1", "cn-north-1", "us-gov-west-1", "us-iso-east-1"])
def test_pruned_endpoint_data_resolves_every_client_as_the_full_data_does(region: str) -> None:
    # Not the moto endpoint the other tests set in the environment: botocore's own resolution from its data.
    config = botocore.config.Config(ignore_configured_endpoint_urls=True)

    def resolved(session: Any, service: str) -> tuple[Any, ...]:
        client = session.client(service, region_name=region, config=config)
        signer = client._request_signer
        return client.meta.endpoint_url, signer.signing_name, signer.region_name, client.meta.config.signature_version

    pruned = sessions.session(region, operations=models.CALLED)
    full = sessions.session(region)
    loaded = pruned._session.get_component("data_loader").load_data("endpoints")
    assert sum(len(p["services"]) for p in loaded["partitions"]) < 100  # the cut took
    for service in models.CALLED:
        assert resolved(pruned, service) == resolved(full, service), service
