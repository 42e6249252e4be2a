"""What `karpy run` settles about AWS before it starts (aws: pkg/operator/operator.go NewOperator): the region, in
upstream's order, from botocore's own IMDS client against an IMDSv2 stand-in; and the EC2 connectivity check against
moto with IAM authentication on, whose refusal ends `karpy run` with the reason as its last line."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import subprocess
import sys
import urllib.request
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import aiohttp
import aiohttp.web
import boto3
import pytest

from karpy.cloudprovider.aws import startup
from karpy.kube import credentials
from karpy.operator import logging as operator_logging
from karpy.operator import login, main
from karpy_emulator.apiserver import runner, server

REGION = "us-west-2"
TOKEN = "imds-token"


@pytest.mark.parametrize(
    ("setting", "default", "imds", "expected"),
    [
        ("eu-west-1", "us-east-1", "ap-south-1", "eu-west-1"),  # the setting first
        ("", "us-east-1", "ap-south-1", "us-east-1"),  # then AWS_DEFAULT_REGION
        (" ", "", "ap-south-1", "ap-south-1"),  # then instance metadata
    ],
)
def test_the_region_comes_from_the_first_source_that_has_one(
    setting: str, default: str, imds: str, expected: str
) -> None:
    environ = {"AWS_DEFAULT_REGION": default} if default else {}
    assert startup.region(setting, environ, imds=lambda: imds) == expected


@pytest.mark.parametrize("imds", [lambda: None, None])
def test_no_region_anywhere_is_an_error_naming_the_setting(imds: startup.RegionLookup | None) -> None:
    with pytest.raises(startup.NoRegion, match=r"^no AWS region: set settings.awsRegion \(the AWS_REGION variable\)"):
        startup.region("", {}, imds=imds)


@contextlib.asynccontextmanager
async def imds_stand_in(availability_zone: str) -> AsyncIterator[str]:
    """IMDSv2 as EC2 serves it: a session token from PUT /latest/api/token, required on every GET."""

    async def token(request: aiohttp.web.Request) -> aiohttp.web.Response:
        assert request.headers["x-aws-ec2-metadata-token-ttl-seconds"]
        return aiohttp.web.Response(text=TOKEN)

    async def zone(request: aiohttp.web.Request) -> aiohttp.web.Response:
        if request.headers.get("x-aws-ec2-metadata-token") != TOKEN:
            return aiohttp.web.Response(status=401)
        return aiohttp.web.Response(text=availability_zone)

    application = aiohttp.web.Application()
    application.router.add_put("/latest/api/token", token)
    application.router.add_get("/latest/meta-data/placement/availability-zone/", zone)
    web = aiohttp.web.AppRunner(application, access_log=None)
    await web.setup()
    try:
        site = aiohttp.web.TCPSite(web, "127.0.0.1", 0)
        await site.start()
        yield f"http://127.0.0.1:{web.addresses[0][1]}/"
    finally:
        await web.cleanup()


async def test_instance_metadata_gives_the_region_of_the_nodes_zone() -> None:
    async with imds_stand_in("eu-central-1b") as url:
        environ = {"AWS_EC2_METADATA_SERVICE_ENDPOINT": url}
        assert await asyncio.to_thread(startup.imds_region(environ)) == "eu-central-1"
        # botocore honours the switch that turns instance metadata off
        disabled = {**environ, "AWS_EC2_METADATA_DISABLED": "true"}
        assert await asyncio.to_thread(startup.imds_region(disabled)) is None


async def test_instance_metadata_that_does_not_answer_gives_no_region() -> None:
    async with imds_stand_in("eu-central-1b") as url:
        pass  # stopped: the port refuses connections, as a pod's IMDS does past a hop limit of 1 (it times out)
    assert await asyncio.to_thread(startup.imds_region({"AWS_EC2_METADATA_SERVICE_ENDPOINT": url})) is None


def _moto_auth(moto_url: str, count: str) -> None:
    request = urllib.request.Request(
        f"{moto_url}/moto-api/reset-auth",
        data=count.encode(),
        method="POST",
        headers={"Content-Type": "application/octet-stream"},  # not a form: moto reads the raw body
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 200


@pytest.fixture
def iam_enforced(aws_env: str) -> Iterator[str]:
    """moto checks every request's signature and IAM policy, as AWS does (process-wide: restored after)."""
    _moto_auth(aws_env, "0")
    try:
        yield aws_env
    finally:
        _moto_auth(aws_env, "inf")


def _user_keys(*, may_describe: bool) -> tuple[str, str]:
    """Access keys of a new IAM user that may (or may not) call ec2:DescribeInstanceTypes. Made before IAM is
    enforced: the fixture's own keys belong to nobody."""
    iam = boto3.client("iam", region_name=REGION)
    name = f"karpy-{'allowed' if may_describe else 'denied'}"
    iam.create_user(UserName=name)
    action = "ec2:DescribeInstanceTypes" if may_describe else "ec2:DescribeImages"
    document = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": action, "Resource": "*"}]}
    iam.put_user_policy(UserName=name, PolicyName="probe", PolicyDocument=json.dumps(document))
    key = iam.create_access_key(UserName=name)["AccessKey"]
    return key["AccessKeyId"], key["SecretAccessKey"]


def _ec2(keys: tuple[str, str]) -> object:
    return boto3.client("ec2", region_name=REGION, aws_access_key_id=keys[0], aws_secret_access_key=keys[1])


async def test_the_connectivity_check_names_what_aws_refused(aws_env: str) -> None:
    allowed, denied = _user_keys(may_describe=True), _user_keys(may_describe=False)
    _moto_auth(aws_env, "0")
    try:
        assert await startup.ec2_unreachable(_ec2(allowed)) is None
        unknown = await startup.ec2_unreachable(_ec2(("AKIAIOSFODNN7EXAMPLE", "wrong")))
        not_permitted = await startup.ec2_unreachable(_ec2(denied))
    finally:
        _moto_auth(aws_env, "inf")
    assert unknown is not None
    assert unknown.startswith("EC2 DescribeInstanceTypes (dry run) failed: AuthFailure: ")
    assert not_permitted is not None
    # EC2 says UnauthorizedOperation, moto AccessDenied: the reason carries whichever code and message came back
    assert not_permitted.startswith("EC2 DescribeInstanceTypes (dry run) failed: AccessDenied: ")
    assert "not authorized to perform: ec2:DescribeInstanceTypes" in not_permitted


async def test_no_connection_is_a_reason_too() -> None:
    ec2 = boto3.client(
        "ec2", region_name=REGION, endpoint_url="http://127.0.0.1:9", aws_access_key_id="a", aws_secret_access_key="b"
    )
    ec2.meta.config.retries = {"max_attempts": 1}
    reason = await startup.ec2_unreachable(ec2)
    assert reason is not None
    assert reason.startswith("EC2 DescribeInstanceTypes (dry run) failed: Could not connect to the endpoint URL")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_karpy_run_exits_2_with_the_reason_when_aws_refuses_its_identity(iam_enforced: str, tmp_path: Path) -> None:
    """`karpy run` as a user runs it (its own process), with credentials AWS does not know: as upstream's
    controller (aws: pkg/operator/operator.go), it exits at start, and the reason is standard error's last line, the
    line the chart's `terminationMessagePolicy: FallbackToLogsOnError` makes the pod's termination message."""
    with runner.KubeAPIRunner(server.FakeKubeAPI(seed=5)) as kube:
        env = {
            "PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path), "PYTHONWARNINGS": "error",
            "KUBECONFIG": str(kube.write_kubeconfig(tmp_path / "kubeconfig")), "CLUSTER_NAME": "demo",
            "AWS_REGION": REGION, "AWS_ENDPOINT_URL": iam_enforced, "AWS_ACCESS_KEY_ID": "AKIAIOSFODNN7EXAMPLE",
            "AWS_SECRET_ACCESS_KEY": "wrong", "AWS_EC2_METADATA_DISABLED": "true", "DISABLE_LEADER_ELECTION": "true",
            # the process ends before it serves: ports nothing listens on, all the same
            "METRICS_PORT": str(_free_port()), "HEALTH_PROBE_PORT": str(_free_port()),
        }  # fmt: skip
        done = subprocess.run(
            [sys.executable, "-m", "karpy.cli", "run"], env=env, capture_output=True, text=True, timeout=120,
            check=False,
        )  # fmt: skip
    assert done.returncode == main.EXIT_INVALID, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    last = done.stderr.rstrip().splitlines()[-1]
    assert last.startswith(
        "karpy run: the cloud provider cannot be used: EC2 DescribeInstanceTypes (dry run) failed: AuthFailure: "
    )


def test_karpy_run_without_a_region_exits_2_naming_the_setting(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(operator_logging, "configure", lambda *_, **__: None)
    monkeypatch.setattr(login, "login", lambda _: credentials.Credentials("http://127.0.0.1:1"))
    # no setting, no AWS_DEFAULT_REGION, and instance metadata off (botocore's own switch)
    assert main.main({"CLUSTER_NAME": "demo", "AWS_EC2_METADATA_DISABLED": "true"}) == main.EXIT_INVALID
    err = capsys.readouterr().err
    assert err.startswith("karpy run: no AWS region: set settings.awsRegion (the AWS_REGION variable)")
    assert "Traceback" not in err
    assert "ec2..amazonaws.com" not in err
