"""How `karpy run` authenticates: Kopf's login functions, as `kube.credentials.Credentials` for the REST client.

* In a pod (KUBERNETES_SERVICE_HOST is set): `kopf.login_with_service_account`, the pod's service-account token, CA
  and namespace. The server is KUBERNETES_SERVICE_HOST:KUBERNETES_SERVICE_PORT, as client-go's InClusterConfig
  takes it (k8s.io/client-go/rest/config.go), not the `kubernetes.default.svc` name Kopf assumes: resolving that
  needs cluster DNS, which may run on nodes only karpy would launch. It needs no `kubernetes` package, which the
  controller image does without.
* Elsewhere, a kubeconfig ($KUBECONFIG, or ~/.kube/config). One whose users hold their credentials inline (a token,
  a client certificate and key, a username and password; files only by absolute path) is read by
  `kopf.login_with_kubeconfig`, Kopf's own reader, which needs no `kubernetes` package. Any other (`exec` credential
  plugins, what `aws eks update-kubeconfig` writes; auth providers; token files; paths relative to the kubeconfig)
  goes to `kopf.login_via_client`, the `kubernetes` package's loader (extra `kubeconfig`), on $KUBECONFIG as that
  package read it when imported; so does one Kopf's reader cannot read, whose error that loader then reports. Either
  way no default namespace is taken from the kubeconfig (the `kubernetes` package has no notion of one).

`rest.RestClient` calls `login` again whenever the API server answers 401: a projected service-account token is
re-read from its rotated file, an `exec` plugin runs again. `kopf.operator` itself is not run (see `app`), so the
login functions are called directly rather than through `@kopf.on.login`.

Kopf imports the `kubernetes` and `pykube` packages when it is imported, if they are installed, only to recognise
their objects in its adoption helpers, which karpy does not call. They are hidden from that one import
(`_without`), so a process that reads a plain kubeconfig, or runs in a pod, never loads them: 18 MB of RSS in a
virtualenv that has them (`python -X importtime`: kubernetes, pydantic, google-auth, requests, jsonschema), as the
image, which has neither, already does without. `kopf.login_via_client` imports `kubernetes` itself when it is called.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterator, Mapping
from typing import Any, Final

import yaml

from karpy.kube import credentials

OPTIONAL_CLIENTS: Final = ("kubernetes", "kubernetes_asyncio", "pykube")
"""Client libraries Kopf imports at its own import when installed (kopf/_cogs/helpers/thirdparty.py)."""


@contextlib.contextmanager
def _without(names: tuple[str, ...]) -> Iterator[None]:
    """Make `names` unimportable (a None entry in sys.modules) for the block, unless one is imported already."""
    hidden = [name for name in names if name not in sys.modules]
    for name in hidden:
        sys.modules[name] = None  # type: ignore[assignment]  # the import system's "not importable" marker
    try:
        yield
    finally:
        for name in hidden:
            if sys.modules.get(name, "") is None:
                del sys.modules[name]


with _without(OPTIONAL_CLIENTS):
    import kopf

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
    if _inline(_kubeconfig_paths()):
        try:
            info = kopf.login_with_kubeconfig(settings=settings)
        except (kopf.LoginError, OSError, LookupError, TypeError, AttributeError, yaml.YAMLError):
            info = None  # the client's loader reads it again and reports what is wrong in its own words
        if info is not None and info.server:
            return _credentials(info, server=info.server, namespace="")
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
    return _credentials(info, server=info.server, namespace="")


def _in_cluster(environ: Mapping[str, str], settings: kopf.OperatorSettings) -> credentials.Credentials:
    host, port = environ.get("KUBERNETES_SERVICE_HOST", ""), environ.get("KUBERNETES_SERVICE_PORT", "")
    if not port:
        raise LoginError("KUBERNETES_SERVICE_PORT: required in-cluster, with KUBERNETES_SERVICE_HOST")
    info = kopf.login_with_service_account(logger=log, settings=settings)
    if info is None:
        raise LoginError(f"{SERVICE_ACCOUNT}/token: the service-account token is missing")
    host = f"[{host}]" if ":" in host else host  # an IPv6 service address
    return _credentials(info, server=f"https://{host}:{port}", namespace=info.default_namespace or "")


def _credentials(info: kopf.ConnectionInfo, *, server: str, namespace: str) -> credentials.Credentials:
    server = server.rstrip("/")
    return credentials.Credentials(
        server=server,
        authorization=info.as_http_headers().get("Authorization", ""),
        ssl_context=info.as_ssl_context() if server.startswith("https://") else None,
        namespace=namespace,
    )


def _kubeconfig_path(environ: Mapping[str, str]) -> str:
    return environ.get("KUBECONFIG") or os.path.expanduser("~/.kube/config")


CLIENT_ONLY_USER_FIELDS: Final = ("exec", "auth-provider", "tokenFile")
"""User fields only the `kubernetes` package's loader acts on: a plugin to run, a token to refresh or re-read."""
PATH_FIELDS: Final = ("certificate-authority", "client-certificate", "client-key")
"""File fields that package resolves against the kubeconfig's folder, and Kopf's reader against the working one."""


def _kubeconfig_paths() -> list[str]:
    """The files both readers take: the process's $KUBECONFIG (os.pathsep-separated), else ~/.kube/config."""
    paths = os.environ.get("KUBECONFIG") or "~/.kube/config"
    return [os.path.expanduser(path.strip()) for path in paths.split(os.pathsep) if path.strip()]


def _inline(paths: list[str]) -> bool:
    """Whether every user and cluster of these kubeconfigs is one Kopf's reader takes as the client's loader would."""
    try:
        docs = []
        for path in paths:
            with open(path, encoding="utf-8") as file:
                docs.append(yaml.safe_load(file) or {})
        entries = [
            _entry(item, key)
            for doc in docs
            for section, key in (("users", "user"), ("clusters", "cluster"))
            for item in doc.get(section) or ()
        ]
    except (OSError, AttributeError, TypeError, yaml.YAMLError):
        return False  # the client's loader reports it
    return all(
        not any(field in entry for field in CLIENT_ONLY_USER_FIELDS)
        and all(os.path.isabs(str(entry[field])) for field in PATH_FIELDS if entry.get(field))
        for entry in entries
    )


def _entry(item: Any, key: str) -> dict[str, Any]:
    entry = item.get(key) or {}
    if not isinstance(entry, dict):
        raise TypeError(f"{key} is not a mapping")
    return entry
