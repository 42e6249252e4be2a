"""CreateFleet's `ClientToken` as EC2 documents it, for moto (which ignores it): part of the emulation, never of the
runtime.

EC2 (Ensuring idempotency, EC2 API reference): a request repeated with the same client token and the same
parameters gets the first request's answer and launches nothing more; the same token with different parameters is
refused with `IdempotentParameterMismatch` (HTTP 400). The patch keeps, per region backend, each token's
parameters and fleet; moto's reset drops them with the backend. It wraps moto's CreateFleet response handler, so
every client in this process (the tests' and the controller's) sees it, and fault hooks on a client still see the
calls.

moto's threaded server serves requests at once, but its backends are not thread-safe: two CreateFleet calls in
flight together race on a subnet's address generator ("generator already executing") and on the token check here
(both find the token unseen and both launch). EC2 answers each request atomically, so the patched handler serves
one CreateFleet at a time (`SERIAL`).
"""

from __future__ import annotations

import functools
import json
import threading
from typing import Any, Final

_PATCHED: Final = "_karpy_fleet_client_tokens_patched"
_TOKENS: Final = "_karpy_fleet_client_tokens"
_NOT_PARAMETERS: Final = frozenset({"ClientToken", "Action", "Version"})
SERIAL: Final = threading.Lock()
"""Held for each CreateFleet the patched handler serves (see the module docstring)."""


def install() -> None:
    """Make moto's CreateFleet honour `ClientToken`. Idempotent."""
    from moto.core import responses  # lazily: the controller image does not ship moto
    from moto.ec2 import exceptions
    from moto.ec2.responses import fleets

    handler: Any = fleets.Fleets
    if getattr(handler, _PATCHED, False):
        return
    original = handler.create_fleet

    @functools.wraps(original)
    def create_fleet(self: Any) -> Any:
        with SERIAL:
            return _create_fleet(self)

    def _create_fleet(self: Any) -> Any:
        token = self._get_param("ClientToken")
        if not token:
            return original(self)
        parameters = json.dumps(
            {k: v for k, v in sorted(self.querystring.items()) if k not in _NOT_PARAMETERS}, sort_keys=True
        )
        seen: dict[str, tuple[str, str]] = self.ec2_backend.__dict__.setdefault(_TOKENS, {})
        if token in seen:
            first, fleet_id = seen[token]
            if first != parameters:
                raise exceptions.EC2ClientError(
                    "IdempotentParameterMismatch",
                    f"The client token {token} was used with different parameters in an earlier request.",
                )
            fleet = self.ec2_backend.fleets[fleet_id]
            result: dict[str, Any] = {"FleetId": fleet.id}
            if fleet.instances is not None:
                result["Instances"] = fleet.instances
            return responses.ActionResult(result)
        answer = original(self)
        seen[token] = (parameters, answer.result["FleetId"])
        return answer

    handler.create_fleet = create_fleet
    setattr(handler, _PATCHED, True)


def forget() -> None:
    """Drop every region's remembered tokens, as a fresh account has none (for tests that restore the account
    between them instead of resetting moto)."""
    from moto.ec2.models import ec2_backends  # lazily: the controller image does not ship moto

    for account in list(ec2_backends.values()):
        for backend in list(account.values()):
            backend.__dict__.pop(_TOKENS, None)
