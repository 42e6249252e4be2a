"""Where the API server is and how to authenticate: a kubeconfig, or the in-cluster configuration.

A kubeconfig is read by the `kubernetes` client library's loader (kubernetes.config.kube_config), not parsed here:
server URL, bearer token or token file, client certificate and key, CA, insecure-skip-tls-verify, and `exec`
credential plugins such as `aws eks get-token`, whose token it refreshes before expiry. The in-cluster
configuration is the pod's service account (its token file rotates; `rest.RestClient` re-reads it).
"""

from __future__ import annotations

import os
import pathlib
import ssl
import tempfile
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

SERVICE_ACCOUNT_DIR = pathlib.Path("/var/run/secrets/kubernetes.io/serviceaccount")


class ConfigError(Exception):
    """The kubeconfig or in-cluster environment cannot be used; the message names the field."""


@dataclass(frozen=True, slots=True)
class Config:
    server: str
    token: str = ""
    token_file: str = ""  # re-read periodically: projected service-account tokens rotate
    ca_file: str = ""
    ca_data: str = ""  # PEM text
    client_cert_file: str = ""
    client_key_file: str = ""
    client_cert_data: str = ""  # PEM text
    client_key_data: str = ""  # PEM text
    insecure_skip_tls_verify: bool = False
    namespace: str = "default"
    credentials: Callable[[], str] | None = field(default=None, compare=False)
    """A credential plugin's current bearer token (blocking: it may run the plugin; call it off the event loop);
    None when the token is static or comes from `token_file`."""

    def ssl_context(self) -> ssl.SSLContext | None:
        """The TLS context for https servers (None for plain http, as the emulator serves)."""
        if not self.server.startswith("https://"):
            return None
        context = ssl.create_default_context(cafile=self.ca_file or None, cadata=self.ca_data or None)
        if self.insecure_skip_tls_verify:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        if self.client_cert_file or self.client_cert_data:
            _load_client_certificate(context, self)
        return context


def _load_client_certificate(context: ssl.SSLContext, config: Config) -> None:
    # ssl only loads certificate chains from files: inline data goes through a private temporary directory.
    if config.client_cert_file and (config.client_key_file or not config.client_key_data):
        context.load_cert_chain(config.client_cert_file, config.client_key_file or None)
        return
    with tempfile.TemporaryDirectory(prefix="karpy-kube-") as tmp:
        cert = pathlib.Path(config.client_cert_file) if config.client_cert_file else pathlib.Path(tmp, "cert.pem")
        key = pathlib.Path(config.client_key_file) if config.client_key_file else pathlib.Path(tmp, "key.pem")
        if config.client_cert_data:
            cert.write_text(config.client_cert_data)
        if config.client_key_data:
            key.write_text(config.client_key_data)
            os.chmod(key, 0o600)
        context.load_cert_chain(str(cert), str(key) if (config.client_key_file or config.client_key_data) else None)


def load_kubeconfig(path: str | os.PathLike[str], *, context: str = "") -> Config:
    """The `Config` of a kubeconfig (the current context unless `context` names another), read by the `kubernetes`
    client library's loader: tokens, token files, client certificates, CA, and `exec` credential plugins (what
    `aws eks update-kubeconfig` writes). `path` may list several files separated by os.pathsep, as $KUBECONFIG
    does; relative paths resolve against the file that names them. Startup only: blocking I/O, and a credential
    plugin runs here once (its token is then refreshed through `Config.credentials`)."""
    text = os.fspath(path)
    files = [pathlib.Path(p).expanduser() for p in text.split(os.pathsep) if p]
    if not files or not any(f.is_file() for f in files):
        raise ConfigError(f"{text or '(empty)'}: cannot read the kubeconfig (no such file)")
    # Imported here: the controller image runs in-cluster without the kubernetes package (pyproject extra
    # `kubeconfig`); only reading a kubeconfig needs it.
    try:
        import kubernetes.client
        from kubernetes.config import config_exception, kube_config
    except ImportError as missing:
        raise ConfigError(
            f"{text}: reading a kubeconfig needs the kubernetes package: pip install 'karpy[controller,kubeconfig]'"
        ) from missing
    configuration = kubernetes.client.Configuration()
    # The library's loader is untyped (no-untyped-call): its results are read field by field below.
    try:
        merged = kube_config.KubeConfigMerger(os.pathsep.join(map(str, files)))  # type: ignore[no-untyped-call]
        loader = kube_config.KubeConfigLoader(  # type: ignore[no-untyped-call]
            config_dict=merged.config, active_context=context or None, config_base_path=None
        )
        loader.load_and_set(configuration)  # type: ignore[no-untyped-call]
    except (config_exception.ConfigException, OSError, yaml.YAMLError, KeyError, TypeError, ValueError) as error:
        raise ConfigError(f"{text}: cannot use the kubeconfig ({error})") from error
    names = loader.current_context.get("context") or {}
    user_name = names.get("user")
    entry = (
        merged.config["users"].get_with_name(user_name, safe=True) if user_name and "users" in merged.config else None
    )
    user = entry["user"].value if entry is not None and "user" in entry else {}
    where = f"{text}: users[{user_name!r}].user"
    token = _bearer(configuration)
    if user.get("exec") and not token and not configuration.cert_file:
        raise ConfigError(f"{where}.exec: the credential plugin gave no token or certificate (its error is logged)")
    if user.get("auth-provider") and not token:
        raise ConfigError(f"{where}.auth-provider: the provider gave no token (use an exec plugin or a token)")
    refresh = getattr(configuration, "refresh_api_key_hook", None)
    return Config(
        server=str(configuration.host).rstrip("/"),
        token=token,
        ca_file=configuration.ssl_ca_cert or "",
        client_cert_file=configuration.cert_file or "",
        client_key_file=configuration.key_file or "",
        insecure_skip_tls_verify=not configuration.verify_ssl,
        namespace=str(names.get("namespace") or "default"),
        credentials=_Refresher(configuration, refresh) if user.get("exec") and refresh is not None else None,
    )


def _bearer(configuration: Any) -> str:
    value = str((configuration.api_key or {}).get("BearerToken") or "")
    return value.removeprefix("Bearer ").strip()


@dataclass(frozen=True, slots=True)
class _Refresher:
    """The current token of a credential plugin: the library's refresh hook re-runs the plugin once the token it
    gave is within five minutes of its expirationTimestamp (kubernetes.config.kube_config), else returns at once.
    Callers run in threads (the controller's client and Kopf's login): one at a time, as the loader is not
    thread-safe and one plugin run serves them all."""

    configuration: Any
    hook: Callable[[Any], None]
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self) -> str:
        with self.lock:
            self.hook(self.configuration)
            return _bearer(self.configuration)


def in_cluster(env: Mapping[str, str], *, secrets: pathlib.Path = SERVICE_ACCOUNT_DIR) -> Config:
    """The pod's own service account: KUBERNETES_SERVICE_HOST/PORT, its token file (re-read) and CA."""
    host, port = env.get("KUBERNETES_SERVICE_HOST", ""), env.get("KUBERNETES_SERVICE_PORT", "")
    if not host or not port:
        raise ConfigError("KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT: required in-cluster")
    token = secrets / "token"
    if not token.is_file():
        raise ConfigError(f"{token}: the service-account token is missing")
    namespace_file = secrets / "namespace"
    namespace = namespace_file.read_text().strip() if namespace_file.is_file() else "default"
    host = f"[{host}]" if ":" in host else host  # IPv6 service address
    ca = secrets / "ca.crt"
    return Config(
        server=f"https://{host}:{port}",
        token_file=str(token),
        ca_file=str(ca) if ca.is_file() else "",
        namespace=namespace,
    )
