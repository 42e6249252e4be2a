"""Kubeconfig loading (through the `kubernetes` library's loader) and the in-cluster configuration: fields, relative
paths, inline data, merged files, exec credential plugins against the emulated API server, clear errors."""

from __future__ import annotations

import base64
import datetime
import json
import os
import pathlib
import sys
from typing import Any

import pytest
import yaml
from tests.kube import exec_plugin

from karpy import clock
from karpy.kube import config, resources, rest
from karpy_emulator.apiserver import runner

PEM = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


def _doc(user: dict[str, Any], cluster: dict[str, Any] | None = None, **ctx: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": "https://k8s.example:6443/", **(cluster or {})}}],
        "users": [{"name": "u", "user": user}],
        "contexts": [
            {"name": "main", "context": {"cluster": "c", "user": "u", **ctx}},
            {"name": "other", "context": {"cluster": "c", "user": "u", "namespace": "kube-system"}},
        ],
        "current-context": "main",
    }


def _write(tmp_path: pathlib.Path, doc: dict[str, Any], name: str = "kubeconfig") -> pathlib.Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(doc))
    return path


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def test_token_user_with_inline_ca_and_namespace(tmp_path: pathlib.Path) -> None:
    doc = _doc({"token": "abc"}, {"certificate-authority-data": _b64(PEM)}, namespace="karpy")
    cfg = config.load_kubeconfig(_write(tmp_path, doc))
    assert (cfg.server, cfg.token, cfg.namespace, cfg.credentials) == ("https://k8s.example:6443", "abc", "karpy", None)
    assert pathlib.Path(cfg.ca_file).read_text() == PEM  # the library keeps inline data in a private file


def test_relative_certificate_paths_resolve_against_the_kubeconfig_dir(tmp_path: pathlib.Path) -> None:
    (tmp_path / "certs").mkdir()
    for name in ("certs/me.crt", "ca.crt", "me.key"):
        (tmp_path / name).write_text(PEM)
    user = {"client-certificate": "certs/me.crt", "client-key": str(tmp_path / "me.key")}
    cfg = config.load_kubeconfig(_write(tmp_path, _doc(user, {"certificate-authority": "ca.crt"})))
    assert cfg.client_cert_file == str(tmp_path / "certs/me.crt")
    assert cfg.client_key_file == str(tmp_path / "me.key")
    assert cfg.ca_file == str(tmp_path / "ca.crt")


def test_a_named_context_overrides_the_current_one(tmp_path: pathlib.Path) -> None:
    cfg = config.load_kubeconfig(_write(tmp_path, _doc({"token": "t"})), context="other")
    assert cfg.namespace == "kube-system"


def test_kubeconfig_lists_several_files_like_the_environment_variable(tmp_path: pathlib.Path) -> None:
    first = _write(tmp_path, {**_doc({"token": "t"}), "current-context": "other"}, "a")
    second = tmp_path / "missing"
    assert config.load_kubeconfig(f"{second}{os.pathsep}{first}").namespace == "kube-system"


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({**_doc({}), "current-context": "nope"}, "Expected object with name nope in .*contexts"),
        (
            _doc({"exec": {"command": "/does/not/exist", "apiVersion": "client.authentication.k8s.io/v1"}}),
            r"users\['u'\].user.exec: the credential plugin gave no token",
        ),
        # The library's own messages name the path inside the file too.
        (_doc({"auth-provider": {"name": "oidc", "config": {}}}), "Expected key id-token in .*auth-provider/config"),
    ],
)
def test_unusable_kubeconfigs_name_the_file_and_field(
    doc: dict[str, Any], message: str, tmp_path: pathlib.Path
) -> None:
    path = _write(tmp_path, doc)
    with pytest.raises(config.ConfigError, match=f"^{path}: .*{message}"):
        config.load_kubeconfig(path)


def test_a_missing_kubeconfig_is_a_clear_error(tmp_path: pathlib.Path) -> None:
    with pytest.raises(config.ConfigError, match="cannot read the kubeconfig"):
        config.load_kubeconfig(tmp_path / "missing")


def test_in_cluster_uses_the_service_env_and_account_files(tmp_path: pathlib.Path) -> None:
    (tmp_path / "token").write_text("sa-token")
    (tmp_path / "ca.crt").write_text("PEM")
    (tmp_path / "namespace").write_text("karpy\n")
    env = {"KUBERNETES_SERVICE_HOST": "10.100.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    cfg = config.in_cluster(env, secrets=tmp_path)
    assert cfg.server == "https://10.100.0.1:443"
    assert cfg.token_file == str(tmp_path / "token")
    assert cfg.ca_file == str(tmp_path / "ca.crt")
    assert cfg.namespace == "karpy"
    ipv6 = config.in_cluster({**env, "KUBERNETES_SERVICE_HOST": "fd00::1"}, secrets=tmp_path)
    assert ipv6.server == "https://[fd00::1]:443"


def test_in_cluster_without_the_environment_or_token_is_a_clear_error(tmp_path: pathlib.Path) -> None:
    with pytest.raises(config.ConfigError, match="KUBERNETES_SERVICE_HOST"):
        config.in_cluster({}, secrets=tmp_path)
    env = {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    with pytest.raises(config.ConfigError, match="service-account token is missing"):
        config.in_cluster(env, secrets=tmp_path)


def test_plain_http_has_no_tls_context_and_insecure_disables_verification() -> None:
    assert config.Config(server="http://127.0.0.1:1").ssl_context() is None
    context = config.Config(server="https://x", insecure_skip_tls_verify=True).ssl_context()
    assert context is not None
    assert context.check_hostname is False


# -- exec credential plugins -------------------------------------------------------------------------------------


def _sent(kube: runner.KubeAPIRunner) -> list[str | None]:
    return [r.headers.get("Authorization") for r in list(kube.api) if r.url.path == "/api/v1/nodes"]


async def test_an_exec_plugin_authenticates_requests_to_the_api_server(
    kube: runner.KubeAPIRunner, tmp_path: pathlib.Path
) -> None:
    cfg = config.load_kubeconfig(exec_plugin.kubeconfig(kube.url, tmp_path, expires_in=datetime.timedelta(hours=1)))
    assert cfg.token == "from-plugin-1"
    manual = clock.ManualClock()
    async with rest.RestClient(cfg, clock=manual) as api:
        await api.list(resources.NODES)
        manual.advance(rest.TOKEN_FILE_REFRESH)
        await api.list(resources.NODES)
    # An hour of validity left: the library hands back the same token, and the plugin ran once.
    assert _sent(kube) == ["Bearer from-plugin-1", "Bearer from-plugin-1"]
    assert (tmp_path / "runs").read_text() == "1"


async def test_an_exec_plugins_token_near_expiry_is_renewed_by_running_it_again(
    kube: runner.KubeAPIRunner, tmp_path: pathlib.Path
) -> None:
    # Within five minutes of its expiry a token counts as expired (kubernetes.config.kube_config), so each refresh
    # runs the plugin again; between refreshes the client reuses what it has.
    cfg = config.load_kubeconfig(exec_plugin.kubeconfig(kube.url, tmp_path, expires_in=datetime.timedelta(minutes=1)))
    manual = clock.ManualClock()
    async with rest.RestClient(cfg, clock=manual) as api:
        await api.list(resources.NODES)
        await api.list(resources.NODES)
        manual.advance(rest.TOKEN_FILE_REFRESH)
        await api.list(resources.NODES)
    assert _sent(kube) == ["Bearer from-plugin-2", "Bearer from-plugin-2", "Bearer from-plugin-3"]
    assert json.loads((tmp_path / "runs").read_text()) == 3


def test_without_the_kubernetes_package_a_kubeconfig_is_a_clear_error(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The controller image runs in-cluster without it; only reading a kubeconfig needs the `kubeconfig` extra.
    path = _write(tmp_path, _doc({"token": "t"}))
    monkeypatch.setitem(sys.modules, "kubernetes", None)
    with pytest.raises(
        config.ConfigError, match=r"needs the kubernetes package: pip install 'karpy\[controller,kubeconfig\]'"
    ):
        config.load_kubeconfig(path)
