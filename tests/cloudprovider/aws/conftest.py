"""The AWS provider tests' fixtures, defined in `moto_fixtures` (a plain module, so that it is imported once)."""

from tests.cloudprovider.aws.moto_fixtures import (  # noqa: F401  (fixtures, found by pytest through this import)
    aws,
    aws_env,
    clock,
    jumping,
    make_provider,
    moto_url,
    nodeclasses,
    ready,
    seeded,
)
