"""A changed AMI selector by tags, resolved read-only through the AWS provider's own resolver against EC2 (boto3
to the moto server on 127.0.0.1): drift when it selects another AMI than the nodes run, none when it selects
theirs, "may drift" with the reason when AWS refuses or no AWS access is given."""

from __future__ import annotations

import asyncio
import functools
import json
import pathlib
from typing import Any

import boto3
import pytest
import yaml
from tests.cloudprovider.aws import moto_fixtures

from karpy import cli
from karpy import clock as karpy_clock
from karpy.api import decoding
from karpy.cloudprovider.aws import clients, faults, selector_lookup
from karpy.plan import command
from karpy_emulator import dumps

NOW = "2027-01-15T08:00:00Z"
SHAPE = dumps.Shape(nodes=2, pods_per_node=1, budget="1", now=1.8e9)
RUNNING = "ami-0123456789abcdef0"
"""The AMI the dump's NodeClaims run."""


def register_image(tag: str) -> str:
    """An AMI in EC2 (moto) tagged `release: <tag>` (tags unique per test: moto's images outlive a test)."""
    ec2 = boto3.session.Session(region_name=moto_fixtures.REGION).client("ec2")
    image = ec2.register_image(
        Name=f"plan-{tag}", Architecture="x86_64", RootDeviceName="/dev/xvda", VirtualizationType="hvm"
    )["ImageId"]
    ec2.create_tags(Resources=[image], Tags=[{"Key": "release", "Value": tag}])
    return str(image)


def write(tmp_path: pathlib.Path, *, tag: str, running: str = RUNNING) -> tuple[str, str]:
    """The dump (its NodeClaims on `running`) and a proposal selecting the AMIs tagged `release: <tag>`."""
    cluster = dumps.dump(SHAPE)
    for item in cluster["items"]:
        if item["kind"] == "NodeClaim":
            item["status"]["imageID"] = running
    dump = tmp_path / "dump.json"
    dump.write_text(json.dumps(cluster))
    nodeclass = dumps.nodeclass(SHAPE)
    nodeclass["spec"]["amiFamily"] = "AL2023"
    nodeclass["spec"]["amiSelectorTerms"] = [{"tags": {"release": tag}}]
    proposal = tmp_path / "proposal.yaml"
    proposal.write_text(yaml.safe_dump(nodeclass))
    return str(dump), str(proposal)


def plan_json(capsys: pytest.CaptureFixture[str], dump: str, proposal: str, *args: str) -> dict[str, Any]:
    code = cli.main(["plan", "--now", NOW, "-f", proposal, "--dump", dump, "-o", "json", *args])
    out, err = capsys.readouterr()
    assert err == ""
    doc: dict[str, Any] = json.loads(out)
    assert code == (2 if doc["disruptive"] else 0)
    return doc


def verdicts(doc: dict[str, Any]) -> set[tuple[str, str | None, str]]:
    return {(n["outcome"], n["reason"], n["message"]) for n in doc["nodes"]}


def test_a_tag_selector_that_resolves_to_a_new_ami_drifts(
    aws_env: str, capsys: pytest.CaptureFixture[str], tmp_path: pathlib.Path
) -> None:
    # aws_env gives the region (AWS_DEFAULT_REGION) and moto's endpoint: plan resolves without being asked to.
    new = register_image("next")
    doc = plan_json(capsys, *write(tmp_path, tag="next"))
    message = f"EC2NodeClass default amiSelectorTerms select {new}, not the node's {RUNNING}"
    assert verdicts(doc) == {("drifts", "AMIDrifted", message)}
    assert doc["nodepools"][0]["drifts"] == 2


def test_a_tag_selector_that_resolves_to_the_running_ami_does_not_drift(
    aws_env: str, capsys: pytest.CaptureFixture[str], tmp_path: pathlib.Path
) -> None:
    same = register_image("same")
    doc = plan_json(capsys, *write(tmp_path, tag="same", running=same))
    message = f"EC2NodeClass default: amiSelectorTerms select {same}, the node's {same} among them"
    assert verdicts(doc) == {("none", None, message)}
    assert not doc["disruptive"]


def test_without_aws_access_a_tag_selector_may_drift(
    capsys: pytest.CaptureFixture[str], tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(name, raising=False)
    doc = plan_json(capsys, *write(tmp_path, tag="unseen"))
    ((outcome, reason, message),) = verdicts(doc)
    assert (outcome, reason) == ("may-drift", "AMIDrifted")
    assert message.endswith(
        "karpy plan was given no AWS access to resolve them (--region or AWS_REGION, with credentials)"
    )


def test_no_aws_keeps_plan_off_aws_even_with_a_region(
    aws_env: str, capsys: pytest.CaptureFixture[str], tmp_path: pathlib.Path
) -> None:
    register_image("offline")
    doc = plan_json(capsys, *write(tmp_path, tag="offline"), "--no-aws")
    assert {n["outcome"] for n in doc["nodes"]} == {"may-drift"}


def test_aws_refusing_leaves_may_drift_with_its_reason(
    aws_env: str, tmp_path: pathlib.Path, request: pytest.FixtureRequest
) -> None:
    register_image("refused")
    aws = clients.build_clients(
        region=moto_fixtures.REGION, max_attempts=1, session=moto_fixtures.boto_session(request.config)
    )
    refusing = faults.Faults()

    async def install() -> None:
        refusing.install(aws)

    asyncio.run(install())
    refusing.inject({"ec2:DescribeImages"}, faults.Kind.UNAUTHORIZED)
    dump, proposal = write(tmp_path, tag="refused")
    doc = command.plan_json(
        command.Request(
            proposal=(proposal,),
            dump=(dump,),
            now=decoding.timestamp(NOW),
            resolve=functools.partial(
                selector_lookup.resolve,
                aws,
                clock=karpy_clock.ManualClock(decoding.timestamp(NOW)).now,
                region=moto_fixtures.REGION,
            ),
        )
    )
    ((outcome, reason, message),) = verdicts(doc)
    assert (outcome, reason) == ("may-drift", "AMIDrifted")
    assert "resolving them read-only failed: An error occurred (UnauthorizedOperation)" in message
    assert refusing.hit(faults.Kind.UNAUTHORIZED) == 1
