"""`Credentials`: where the API server is and how `rest.RestClient` authenticates to it, as one frozen value.

`karpy run` gets them from Kopf's login functions (`karpy.operator.login`), and again whenever the API server
answers 401 (projected service-account tokens and `exec` plugin tokens expire); `karpy explain` from a kubeconfig
(`karpy.kube.config`); tests and the emulation build them directly.
"""

from __future__ import annotations

import dataclasses
import ssl
from collections.abc import Awaitable, Callable


@dataclasses.dataclass(frozen=True, slots=True)
class Credentials:
    server: str
    """The API server's URL, without a trailing slash."""
    authorization: str = ""
    """The `Authorization` header's value ("Bearer <token>"), "" to send none."""
    ssl_context: ssl.SSLContext | None = None
    """CA and client certificate for an https server; None for plain http (as the emulator serves)."""
    namespace: str = ""
    """The namespace the login names as this client's own (the service account's), "" when it names none."""


Login = Callable[[], Awaitable[Credentials]]
"""Fresh credentials, for a client whose credentials the API server refused (401)."""


def bearer(server: str, token: str) -> Credentials:
    """Credentials that send `token` as a bearer token (the emulated API server files requests under it)."""
    return Credentials(server=server, authorization=f"Bearer {token}" if token else "")
