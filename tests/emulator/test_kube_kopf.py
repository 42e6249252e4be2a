"""One Kopf smoke test on FakeKubeAPI: a NodeClaim handler that needs Kopf's finalizer runs on create and delete.

Kopf adds its finalizer with a JSON patch guarded by a `test` of metadata.resourceVersion; raw kmock has no
resourceVersion, so that patch failed forever and delete handlers never ran.
"""

from __future__ import annotations

import pathlib

import kopf.testing
import kubernetes
from tests import builders, polling

from karpy_emulator.apiserver import runner

OPERATOR = """
import kopf


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_):
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage()
    settings.posting.enabled = False
    settings.watching.server_timeout = 10


@kopf.on.create("karpenter.sh", "v1", "nodeclaims")
def launch(patch, **_):
    patch.metadata.setdefault("labels", {})["smoke/launched"] = "true"


@kopf.on.delete("karpenter.sh", "v1", "nodeclaims")
def terminate(name, **_):
    print(f"terminated {name}")
"""

KOPF_FINALIZER = "kopf.zalando.org/KopfFinalizerMarker"


def test_kopf_handler_with_finalizer_runs_on_create_and_delete(
    kube: runner.KubeAPIRunner, custom: kubernetes.client.CustomObjectsApi, tmp_path: pathlib.Path
) -> None:
    operator = tmp_path / "operator.py"
    operator.write_text(OPERATOR)
    group, version, plural = "karpenter.sh", "v1", "nodeclaims"

    def nodeclaim() -> dict[str, object]:
        result: dict[str, object] = custom.get_cluster_custom_object(group, version, plural, "nc-1")
        return result

    def launched() -> bool:
        """Kopf's finalizer is on and the create handler labelled the NodeClaim"""
        meta = nodeclaim()["metadata"]
        assert isinstance(meta, dict)
        return KOPF_FINALIZER in meta.get("finalizers", ()) and meta.get("labels", {}).get("smoke/launched") == "true"

    def gone() -> bool:
        """the delete handler ran and Kopf released its finalizer"""
        try:
            nodeclaim()
        except kubernetes.client.ApiException as error:
            return error.status == 404
        return False

    args = ["run", "--standalone", "--all-namespaces", str(operator)]
    with kopf.testing.KopfRunner(args, timeout=30) as operator_run:
        custom.create_cluster_custom_object(group, version, plural, builders.nodeclaim("nc-1"))
        polling.until_sync(launched)
        custom.delete_cluster_custom_object(group, version, plural, "nc-1")
        polling.until_sync(gone)
    assert operator_run.exception is None
    assert operator_run.exit_code == 0
    assert "Handler 'terminate' succeeded" in operator_run.output
