"""A local ARC zonal shift endpoint (moto has no arc-zonal-shift service): GetManagedResource in the service's
REST-JSON protocol, so that boto3's own client, serializer and error parsing are what the controller exercises.

`GET /managedresources/{resourceIdentifier}` answers a registered resource with its zonal shifts (timestamps as
epoch seconds, the protocol's default), and anything else with ResourceNotFoundException (404, `x-amzn-ErrorType`),
as the service does for a cluster that is not registered. Point a client at it with
`AWS_ENDPOINT_URL_ARC_ZONAL_SHIFT`. Binds 127.0.0.1 only; `serving()` stops it on exit.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import threading
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final

_PREFIX: Final = "/managedresources/"


@dataclass(frozen=True, slots=True)
class Shift:
    away_from: str
    """The zone id traffic is moved away from ("use1-az1")."""
    expiry: float
    """Epoch seconds."""
    applied: bool = True
    start: float = 0.0
    shift_id: str = "shift-0"


class ZonalShiftService:
    """The service's state: registered resources (ARN → their shifts), and every resource identifier asked for."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._resources: dict[str, tuple[Shift, ...]] = {}
        self.requests: list[str] = []

    def register(self, arn: str) -> None:
        with self._lock:
            self._resources.setdefault(arn, ())

    def set_shifts(self, arn: str, *shifts: Shift) -> None:
        """Replace the registered resource's shifts (none: no shift)."""
        with self._lock:
            self._resources[arn] = shifts

    def answer(self, identifier: str) -> tuple[int, dict[str, Any]]:
        with self._lock:
            self.requests.append(identifier)
            shifts = self._resources.get(identifier)
        if shifts is None:
            return 404, {"message": f"Resource {identifier} was not found.", "code": "ResourceNotFoundException"}
        return 200, {
            "arn": identifier,
            "name": identifier.rsplit("/", 1)[-1],
            "appliedWeights": {},
            "zonalShifts": [
                {
                    "appliedStatus": "APPLIED" if s.applied else "NOT_APPLIED",
                    "zonalShiftId": s.shift_id,
                    "resourceIdentifier": identifier,
                    "awayFrom": s.away_from,
                    "expiryTime": s.expiry,
                    "startTime": s.start,
                    "comment": "emulated",
                    "shiftType": "ZONAL_SHIFT",
                }
                for s in shifts
            ],
            "autoshifts": [],
            "zonalAutoshiftStatus": "DISABLED",
        }


def _handler(service: ZonalShiftService) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = urllib.parse.urlsplit(self.path).path
            if path.startswith(_PREFIX):
                status, body = service.answer(urllib.parse.unquote(path[len(_PREFIX) :]))
            else:
                status, body = 404, {"message": f"no operation at {path}", "code": "UnknownOperationException"}
            payload = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            if status != 200:
                self.send_header("x-amzn-ErrorType", str(body["code"]))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: the tests read the service's own record of requests."""

    return Handler


@contextlib.contextmanager
def serving(service: ZonalShiftService) -> Iterator[str]:
    """Serve `service` on a free 127.0.0.1 port in a thread; yields its URL, stops and joins on exit."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(service))
    server.daemon_threads = False  # server_close() joins the request threads: none outlives the block
    thread = threading.Thread(target=server.serve_forever, name="arc-zonal-shift", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
