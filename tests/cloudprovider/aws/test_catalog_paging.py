"""The catalog's describe calls are paged as upstream pages them, against the emulation's model of EC2's paging.

- the emulation (`karpy_emulator.aws.paging`, checked first): moto over HTTP answers DescribeInstanceTypes and
  DescribeInstanceTypeOfferings in pages of `MaxResults` records with a `NextToken`, the pages together are moto's
  single unpaged answer, and a `MaxResults` outside EC2's range (botocore's model: 5..100, 5..1000) is refused;
- the provider asks the page sizes upstream asks (pkg/providers/instancetype/instancetype.go: 100 shapes, 1,000
  offerings), so the ~1,400 raw shapes are never parsed in one answer, and the shapes it keeps are the unpaged
  answer's, compacted.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from botocore import exceptions as botocore_exceptions
from tests.cloudprovider.aws import moto_fixtures

from karpy.cloudprovider import shapefields
from karpy.cloudprovider.aws import clients, instancetypes
from karpy_emulator.aws import paging


@pytest.fixture
def plain(aws_env: str, request: pytest.FixtureRequest) -> clients.Clients:
    """Clients on the moto server, without the tests' in-process catalog answers: every describe goes over HTTP."""
    return clients.build_clients(
        region=moto_fixtures.REGION, max_attempts=1, session=moto_fixtures.boto_session(request.config)
    )


def _all_pages(ec2: Any, operation: str, key: str, size: int, **params: Any) -> list[list[Any]]:
    pages: list[list[Any]] = []
    token: str | None = None
    while True:
        answer = getattr(ec2, operation)(MaxResults=size, **({"NextToken": token} if token else {}), **params)
        pages.append(answer[key])
        token = answer.get("NextToken")
        if not token:
            return pages


@pytest.mark.parametrize(
    ("operation", "key", "params"),
    [
        ("describe_instance_types", "InstanceTypes", {}),
        ("describe_instance_type_offerings", "InstanceTypeOfferings", {"LocationType": "availability-zone"}),
    ],
)
def test_moto_pages_the_catalog_describes_as_ec2_does(
    plain: clients.Clients, operation: str, key: str, params: dict[str, Any]
) -> None:
    whole = getattr(plain.ec2, operation)(**params)
    assert "NextToken" not in whole  # no MaxResults: moto's one page, as before
    everything = whole[key]
    _, smallest, largest = paging.PAGED[operation]
    size = largest if len(everything) > largest else smallest
    pages = _all_pages(plain.ec2, operation, key, size, **params)
    assert [len(p) for p in pages[:-1]] == [size] * (len(pages) - 1)
    assert len(pages) == math.ceil(len(everything) / size) > 1
    assert [row for page in pages for row in page] == everything
    with pytest.raises(botocore_exceptions.ClientError) as refused:
        getattr(plain.ec2, operation)(MaxResults=largest + 1, **params)
    assert refused.value.response["Error"]["Code"] == "InvalidParameterValue"


async def test_the_provider_pages_the_shapes_by_upstreams_page_size(plain: clients.Clients, make_provider: Any) -> None:
    everything = plain.ec2.describe_instance_types()["InstanceTypes"]
    asked: list[Any] = []
    plain.ec2.meta.events.register(
        "provide-client-params.ec2.DescribeInstanceTypes", lambda params, **_: asked.append(params.get("MaxResults"))
    )
    shapes = await make_provider(aws_clients=plain).instance_type_provider.shapes()
    assert asked[0] == instancetypes.DESCRIBE_TYPES_PAGE == 100
    assert asked[1:] == [100] * (math.ceil(len(everything) / 100) - 1)
    assert list(shapes) == [shapefields.compact(info) for info in everything]


async def test_the_provider_pages_the_offerings_by_upstreams_page_size(
    plain: clients.Clients, make_provider: Any
) -> None:
    rows = plain.ec2.describe_instance_type_offerings(LocationType="availability-zone")["InstanceTypeOfferings"]
    asked: list[Any] = []
    plain.ec2.meta.events.register(
        "provide-client-params.ec2.DescribeInstanceTypeOfferings",
        lambda params, **_: asked.append(params.get("MaxResults")),
    )
    offered = await make_provider(aws_clients=plain).instance_type_provider.offered_zones()
    assert asked == [instancetypes.DESCRIBE_OFFERINGS_PAGE] * math.ceil(len(rows) / 1000)
    expected: dict[str, set[str]] = {}
    for row in rows:
        expected.setdefault(row["InstanceType"], set()).add(row["Location"])
    assert {name: set(zones) for name, zones in offered.items()} == expected
