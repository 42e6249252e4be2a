"""Kubeconfig parsing and the in-cluster configuration: fields, relative paths, inline data, clear errors."""

from __future__ import annotations

import base64
import pathlib
from typing import Any

import pytest
import yaml

from karpy.kube import config


def _doc(user: dict[str, Any], cluster: dict[str, Any] | None = None, **ctx: str) -> dict[str, Any]:
    return {
        "clusters": [{"name": "c", "cluster": {"server": "https://k8s.example:6443/", **(cluster or {})}}],
        "users": [{"name": "u", "user": user}],
        "contexts": [
            {"name": "main", "context": {"cluster": "c", "user": "u", **ctx}},
            {"name": "other", "context": {"cluster": "c", "user": "u", "namespace": "kube-system"}},
        ],
        "current-context": "main",
    }


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def test_token_user_with_inline_ca_and_namespace(tmp_path: pathlib.Path) -> None:
    doc = _doc({"token": "abc"}, {"certificate-authority-data": _b64("PEM")}, namespace="karpy")
    cfg = config.from_kubeconfig(doc, base_dir=tmp_path)
    assert cfg == config.Config(server="https://k8s.example:6443", token="abc", ca_data="PEM", namespace="karpy")


def test_relative_certificate_paths_resolve_against_the_kubeconfig_dir(tmp_path: pathlib.Path) -> None:
    user = {"client-certificate": "certs/me.crt", "client-key": "/abs/me.key", "tokenFile": "tok"}
    cfg = config.from_kubeconfig(_doc(user, {"certificate-authority": "ca.crt"}), base_dir=tmp_path)
    assert cfg.client_cert_file == str(tmp_path / "certs/me.crt")
    assert cfg.client_key_file == "/abs/me.key"
    assert cfg.ca_file == str(tmp_path / "ca.crt")
    assert cfg.token_file == str(tmp_path / "tok")


def test_a_named_context_overrides_the_current_one(tmp_path: pathlib.Path) -> None:
    cfg = config.from_kubeconfig(_doc({"token": "t"}), base_dir=tmp_path, context="other")
    assert cfg.namespace == "kube-system"


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({**_doc({}), "current-context": ""}, "current-context: not set"),
        (_doc({}, context_missing="x") | {"current-context": "nope"}, "contexts: no entry named 'nope'"),
        (_doc({}, {"server": ""}), "clusters['c'].cluster.server: required"),
        (_doc({"exec": {"command": "aws"}}), "users['u'].user.exec: credential plugins are not supported"),
        (_doc({"client-key-data": "%%%"}), "users['u'].user.client-key-data: not valid base64"),
    ],
)
def test_unusable_kubeconfigs_name_the_field(doc: dict[str, Any], message: str, tmp_path: pathlib.Path) -> None:
    with pytest.raises(config.ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        config.from_kubeconfig(doc, base_dir=tmp_path)


def test_load_kubeconfig_reads_the_file_and_reports_a_missing_one(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(_doc({"token": "t"})))
    assert config.load_kubeconfig(path).token == "t"
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
