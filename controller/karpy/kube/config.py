"""`karpy explain`'s kubeconfig reader: a kubeconfig file and context (the command's `--kubeconfig`, `--context`)
as `credentials.Credentials`, read by the `kubernetes` client library's loader (kubernetes.config.kube_config):
server URL, bearer token or token file, client certificate and key, CA, insecure-skip-tls-verify, `exec` credential
plugins and auth providers. One read for one short command: nothing is refreshed. `karpy run` logs in through Kopf
instead (`karpy.operator.login`), which explain must not import.
"""

from __future__ import annotations

import os
import pathlib
import ssl
from typing import Any

import yaml

from karpy.kube import credentials


class ConfigError(Exception):
    """The kubeconfig cannot be used; the message names the file and the field."""


def load_kubeconfig(path: str | os.PathLike[str], *, context: str = "") -> credentials.Credentials:
    """The credentials of a kubeconfig (the current context unless `context` names another). `path` may list
    several files separated by os.pathsep, as $KUBECONFIG does; relative paths resolve against the file that names
    them. Blocking: a credential plugin runs here."""
    text = os.fspath(path)
    files = [pathlib.Path(p).expanduser() for p in text.split(os.pathsep) if p]
    if not files or not any(f.is_file() for f in files):
        raise ConfigError(f"{text or '(empty)'}: cannot read the kubeconfig (no such file)")
    # Imported here: the controller image does without the kubernetes package (pyproject extra `kubeconfig`).
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
    token = str((configuration.api_key or {}).get("BearerToken") or "").removeprefix("Bearer ").strip()
    if user.get("exec") and not token and not configuration.cert_file:
        raise ConfigError(f"{where}.exec: the credential plugin gave no token or certificate (its error is logged)")
    if user.get("auth-provider") and not token:
        raise ConfigError(f"{where}.auth-provider: the provider gave no token (use an exec plugin or a token)")
    server = str(configuration.host).rstrip("/")
    return credentials.Credentials(
        server=server,
        authorization=f"Bearer {token}" if token else "",
        ssl_context=_tls(configuration) if server.startswith("https://") else None,
        namespace=str(names.get("namespace") or ""),
    )


def _tls(configuration: Any) -> ssl.SSLContext:
    """The CA and client certificate, from the files the loader names (it writes inline data to private files)."""
    context = ssl.create_default_context(cafile=configuration.ssl_ca_cert or None)
    if not configuration.verify_ssl:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if configuration.cert_file:
        context.load_cert_chain(configuration.cert_file, configuration.key_file or None)
    return context
