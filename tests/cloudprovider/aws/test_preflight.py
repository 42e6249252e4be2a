"""`karpy check` (cloudprovider/aws/preflight.py): `karpy run`'s AWS start-up checks on their own, against moto with
IAM authentication on (every request's signature and policy checked, as AWS does): exit 0 and one line naming what
AWS answered, or exit 2 and one line on standard error with AWS's reason (the line a Job's
`terminationMessagePolicy: FallbackToLogsOnError` makes its pod's termination message)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from tests.cloudprovider.aws import test_startup

from karpy import cli

REGION = test_startup.REGION
QUEUE = "karpy-check-queue"


def _keys(name: str, actions: list[str]) -> tuple[str, str]:
    """Access keys of a new IAM user allowed `actions` (made before IAM is enforced)."""
    iam = boto3.client("iam", region_name=REGION)
    iam.create_user(UserName=name)
    document = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": actions, "Resource": "*"}]}
    iam.put_user_policy(UserName=name, PolicyName="check", PolicyDocument=json.dumps(document))
    key = iam.create_access_key(UserName=name)["AccessKey"]
    return key["AccessKeyId"], key["SecretAccessKey"]


@pytest.fixture
def account(aws_env: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, tuple[str, str]]]:
    """Three identities, then IAM enforced: one the controller's policy would let through, one EC2 refuses, one
    that may not read the queue. The environment is the Job's: AWS_REGION, INTERRUPTION_QUEUE, no instance metadata."""
    boto3.client("sqs", region_name=REGION).create_queue(QueueName=QUEUE)
    users = {
        "allowed": _keys("check-allowed", ["ec2:DescribeInstanceTypes", "sqs:GetQueueUrl"]),
        "no-ec2": _keys("check-no-ec2", ["ec2:DescribeImages", "sqs:GetQueueUrl"]),
        "no-queue": _keys("check-no-queue", ["ec2:DescribeInstanceTypes"]),
    }
    monkeypatch.setenv("AWS_REGION", REGION)
    monkeypatch.setenv("INTERRUPTION_QUEUE", QUEUE)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.delenv("AWS_DEFAULT_REGION")
    test_startup._moto_auth(aws_env, "0")
    try:
        yield users
    finally:
        test_startup._moto_auth(aws_env, "inf")
        _remove(users)


def _remove(users: dict[str, tuple[str, str]]) -> None:
    """Leave the account as the fixture found it (moto's IAM users outlive a test)."""
    iam, sqs = boto3.client("iam", region_name=REGION), boto3.client("sqs", region_name=REGION)
    for who, (key_id, _) in users.items():
        iam.delete_access_key(UserName=f"check-{who}", AccessKeyId=key_id)
        iam.delete_user_policy(UserName=f"check-{who}", PolicyName="check")
        iam.delete_user(UserName=f"check-{who}")
    sqs.delete_queue(QueueUrl=sqs.get_queue_url(QueueName=QUEUE)["QueueUrl"])


def _as(monkeypatch: pytest.MonkeyPatch, keys: tuple[str, str]) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", keys[0])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", keys[1])


def test_an_accepted_identity_passes_naming_region_identity_and_queue(
    account: dict[str, tuple[str, str]], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _as(monkeypatch, account["allowed"])
    assert cli.main(["check"]) == cli.EXIT_OK
    out, err = capsys.readouterr()
    assert err == ""
    assert out.startswith(f"karpy check: ok: region {REGION}, identity arn:aws:iam::")
    assert ":user/check-allowed, EC2 reachable, interruption queue " in out
    assert out.rstrip().endswith(f"/{QUEUE}")


@pytest.mark.parametrize(
    ("who", "queue", "expected"),
    [
        ("no-ec2", QUEUE, "karpy check: EC2 DescribeInstanceTypes (dry run) failed: AccessDenied: "),
        (
            "allowed",
            "karpy-missing",
            "karpy check: SQS GetQueueUrl 'karpy-missing' (INTERRUPTION_QUEUE) failed: "
            "AWS.SimpleQueueService.NonExistentQueue: ",
        ),
    ],
)
def test_a_refused_call_exits_2_with_awss_reason_and_the_identity(
    who: str,
    queue: str,
    expected: str,
    account: dict[str, tuple[str, str]],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _as(monkeypatch, account[who])
    monkeypatch.setenv("INTERRUPTION_QUEUE", queue)
    assert cli.main(["check"]) == cli.EXIT_INVALID
    out, err = capsys.readouterr()
    assert out == ""
    assert len(err.splitlines()) == 1
    assert err.startswith(expected)
    assert err.rstrip().endswith(f":user/check-{who})")


def test_without_a_queue_the_queue_is_not_asked(
    account: dict[str, tuple[str, str]], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _as(monkeypatch, account["no-queue"])
    monkeypatch.setenv("INTERRUPTION_QUEUE", "")
    assert cli.main(["check"]) == cli.EXIT_OK
    assert capsys.readouterr().out.rstrip().endswith("EC2 reachable, no interruption queue")


def test_an_empty_region_exits_2_naming_the_setting(
    account: dict[str, tuple[str, str]], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _as(monkeypatch, account["allowed"])
    monkeypatch.setenv("AWS_REGION", "")
    assert cli.main(["check"]) == cli.EXIT_INVALID
    err = capsys.readouterr().err
    assert err.startswith("karpy check: no AWS region: set settings.awsRegion (the AWS_REGION variable)")
    assert "ec2..amazonaws.com" not in err


def test_an_identity_aws_does_not_know_ends_the_process_with_the_reason_last(
    account: dict[str, tuple[str, str]], tmp_path: Path
) -> None:
    """As the Job's pod runs it: its own process, credentials AWS does not know; exit 2, no traceback, the reason
    standard error's last line."""
    env = {
        **{k: v for k, v in os.environ.items() if k.startswith(("AWS_", "PATH", "INTERRUPTION_QUEUE"))},
        "HOME": str(tmp_path), "PYTHONWARNINGS": "error",
        "AWS_ACCESS_KEY_ID": "AKIAIOSFODNN7EXAMPLE", "AWS_SECRET_ACCESS_KEY": "wrong",
    }  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", "karpy.cli", "check"], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == cli.EXIT_INVALID, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    assert done.stdout == ""
    assert done.stderr.rstrip().splitlines()[-1].startswith("karpy check: STS GetCallerIdentity failed: ")
