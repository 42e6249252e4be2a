"""The plan tests that resolve selectors through the AWS provider use the AWS provider tests' moto server (boto3 to
moto on 127.0.0.1)."""

from __future__ import annotations

from tests.cloudprovider.aws import moto_fixtures as aws_moto_fixtures

moto_url = aws_moto_fixtures.moto_url
aws_env = aws_moto_fixtures.aws_env
