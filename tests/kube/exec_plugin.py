"""A kubeconfig whose user is an `exec` credential plugin, as `aws eks update-kubeconfig` writes one: here a small
Python script that prints an ExecCredential (client.authentication.k8s.io) whose token counts its runs."""

from __future__ import annotations

import datetime
import pathlib
import sys

import yaml

TOKEN_PREFIX = "from-plugin"
PLUGIN = """\
import json, os, pathlib, sys
count = pathlib.Path(sys.argv[1])
runs = int(count.read_text()) + 1 if count.exists() else 1
count.write_text(str(runs))
info = json.loads(os.environ["KUBERNETES_EXEC_INFO"])
print(json.dumps({
    "apiVersion": info["apiVersion"],
    "kind": "ExecCredential",
    "status": {"token": f"{os.environ['TOKEN_PREFIX']}-{runs}", "expirationTimestamp": sys.argv[2]},
}))
"""
USER = "arn:aws:eks:eu-west-1:111122223333:cluster/demo"


def kubeconfig(server: str, directory: pathlib.Path, *, expires_in: datetime.timedelta) -> pathlib.Path:
    """Write the plugin and a kubeconfig using it for `server` into `directory`; each token the plugin prints is
    valid for `expires_in` from when this is called, and `directory / "runs"` counts its runs."""
    script = directory / "plugin.py"
    script.write_text(PLUGIN)
    expiry = (datetime.datetime.now(datetime.UTC) + expires_in).strftime("%Y-%m-%dT%H:%M:%SZ")
    plugin = {
        "apiVersion": "client.authentication.k8s.io/v1beta1",
        "command": sys.executable,
        "args": [str(script), str(directory / "runs"), expiry],
        "env": [{"name": "TOKEN_PREFIX", "value": TOKEN_PREFIX}],
        "interactiveMode": "Never",
    }
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "emulated", "cluster": {"server": server}}],
        "users": [{"name": USER, "user": {"exec": plugin}}],
        "contexts": [{"name": "demo", "context": {"cluster": "emulated", "user": USER}}],
        "current-context": "demo",
    }
    path = directory / "kubeconfig"
    path.write_text(yaml.safe_dump(doc))
    return path
