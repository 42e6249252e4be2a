"""How `karpy run` authenticates: Kopf's login functions, as `kube.credentials.Credentials` for the REST client.

* In a pod (KUBERNETES_SERVICE_HOST is set): `kopf.login_with_service_account`, the pod's service-account token, CA
  and namespace. The server is KUBERNETES_SERVICE_HOST:KUBERNETES_SERVICE_PORT, as client-go's InClusterConfig
  takes it (k8s.io/client-go/rest/config.go), not the `kubernetes.default.svc` name Kopf assumes: resolving that
  needs cluster DNS, which may run on nodes only karpy would launch. It needs no `kubernetes` package, which the
  controller image does without.
* Elsewhere: `kopf.login_via_client`, the `kubernetes` package's loader (extra `kubeconfig`) on $KUBECONFIG (or
  ~/.kube/config) as that package read it when imported: tokens and token files, client certificates, `exec`
  credential plugins (what `aws eks update-kubeconfig` writes) and auth providers.

`rest.RestClient` calls `login` again whenever the API server answers 401: a projected service-account token is
re-read from its rotated file, an `exec` plugin runs again. `kopf.operator` itself is not run (see `app`), so the
login functions are called directly rather than through `@kopf.on.login`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Final

import kopf

from karpy.kube import credentials

log = logging.getLogger(__name__)

SERVICE_ACCOUNT: Final = "/var/run/secrets/kubernetes.io/serviceaccount"
"""Where the kubelet mounts the pod's service-account token, CA and namespace (read by Kopf's login)."""


class LoginError(Exception):
    """No credentials: the message names the file or variable to fix."""


def login(environ: Mapping[str, str]) -> credentials.Credentials:
    """The controller's credentials (blocking: files, perhaps a credential plugin; call it in a thread)."""
    settings = kopf.OperatorSettings()
    if environ.get("KUBERNETES_SERVICE_HOST"):
        return _in_cluster(environ, settings)
    try:
        info = kopf.login_via_client(logger=log, settings=settings)
    except kopf.LoginError as error:
        cause = f" ({error.__context__})" if error.__context__ is not None else ""
        raise LoginError(f"{_kubeconfig_path(environ)}: cannot use the kubeconfig{cause}") from error
    if info is None:
        raise LoginError(
            f"{_kubeconfig_path(environ)}: reading a kubeconfig needs the kubernetes package: "
            "pip install 'karpy[controller,kubeconfig]'"
        )
    if not info.token and not info.certificate_path and not info.username:
        raise LoginError(
            f"{_kubeconfig_path(environ)}: the current context's user gave no token or certificate "
            "(a failing exec plugin logs its error above)"
        )
    return _credentials(info, server=info.server)


def _in_cluster(environ: Mapping[str, str], settings: kopf.OperatorSettings) -> credentials.Credentials:
    host, port = environ.get("KUBERNETES_SERVICE_HOST", ""), environ.get("KUBERNETES_SERVICE_PORT", "")
    if not port:
        raise LoginError("KUBERNETES_SERVICE_PORT: required in-cluster, with KUBERNETES_SERVICE_HOST")
    info = kopf.login_with_service_account(logger=log, settings=settings)
    if info is None:
        raise LoginError(f"{SERVICE_ACCOUNT}/token: the service-account token is missing")
    host = f"[{host}]" if ":" in host else host  # an IPv6 service address
    return _credentials(info, server=f"https://{host}:{port}")


def _credentials(info: kopf.ConnectionInfo, *, server: str) -> credentials.Credentials:
    server = server.rstrip("/")
    return credentials.Credentials(
        server=server,
        authorization=info.as_http_headers().get("Authorization", ""),
        ssl_context=info.as_ssl_context() if server.startswith("https://") else None,
        namespace=info.default_namespace or "",
    )


def _kubeconfig_path(environ: Mapping[str, str]) -> str:
    return environ.get("KUBECONFIG") or os.path.expanduser("~/.kube/config")
