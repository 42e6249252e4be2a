"""`MaxResults` and `NextToken` for the catalog's describe calls, as EC2 pages them, for moto (which answers every
record in one page): part of the emulation, never of the runtime.

EC2 (DescribeInstanceTypes, DescribeInstanceTypeOfferings in the EC2 API reference, and botocore's EC2 model:
`DITMaxResults` 5..100, `DITOMaxResults` 5..1000) answers at most `MaxResults` records a page and a `NextToken`
while more remain; a value outside the range is refused with `InvalidParameterValue`. moto ignores both parameters,
so a client that pages as upstream's provider does (pkg/providers/instancetype/instancetype.go asks 100 shapes and
1,000 offerings a page) would get all ~1,400 shapes in one answer and parse them at once, which no real account
does. A request without `MaxResults` keeps moto's single page. The patch wraps moto's response handlers, so every
client in this process sees it.
"""

from __future__ import annotations

import base64
import functools
from typing import Any, Final

_PATCHED: Final = "_karpy_catalog_paging_patched"
PAGED: Final = {
    "describe_instance_types": ("InstanceTypes", 5, 100),
    "describe_instance_type_offerings": ("InstanceTypeOfferings", 5, 1000),
}
"""moto handler → (the answer's list, EC2's smallest and largest `MaxResults`)."""
_TOKEN_PREFIX: Final = "karpy-page:"


def _token(offset: int) -> str:
    return base64.urlsafe_b64encode(f"{_TOKEN_PREFIX}{offset}".encode()).decode()


def _offset(token: str) -> int | None:
    """The record a `NextToken` resumes at; None when it is not one this emulation gave out."""
    try:
        text = base64.urlsafe_b64decode(token.encode()).decode()
    except ValueError:
        return None
    if not text.startswith(_TOKEN_PREFIX) or not text[len(_TOKEN_PREFIX) :].isdigit():
        return None
    return int(text[len(_TOKEN_PREFIX) :])


def install() -> None:
    """Make moto's DescribeInstanceTypes and DescribeInstanceTypeOfferings honour `MaxResults`/`NextToken`.
    Idempotent."""
    from moto.core import responses  # lazily: the controller image does not ship moto
    from moto.ec2 import exceptions
    from moto.ec2.responses import instances

    handler: Any = instances.InstanceResponse
    if getattr(handler, _PATCHED, False):
        return

    def paged(name: str, key: str, smallest: int, largest: int) -> Any:
        original = getattr(handler, name)

        @functools.wraps(original)
        def describe(self: Any) -> Any:
            answer = original(self)
            size = self._get_int_param("MaxResults")
            token = self._get_param("NextToken")
            if size is None and not token:
                return answer
            if size is not None and not smallest <= size <= largest:
                raise exceptions.EC2ClientError(
                    "InvalidParameterValue", f"MaxResults {size} is not between {smallest} and {largest}."
                )
            start = 0 if not token else _offset(str(token))
            if start is None:
                raise exceptions.EC2ClientError("InvalidParameterValue", f"NextToken {token} is not valid.")
            records = list(answer.result[key])
            end = start + (size or largest)
            result: dict[str, Any] = {key: records[start:end]}
            if end < len(records):
                result["NextToken"] = _token(end)
            return responses.ActionResult(result)

        return describe

    for name, (key, smallest, largest) in PAGED.items():
        setattr(handler, name, paged(name, key, smallest, largest))
    setattr(handler, _PATCHED, True)
