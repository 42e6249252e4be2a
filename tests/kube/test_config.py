"""`karpy explain`'s kubeconfig reader (the `kubernetes` library's loader) as credentials: fields, relative paths,
inline data, merged files, a named context, an exec credential plugin against the emulated API server, clear
errors. `karpy run`'s login through Kopf is tested in tests/operator/test_login.py."""

from __future__ import annotations

import base64
import datetime
import os
import pathlib
import sys
from typing import Any

import pytest
import yaml
from tests.kube import certs, exec_plugin

from karpy import clock
from karpy.kube import config, resources, rest
from karpy_emulator.apiserver import runner


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
    doc = _doc({"token": "abc"}, {"certificate-authority-data": _b64(certs.CERTIFICATE)}, namespace="karpy")
    creds = config.load_kubeconfig(_write(tmp_path, doc))
    assert (creds.server, creds.authorization, creds.namespace) == ("https://k8s.example:6443", "Bearer abc", "karpy")
    assert creds.ssl_context is not None
    assert [ca["subject"] for ca in creds.ssl_context.get_ca_certs()] == [certs.SUBJECT]


def test_relative_certificate_paths_resolve_against_the_kubeconfig_dir(tmp_path: pathlib.Path) -> None:
    (tmp_path / "certs").mkdir()
    (tmp_path / "certs/me.crt").write_text(certs.CERTIFICATE)
    (tmp_path / "ca.crt").write_text(certs.CERTIFICATE)
    (tmp_path / "me.key").write_text(certs.PRIVATE_KEY)
    user = {"client-certificate": "certs/me.crt", "client-key": str(tmp_path / "me.key")}
    creds = config.load_kubeconfig(_write(tmp_path, _doc(user, {"certificate-authority": "ca.crt"})))
    assert creds.authorization == ""  # the client certificate authenticates (ssl loaded it: the path resolved)
    assert creds.ssl_context is not None
    assert [ca["subject"] for ca in creds.ssl_context.get_ca_certs()] == [certs.SUBJECT]


def test_a_named_context_overrides_the_current_one(tmp_path: pathlib.Path) -> None:
    creds = config.load_kubeconfig(_write(tmp_path, _doc({"token": "t"})), context="other")
    assert creds.namespace == "kube-system"


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


def test_plain_http_has_no_tls_context_and_insecure_disables_verification(tmp_path: pathlib.Path) -> None:
    plain = config.load_kubeconfig(_write(tmp_path, _doc({"token": "t"}, {"server": "http://127.0.0.1:1"}), "plain"))
    assert plain.ssl_context is None
    insecure = config.load_kubeconfig(_write(tmp_path, _doc({"token": "t"}, {"insecure-skip-tls-verify": True})))
    assert insecure.ssl_context is not None
    assert insecure.ssl_context.check_hostname is False


# -- exec credential plugins -------------------------------------------------------------------------------------


def _sent(kube: runner.KubeAPIRunner) -> list[str | None]:
    return [r.headers.get("Authorization") for r in list(kube.api) if r.url.path == "/api/v1/nodes"]


async def test_an_exec_plugin_authenticates_requests_to_the_api_server(
    kube: runner.KubeAPIRunner, tmp_path: pathlib.Path
) -> None:
    creds = config.load_kubeconfig(exec_plugin.kubeconfig(kube.url, tmp_path, expires_in=datetime.timedelta(hours=1)))
    assert creds.authorization == "Bearer from-plugin-1"
    async with rest.RestClient(creds, clock=clock.SystemClock()) as api:
        await api.list(resources.NODES)
        await api.list(resources.NODES)
    assert _sent(kube) == ["Bearer from-plugin-1", "Bearer from-plugin-1"]
    assert (tmp_path / "runs").read_text() == "1"


def test_without_the_kubernetes_package_a_kubeconfig_is_a_clear_error(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The controller image does without it; only reading a kubeconfig needs the `kubeconfig` extra.
    path = _write(tmp_path, _doc({"token": "t"}))
    monkeypatch.setitem(sys.modules, "kubernetes", None)
    with pytest.raises(
        config.ConfigError, match=r"needs the kubernetes package: pip install 'karpy\[controller,kubeconfig\]'"
    ):
        config.load_kubeconfig(path)
