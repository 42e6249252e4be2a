"""Fixtures of the interruption tests: the AWS emulator fixtures (moto server on 127.0.0.1, seeded account with the
interruption queue and its EventBridge rules) are shared with the AWS provider tests."""

from __future__ import annotations

from tests.cloudprovider.aws import moto_fixtures as aws_moto_fixtures

moto_url = aws_moto_fixtures.moto_url
aws_env = aws_moto_fixtures.aws_env
seeded = aws_moto_fixtures.seeded
aws = aws_moto_fixtures.aws
