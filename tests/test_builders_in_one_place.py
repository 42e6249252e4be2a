"""Builders of Kubernetes and karpy objects live in `tests/builders.py`: a test module that needs another shape passes
parameters to them (or binds some with `functools.partial`) instead of defining its own `pod()`, `node()`, ... so one
fix to an object's shape reaches every test."""

from __future__ import annotations

import ast
import pathlib

TESTS = pathlib.Path(__file__).parent
SHARED = TESTS / "builders.py"

# The objects a builder's name may say it builds, and the spellings that decorate such a name.
KINDS = frozenset(
    {
        "claim",
        "daemonset",
        "deployment",
        "ec2nodeclass",
        "existing_node",
        "node",
        "nodeclaim",
        "nodeclass",
        "nodepool",
        "pdb",
        "pod",
        "pool",
        "pv",
        "pvc",
        "state_node",
        "storage_class",
    }
)
PREFIXES = ("make_", "build_", "parsed_", "new_")
SUFFIXES = ("_dict", "_manifest", "_body", "_obj")

# Local builders that build something the shared ones do not, with the reason. Keep this short.
_DEMO = "the demo's own manifest (karpy_emulator.demo) with e2e knobs: e2e runs what `make demo` applies"
_UPSTREAM = "what upstream Karpenter leaves in a cluster, rebuilt from a PoolSpec and a moto instance (adoption)"
_YAML = "YAML text for `karpy simulate` input files (the text and its line numbers are the point), not an object"
DIFFERENT = {
    "e2e/support.py::pool": _DEMO,
    "e2e/support.py::deployment": _DEMO,
    "e2e/upstream_cluster.py::nodeclass_manifest": _UPSTREAM,
    "e2e/upstream_cluster.py::nodepool_manifest": _UPSTREAM,
    "e2e/upstream_cluster.py::nodeclaim_manifest": _UPSTREAM,
    "simulate/builders.py::pod_manifest": _YAML,
    "simulate/builders.py::pool_manifest": _YAML,
    "simulate/test_strict.py::pod": _YAML,
    "simulate/test_strict.py::deployment": _YAML,
    "simulate/test_capacity_buffers.py::_deployment": _YAML,
    "capacitybuffer/test_provisioning.py::_claim": "a scheduler plan (results.PlannedNodeClaim) holding given pods,"
    " what a provisioning pass hands the buffers; no NodeClaim object",
    "api/test_examples_and_crds.py::_pool": "returns the NodePool an example file declares; builds none",
    "disruption/test_rules.py::_node": "the StateNode the real state cache made of a World's objects",
    "nodeclaim/test_controller.py::_claim": "reads and parses the NodeClaim the controller stored; builds nothing",
    "scheduling/test_podtemplates.py::_pod": "one maximal Deployment pod carrying every part the scheduler reads, so a"
    " part the template cache does not carry over shows; a fixture, not a builder",
}
ALLOWED = DIFFERENT


def builds(name: str) -> str | None:
    """The kind a top-level function's name says it builds, or None."""
    stem = name.lstrip("_")
    for prefix in PREFIXES:
        stem = stem.removeprefix(prefix)
    for suffix in SUFFIXES:
        stem = stem.removesuffix(suffix)
    return stem if stem in KINDS else None


def local_builders(source: str) -> list[str]:
    """Names of the top-level (sync) functions in `source` that build an object of a known kind."""
    tree = ast.parse(source)
    return [node.name for node in tree.body if isinstance(node, ast.FunctionDef) and builds(node.name)]


def test_builders_are_recognised_by_name() -> None:
    source = (
        "def pod(): ...\n"
        "def _node(): ...\n"
        "def make_nodepool(): ...\n"
        "def parsed_nodeclaim(): ...\n"
        "def claim_dict(): ...\n"
        "def pool_manifest(): ...\n"
        "def _existing_node(): ...\n"
        "async def nodes(): ...\n"  # an async read of the API server, not a builder
        "def node_zone(): ...\n"
        "def test_pod(): ...\n"
        "class Pods:\n    def pod(self): ...\n"
    )
    assert local_builders(source) == [
        "pod",
        "_node",
        "make_nodepool",
        "parsed_nodeclaim",
        "claim_dict",
        "pool_manifest",
        "_existing_node",
    ]


def test_no_test_module_defines_its_own_object_builder() -> None:
    found = {
        f"{path.relative_to(TESTS).as_posix()}::{name}"
        for path in sorted(TESTS.rglob("*.py"))
        if path != SHARED
        for name in local_builders(path.read_text(encoding="utf-8"))
    }
    assert sorted(found - ALLOWED.keys()) == [], "add parameters to tests/builders.py instead"
    assert sorted(ALLOWED.keys() - found) == [], "an allowed builder is gone: drop it from ALLOWED"
