"""`karpy run`'s login through Kopf's login functions: a kubeconfig's token, client certificate or `exec` plugin
(`kopf.login_via_client`), the pod's service account (`kopf.login_with_service_account`, at its real path in a
private mount namespace), clear errors, and `karpy run` on the emulated API server logging in again through the
plugin when the server refuses its token."""

from __future__ import annotations

import asyncio
import base64
import datetime
import json
import os
import pathlib
import shutil
import subprocess
import sys
import textwrap
from typing import Any

import kmock
import kubernetes
import pytest
import yaml
from tests import polling
from tests.kube import certs, exec_plugin
from tests.operator import support

from karpy import settings
from karpy.operator import app, login, main
from karpy.operator import logging as operator_logging
from karpy_emulator.apiserver import runner


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _kubeconfig(tmp_path: pathlib.Path, user: dict[str, Any], server: str = "https://k8s.example:6443") -> pathlib.Path:
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "c", "cluster": {"server": server, "certificate-authority-data": _b64(certs.CERTIFICATE)}}
        ],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "main", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "main",
    }
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.fixture
def use_kubeconfig(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Point both readers at a file: Kopf's (the process's $KUBECONFIG) and the `kubernetes` package's loader (which
    read $KUBECONFIG once, at import)."""

    def use(path: pathlib.Path) -> dict[str, str]:
        monkeypatch.setenv("KUBECONFIG", str(path))
        monkeypatch.setattr(kubernetes.config.kube_config, "KUBE_CONFIG_DEFAULT_LOCATION", str(path))
        return {"KUBECONFIG": str(path)}

    return use


def test_a_kubeconfig_token_and_ca(tmp_path: pathlib.Path, use_kubeconfig: Any) -> None:
    creds = login.login(use_kubeconfig(_kubeconfig(tmp_path, {"token": "abc"})))
    assert (creds.server, creds.authorization) == ("https://k8s.example:6443", "Bearer abc")
    assert creds.ssl_context is not None
    assert [ca["subject"] for ca in creds.ssl_context.get_ca_certs()] == [certs.SUBJECT]


def test_a_kubeconfig_client_certificate(tmp_path: pathlib.Path, use_kubeconfig: Any) -> None:
    user = {"client-certificate-data": _b64(certs.CERTIFICATE), "client-key-data": _b64(certs.PRIVATE_KEY)}
    creds = login.login(use_kubeconfig(_kubeconfig(tmp_path, user)))
    assert creds.authorization == ""  # the certificate authenticates: Kopf loaded it into the TLS context
    assert creds.ssl_context is not None


@pytest.mark.parametrize(
    ("user", "message"),
    [
        ({"exec": {"command": "/does/not/exist", "apiVersion": "client.authentication.k8s.io/v1"}}, "gave no token"),
        ({"auth-provider": {"name": "oidc", "config": {}}}, "cannot use the kubeconfig"),
    ],
)
def test_an_unusable_kubeconfig_names_the_file(
    user: dict[str, Any], message: str, tmp_path: pathlib.Path, use_kubeconfig: Any
) -> None:
    path = _kubeconfig(tmp_path, user)
    with pytest.raises(login.LoginError, match=f"^{path}: .*{message}"):
        login.login(use_kubeconfig(path))


def test_without_the_kubernetes_package_a_kubeconfig_is_a_clear_error(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "kubernetes", None)
    path = exec_plugin.kubeconfig("https://k8s.example:6443", tmp_path, expires_in=datetime.timedelta(hours=1))
    monkeypatch.setenv("KUBECONFIG", str(path))
    with pytest.raises(login.LoginError, match=r"needs the kubernetes package: pip install 'karpy\[controller,"):
        login.login({"KUBECONFIG": str(path)})
    # a kubeconfig with its token inline is Kopf's own reader's: no package needed
    plain = _kubeconfig(tmp_path, {"token": "abc"})
    monkeypatch.setenv("KUBECONFIG", str(plain))
    assert login.login({"KUBECONFIG": str(plain)}).authorization == "Bearer abc"


def test_a_relative_certificate_path_is_read_from_the_kubeconfig_folder(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, use_kubeconfig: Any
) -> None:
    # The `kubernetes` package resolves it against the kubeconfig's folder; Kopf's reader would against the
    # working directory, so such a kubeconfig goes to the package's loader.
    (tmp_path / "client.crt").write_text(certs.CERTIFICATE)
    (tmp_path / "client.key").write_text(certs.PRIVATE_KEY)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    user = {"client-certificate": "client.crt", "client-key": "client.key"}
    creds = login.login(use_kubeconfig(_kubeconfig(tmp_path, user)))
    assert (creds.authorization, creds.namespace) == ("", "")
    assert creds.ssl_context is not None


PLAIN_LOGIN = """
import json, sys
from karpy import cli
from karpy.operator import login, main
creds = login.login({})
loaded = sorted(name for name in ("kubernetes", "pykube", "pydantic", "requests", "scipy") if name in sys.modules)
print(json.dumps([creds.authorization, creds.namespace, loaded]))
"""


@pytest.mark.parametrize("kind", ["token", "exec"])
def test_a_plain_kubeconfig_never_loads_the_kubernetes_package(kind: str, tmp_path: pathlib.Path) -> None:
    # `karpy run`'s imports and a login from a kubeconfig with its token inline load neither the `kubernetes`
    # package nor pykube (installed here), as in the image, which has neither; an exec plugin still needs it. scipy
    # waits for the optimizer's first LP.
    if kind == "token":
        path = _kubeconfig(tmp_path, {"token": "abc"})
        doc = yaml.safe_load(path.read_text())
        doc["contexts"][0]["context"]["namespace"] = "ignored"  # the kubernetes package has no default namespace
        path.write_text(yaml.safe_dump(doc))
    else:
        path = exec_plugin.kubeconfig("https://k8s.example:6443", tmp_path, expires_in=datetime.timedelta(hours=1))
    env = {**os.environ, "KUBECONFIG": str(path)}
    done = subprocess.run([sys.executable, "-c", PLAIN_LOGIN], capture_output=True, text=True, check=False, env=env)
    assert done.returncode == 0, done.stderr
    authorization, namespace, loaded = json.loads(done.stdout)
    if kind == "token":
        assert (authorization, namespace, loaded) == ("Bearer abc", "", [])
    else:
        assert authorization == f"Bearer {exec_plugin.TOKEN_PREFIX}-1"
        assert "kubernetes" in loaded


def test_in_cluster_without_the_port_or_the_token_is_a_clear_error(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(login.LoginError, match=r"^KUBERNETES_SERVICE_PORT: required in-cluster"):
        login.login({"KUBERNETES_SERVICE_HOST": "10.100.0.1"})
    if os.path.exists(login.SERVICE_ACCOUNT):
        pytest.skip(f"this machine is a pod: {login.SERVICE_ACCOUNT} exists")
    with pytest.raises(login.LoginError, match="serviceaccount/token: the service-account token is missing"):
        login.login({"KUBERNETES_SERVICE_HOST": "10.100.0.1", "KUBERNETES_SERVICE_PORT": "443"})
    # `karpy run` exits 2 naming what to fix (its JSON logging is not installed over the test run's)
    monkeypatch.setattr(operator_logging, "configure", lambda *_, **__: None)
    assert main.main({"CLUSTER_NAME": "test", "KUBERNETES_SERVICE_HOST": "10.0.0.1"}) == main.EXIT_INVALID
    assert "KUBERNETES_SERVICE_PORT" in capsys.readouterr().err


IN_POD = """
import json
from karpy.operator import login
creds = login.login({"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "443"})
cas = [ca["subject"] for ca in creds.ssl_context.get_ca_certs()]
print(json.dumps([creds.server, creds.authorization, creds.namespace, cas]))
"""


def test_in_cluster_the_service_account_at_its_real_path(tmp_path: pathlib.Path) -> None:
    # The kubelet's mount, played in a private user and mount namespace: a tmpfs over /var/run with the account's
    # files bound where Kopf reads them. Nothing outside the child process sees it.
    (tmp_path / "token").write_text("sa-token\n")
    (tmp_path / "ca.crt").write_text(certs.CERTIFICATE)
    (tmp_path / "namespace").write_text("karpy")
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.skip("needs unshare(1) for a private mount namespace")
    mount = textwrap.dedent(
        f"""
        mount -t tmpfs none /var/run && mkdir -p {login.SERVICE_ACCOUNT} &&
        mount --bind {tmp_path} {login.SERVICE_ACCOUNT} && exec "$0" -c "$1"
        """
    )
    done = subprocess.run(
        [unshare, "--user", "--map-root-user", "--mount", "sh", "-c", mount, sys.executable, IN_POD],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode and "unshare" in done.stderr and "Operation not permitted" in done.stderr:
        pytest.skip(f"no unprivileged user namespaces here: {done.stderr.strip()}")
    assert done.returncode == 0, done.stderr
    server, authorization, namespace, cas = json.loads(done.stdout)
    # The service's address as client-go takes it (not the DNS name Kopf assumes), brackets for IPv6.
    assert (server, authorization, namespace) == ("https://[fd00::1]:443", "Bearer sa-token", "karpy")
    assert cas == [json.loads(json.dumps(certs.SUBJECT))]


async def test_karpy_run_logs_in_again_through_the_exec_plugin_when_its_token_is_refused(
    kube: runner.KubeAPIRunner, tmp_path: pathlib.Path, use_kubeconfig: Any
) -> None:
    # The kubeconfig `aws eks update-kubeconfig` writes; its first token expires while `karpy run` runs (the
    # server refuses it from then on): the next request logs in again, which runs the plugin again.
    environ = use_kubeconfig(exec_plugin.kubeconfig(kube.url, tmp_path, expires_in=datetime.timedelta(hours=1)))
    creds = login.login(environ)
    first = f"Bearer {exec_plugin.TOKEN_PREFIX}-1"
    assert creds.authorization == first

    async def refuse_the_first_token() -> None:
        kube.api[kmock.headers(Authorization=first)] << 401

    s = settings.Settings.from_env({"CLUSTER_NAME": "test"})
    stop = asyncio.Event()
    local = app.Endpoints(host="127.0.0.1", metrics_port=0, health_port=0)
    relogin = lambda: asyncio.to_thread(login.login, environ)  # noqa: E731 - what `main.main` passes
    task = asyncio.create_task(
        main.serve(s, creds, environ={}, relogin=relogin, cloud_factory=support.fake_cloud, stop=stop, endpoints=local)
    )
    try:
        await polling.until(lambda: any(r.url.path.endswith("/leases") for r in list(kube.api)))
        await asyncio.to_thread(kube.call, refuse_the_first_token)

        def renewed() -> bool:
            """the Lease was renewed with the plugin's second token"""
            return any(
                r.headers.get("Authorization") == f"Bearer {exec_plugin.TOKEN_PREFIX}-2" and "leases" in r.url.path
                for r in list(kube.api)
            )

        await polling.until(renewed)
    finally:
        stop.set()
        await task
    assert (tmp_path / "runs").read_text() == "2"  # one login at start, one after the refusal
    sent = {r.headers.get("Authorization") for r in list(kube.api)}
    assert sent == {first, f"Bearer {exec_plugin.TOKEN_PREFIX}-2"}  # no request went without a plugin token
