"""to_manifest inverts parse; drift hashes are stable and see exactly the hashed fields; garbage never escapes as
anything but ValidationError."""

from __future__ import annotations

import copy
import dataclasses
import pathlib
from typing import Any

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from tests import builders, hypothesis_profiles, json_strategies

from karpy.api import errors, hashing, manifest, nodepool, parse

EXAMPLES = sorted((pathlib.Path(__file__).resolve().parents[2] / "examples" / "nodepools").glob("*.yaml"))


def test_round_trip_on_every_example_and_nodeclaim() -> None:
    objects: list[Any] = [parse.any(d) for p in EXAMPLES for d in yaml.safe_load_all(p.read_text()) if d]
    claim = builders.nodeclaim(
        "default-abcde",
        spec=dict(
            resources={"requests": {"cpu": "1500m", "memory": "2Gi"}},
            taints=[{"key": "a", "effect": "NoSchedule", "value": "b"}],
            terminationGracePeriod="1h",
        ),
    )
    objects.append(parse.nodeclaim(claim))
    for obj in objects:
        assert parse.any(manifest.to_manifest(obj)) == obj


def test_nodepool_hash_ignores_behavioural_fields_and_requirements() -> None:
    base = builders.parsed_nodepool()
    reference = hashing.nodepool_hash(base)
    assert hashing.nodepool_hash(dataclasses.replace(base, weight=10)) == reference
    assert hashing.nodepool_hash(dataclasses.replace(base, limits={"cpu": 1000})) == reference
    assert hashing.nodepool_hash(dataclasses.replace(base, disruption=nodepool.Disruption(consolidate_after=None))) == (
        reference
    )
    assert hashing.nodepool_hash(builders.parsed_nodepool(requirements=[])) == reference
    assert hashing.nodepool_hash(builders.parsed_nodepool(template_spec={"expireAfter": "1h"})) != reference
    assert hashing.nodepool_hash(builders.parsed_nodepool(labels={"a": "b"})) != reference
    assert hashing.nodepool_hash(builders.parsed_nodepool(taints=[{"key": "a", "effect": "NoSchedule"}])) != reference


def test_nodepool_hash_is_order_independent() -> None:
    t1, t2 = {"key": "a", "effect": "NoSchedule"}, {"key": "b", "effect": "NoExecute"}
    assert hashing.nodepool_hash(builders.parsed_nodepool(taints=[t1, t2])) == hashing.nodepool_hash(
        builders.parsed_nodepool(taints=[t2, t1])
    )
    assert hashing.nodepool_hash(builders.parsed_nodepool(labels={"a": "1", "b": "2"})) == hashing.nodepool_hash(
        builders.parsed_nodepool(labels={"b": "2", "a": "1"})
    )
    assert hashing.nodepool_hash(builders.parsed_nodepool()) == hashing.nodepool_hash(builders.parsed_nodepool())


def test_ec2nodeclass_hash_ignores_selectors_but_not_launch_fields() -> None:
    base = parse.ec2nodeclass(builders.ec2nodeclass())
    reference = hashing.ec2nodeclass_hash(base)
    other_subnets = builders.ec2nodeclass(subnetSelectorTerms=[{"id": "subnet-123"}])
    assert hashing.ec2nodeclass_hash(parse.ec2nodeclass(other_subnets)) == reference
    # amiFamily resolved from the alias: writing it explicitly is no drift
    explicit = builders.ec2nodeclass(amiFamily="AL2023")
    assert hashing.ec2nodeclass_hash(parse.ec2nodeclass(explicit)) == reference
    assert hashing.ec2nodeclass_hash(parse.ec2nodeclass(builders.ec2nodeclass(userData="x"))) != reference
    tagged = builders.ec2nodeclass(tags={"team": "a"})
    assert hashing.ec2nodeclass_hash(parse.ec2nodeclass(tagged)) != reference


_JSON = json_strategies.trees(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8), keys=st.text(max_size=6)
)


def _mutations(base: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    """Replace one value somewhere in a valid manifest with garbage."""
    paths: list[tuple[Any, ...]] = []

    def walk(node: Any, path: tuple[Any, ...]) -> None:
        paths.append(path)
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, (*path, k))
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, (*path, i))

    walk(base, ())

    def apply(path: tuple[Any, ...], value: Any) -> dict[str, Any]:
        result = copy.deepcopy(base)
        if not path:
            return {"kind": base["kind"], "apiVersion": base["apiVersion"], "spec": value}
        node: Any = result
        for step in path[:-1]:
            node = node[step]
        node[path[-1]] = value
        return result

    return st.builds(apply, st.sampled_from(paths), _JSON)


def _only_validation_errors(obj: Any) -> None:
    problems: tuple[errors.Problem, ...] = ()
    try:
        parse.any(obj)
    except errors.ValidationError as exc:
        problems = exc.problems
        assert problems, "a ValidationError must carry at least one problem"


@settings(max_examples=hypothesis_profiles.examples(150), deadline=None)
@given(_JSON)
def test_random_values_only_raise_validation_error(obj: Any) -> None:
    _only_validation_errors(obj)


@settings(max_examples=hypothesis_profiles.examples(150), deadline=None)
@given(
    st.sampled_from([builders.nodepool(), builders.nodeclaim("default-abcde"), builders.ec2nodeclass()]).flatmap(
        _mutations
    )
)
def test_mutated_manifests_only_raise_validation_error(obj: dict[str, Any]) -> None:
    _only_validation_errors(obj)
