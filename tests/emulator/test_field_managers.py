"""`managers`: the Update entries of writers that do not apply, after structured-merge-diff's update rules
(merge/update.go, `Updater.Update`; cases after merge/multiple_appliers_test.go and fieldmanager_test.go's
TestUpdateOwnership... in the upstream trees): an update owns what it added or changed, takes changed fields from the
other managers, and every manager loses a removed field."""

from __future__ import annotations

from typing import Any

import pytest

from karpy_emulator.apiserver import managers

NOW = "2023-11-14T22:13:20Z"


def _write(old: dict[str, Any] | None, new: dict[str, Any], manager: str) -> dict[str, Any]:
    return managers.updated(old, new, manager=manager, api_version="v1", subresource=None, now=NOW)


def _owners(obj: dict[str, Any]) -> dict[str, Any]:
    return {entry["manager"]: entry["fieldsV1"] for entry in obj["metadata"]["managedFields"]}


@pytest.mark.parametrize(
    ("params", "agent", "manager"),
    [
        ({"fieldManager": "kubectl-edit"}, "kubectl/v1.37.1 (linux/amd64)", "kubectl-edit"),
        ({}, "kubectl/v1.37.1 (linux/amd64) kubernetes/abc", "kubectl"),
        ({}, "Go-http-client/1.1", "Go-http-client"),
        ({}, "", "unknown"),
    ],
)
def test_the_manager_is_the_field_manager_else_the_user_agent(params: dict[str, str], agent: str, manager: str) -> None:
    assert managers.manager_of(params, {"User-Agent": agent} if agent else {}) == manager


def test_an_update_takes_changed_fields_and_removal_frees_them() -> None:
    created = _write(None, {"metadata": {"name": "a", "uid": "u"}, "data": {"x": "1", "y": "2"}}, "creator")
    assert _owners(created) == {"creator": {"f:data": {"f:x": {}, "f:y": {}}}}  # server metadata is nobody's
    changed = _write(created, {**created, "data": {"x": "9", "y": "2", "z": "3"}}, "editor")
    assert _owners(changed) == {"creator": {"f:data": {"f:y": {}}}, "editor": {"f:data": {"f:x": {}, "f:z": {}}}}
    removed = _write(changed, {**changed, "data": {"x": "9"}}, "pruner")
    assert _owners(removed) == {"editor": {"f:data": {"f:x": {}}}}  # an update that changes nothing owns nothing


def test_a_status_write_is_its_own_entry() -> None:
    created = _write(None, {"metadata": {"name": "a"}, "spec": {"x": 1}}, "creator")
    status = managers.updated(
        created, {**created, "status": {"ready": True}}, manager="creator", api_version="v1", subresource="status",
        now=NOW,
    )  # fmt: skip
    entries = status["metadata"]["managedFields"]
    assert [(entry["manager"], entry.get("subresource")) for entry in entries] == [
        ("creator", None),
        ("creator", "status"),
    ]
