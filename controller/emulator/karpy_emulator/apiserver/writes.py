"""The writes of `FakeKubeAPI` (create, patch, server-side apply, replace, delete, deletecollection) with the API
server's checks on each: name generation, NamespaceLifecycle, resourceVersion preconditions, defaulting and
admission, strict field validation, managed fields, dry runs, finalizers and foreground deletion.

`Writes` is a mixin of `server.FakeKubeAPI`: it reads the server's state through the attributes declared below, which
the server defines; the routing, reads and watches stay in `server`.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Callable, Mapping
from typing import Any, Final

import kmock

from karpy_emulator.apiserver import (
    api_status,
    apply,
    fields,
    managers,
    namespaces,
    objects,
    patches,
    protobuf,
    scale,
    selectors,
    store,
    validation,
    watching,
)

_PATCH_TYPES: Final = {
    "application/json-patch+json": "json",
    "application/merge-patch+json": "merge",
    "application/strategic-merge-patch+json": "strategic",
}
Key = store.Key
FOREGROUND_DELETION: Final = "foregroundDeletion"
GENERATE_NAME_ATTEMPTS: Final = 8
"""Names drawn for one `generateName` create before AlreadyExists (apiserver registry/store.go's
maxNameGenerationCreateAttempts)."""


class Writes:
    """Writes of the emulated API server; a mixin of `server.FakeKubeAPI`, which defines these attributes."""

    clock: Callable[[], float]
    validators: Mapping[str, validation.Validator]
    defaulters: Mapping[str, validation.Defaulter]
    namespace_lifecycle: bool
    field_managers: bool
    _db: store.Store
    _lock: asyncio.Lock
    _rng: random.Random

    def _namespaced_resources(self) -> list[kmock.resource]:
        raise NotImplementedError  # the server's: what it declares

    # -- the request ------------------------------------------------------------------------------------------------

    @staticmethod
    def _body(request: kmock.Request) -> dict[str, Any]:
        if request.headers.get("Content-Type", "").startswith(protobuf.CONTENT_TYPE):
            return protobuf.decode(request.body)
        if not isinstance(request.data, dict):
            raise api_status.bad_request("the request body must be a JSON object")
        return request.data

    @staticmethod
    def _key(request: kmock.Request, kind: objects.Kind, name: str | None = None) -> Key:
        assert request.resource is not None
        return (request.resource, request.namespace if kind.namespaced else None, name or str(request.name))

    @staticmethod
    def _filter(request: kmock.Request) -> watching.Filter:
        try:
            labels = selectors.parse_labels(request.params.get("labelSelector", ""))
            fields = selectors.parse_fields(request.params.get("fieldSelector", ""))
        except selectors.SelectorError as error:
            raise api_status.bad_request(str(error)) from error
        return watching.Filter(namespace=request.namespace, name=request.name, labels=labels, fields=fields)

    # -- admission ----------------------------------------------------------------------------------------------

    def _default(self, kind: objects.Kind, obj: dict[str, Any]) -> dict[str, Any]:
        defaulter = self.defaulters.get(f"{kind.api_version}/{kind.plural}")
        return obj if defaulter is None else defaulter(obj)

    def _validate(self, kind: objects.Kind, obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> None:
        validator = self.validators.get(f"{kind.api_version}/{kind.plural}")
        if validator is None:
            return
        causes = list(validator(obj, old))
        if causes:
            raise api_status.invalid(kind.kind, kind.group, str(objects.metadata(obj).get("name", "")), causes)

    # -- writes -------------------------------------------------------------------------------------------------

    async def _create(self, request: kmock.Request, kind: objects.Kind) -> bytes:
        assert request.resource is not None
        body = self._body(request)
        meta = objects.metadata(body)
        if kind.namespaced and meta.get("namespace") not in (None, "", request.namespace):
            raise api_status.bad_request(
                "the namespace of the provided object does not match the namespace sent on the request"
            )
        async with self._lock:
            name = str(meta.get("name") or "")
            if not name and meta.get("generateName"):
                name = self._generated_name(request, kind, str(meta["generateName"]))
            if not name:
                cause = api_status.Cause("metadata.name", "Required value: name or generateName is required")
                raise api_status.invalid(kind.kind, kind.group, "", [cause])
            key = self._key(request, kind, name)
            if self._db.live(key) is not None:
                raise api_status.already_exists(kind.plural, kind.group, name)
            if kind.namespaced:
                namespaces.admit(self._db, key[1], strict=self.namespace_lifecycle)
            if self.field_managers:
                body = self._managed(request, kind, None, objects.clone(body))
            obj = await self._store_new(
                kind, key, body, dry_run="dryRun" in request.params, directive=request.params.get("fieldValidation")
            )
        return self._db.encoded_as(key, obj)

    def _managed(
        self, request: kmock.Request, kind: objects.Kind, old: Mapping[str, Any] | None, new: dict[str, Any]
    ) -> dict[str, Any]:
        """`new` with the request's writer recorded as a manager of the fields it set (see `managers`)."""
        return managers.updated(
            old,
            new,
            manager=managers.manager_of(request.params, request.headers),
            api_version=kind.api_version,
            subresource=request.subresource,
            now=objects.timestamp(self.clock()),
        )

    async def _store_new(
        self,
        kind: objects.Kind,
        key: Key,
        body: Mapping[str, Any],
        *,
        dry_run: bool = False,
        directive: str | None = None,
    ) -> dict[str, Any]:
        """Stamp, default, admit and (unless `dry_run`) store a new object; under the lock."""
        obj = objects.created(
            body,
            kind,
            namespace=key[1],
            name=key[2],
            uid=objects.new_uid(self._rng),
            resource_version=self._db.resource_version + 1,
            now=self.clock(),
        )
        if key[0] == namespaces.NAMESPACES:
            obj = namespaces.defaulted(obj)
        obj = self._default(kind, obj)
        fields.check(obj, kind, directive)
        self._validate(kind, obj, None)
        if not dry_run:
            await self._db.add(key, obj)
        return obj

    def _generated_name(self, request: kmock.Request, kind: objects.Kind, prefix: str) -> str:
        """A name from `generateName` that no live object has: a taken one is drawn again, up to
        `GENERATE_NAME_ATTEMPTS` names, as the API server does since Kubernetes 1.31 (RetryGenerateName); five random
        characters collide a few times among 10,000 pods of one ReplicaSet. The last draw is kept (AlreadyExists)."""
        name = ""
        for _ in range(GENERATE_NAME_ATTEMPTS):
            name = objects.generate_name(prefix, self._rng)
            if self._db.live(self._key(request, kind, name)) is None:
                break
        return name

    async def _patch(self, request: kmock.Request, kind: objects.Kind) -> bytes:
        content_type = request.headers.get("Content-Type", "").split(";")[0].strip()
        if content_type == apply.CONTENT_TYPE and request.subresource is None:
            return await self._apply(request, kind)
        patch_type = _PATCH_TYPES.get(content_type)
        if patch_type is None or (patch_type == "strategic" and kind.custom):
            raise api_status.unsupported_media_type(content_type)
        async with self._lock:
            key = self._key(request, kind)
            old = self._db.live(key)
            if old is None:
                raise api_status.not_found(kind.plural, kind.group, key[2])
            target = scale.of(old) if request.subresource == "scale" else old
            try:
                match patch_type:
                    case "json":
                        new = patches.json_patch(target, request.data)
                    case "merge":
                        new = patches.merge_patch(target, self._body(request))
                    case _:
                        new = patches.strategic_merge_patch(target, self._body(request))
            except patches.PatchError as error:
                raise api_status.ApiError(422, "Invalid", f"the patch could not be applied: {error}") from error
            if not isinstance(new, dict):
                raise api_status.ApiError(422, "Invalid", "the patch must leave an object")
            if patch_type != "json":
                self._check_version(kind, old, objects.metadata(self._body(request)).get("resourceVersion"))
            if request.subresource == "scale":
                return self._scaled(await self._write(request, kind, key, old, scale.applied(old, new)))
            return await self._write(request, kind, key, old, new)

    async def _apply(self, request: kmock.Request, kind: objects.Kind) -> bytes:
        manager = request.params.get("fieldManager")
        if not manager:
            raise api_status.bad_request("PATCH requests with the apply patch type require a fieldManager")
        config = apply.configuration(request.body)
        if objects.metadata(config).get("name") not in (None, request.name):
            raise api_status.bad_request("the name of the object does not match the name on the URL")
        async with self._lock:
            key = self._key(request, kind)
            old = self._db.live(key)
            new = apply.applied(
                old,
                config,
                kind,
                manager=manager,
                force=request.params.get("force") == "true",
                now=objects.timestamp(self.clock()),
            )
            if old is not None:
                return await self._write(request, kind, key, old, new)
            if kind.namespaced:
                namespaces.admit(self._db, key[1], strict=self.namespace_lifecycle)
            obj = await self._store_new(
                kind, key, new, dry_run="dryRun" in request.params, directive=request.params.get("fieldValidation")
            )
        return self._db.encoded_as(key, obj)

    async def _replace(self, request: kmock.Request, kind: objects.Kind) -> bytes:
        body = self._body(request)
        if objects.metadata(body).get("name") not in (None, request.name):
            raise api_status.bad_request("the name of the object does not match the name on the URL")
        async with self._lock:
            key = self._key(request, kind)
            old = self._db.live(key)
            if old is None:
                raise api_status.not_found(kind.plural, kind.group, key[2])
            version = objects.metadata(body).get("resourceVersion")
            if not version and kind.custom:
                cause = api_status.Cause(
                    "metadata.resourceVersion", "Invalid value: 0x0: must be specified for an update"
                )
                raise api_status.invalid(kind.kind, kind.group, key[2], [cause])
            self._check_version(kind, old, version)
            if request.subresource == "scale":
                return self._scaled(await self._write(request, kind, key, old, scale.applied(old, body)))
            return await self._write(request, kind, key, old, body)

    @staticmethod
    def _scaled(encoded: bytes) -> bytes:
        """The stored object's JSON as its Scale's JSON."""
        return watching.encode(scale.of(json.loads(encoded)))

    def _check_version(self, kind: objects.Kind, old: Mapping[str, Any], version: Any) -> None:
        if version and str(version) != objects.metadata(old).get("resourceVersion"):
            raise api_status.conflict(kind.plural, kind.group, str(objects.metadata(old).get("name")), api_status.STALE)

    async def _write(
        self, request: kmock.Request, kind: objects.Kind, key: Key, old: dict[str, Any], new: Mapping[str, Any]
    ) -> bytes:
        """Store an update computed under the lock (deletes the object when its last finalizer went away); the
        object after it as JSON."""
        scope = objects.Scope.STATUS if request.subresource == "status" else objects.Scope.MAIN
        result = objects.updated(old, new, kind, scope=scope, resource_version=self._db.resource_version + 1)
        if result is None:
            return self._db.encoded_live(key)
        result = self._default(kind, result)
        if self.field_managers and request.headers.get("Content-Type", "").split(";")[0].strip() != apply.CONTENT_TYPE:
            result = self._managed(request, kind, old, result)
        fields.check(result, kind, request.params.get("fieldValidation"))
        self._validate(kind, result, old)
        if "dryRun" in request.params:
            return watching.encode(result)
        stored = await self._db.update(key, old, result, held=key[0] == namespaces.NAMESPACES)
        if kind.namespaced and key[1]:
            await self._settle_namespace(key[1])
        return self._db.encoded_as(key, stored)

    async def _settle_namespace(self, name: str) -> None:
        """A write in a terminating namespace may have removed its last object (under the lock)."""
        if namespaces.is_terminating(self._db.live(namespaces.key(name))):
            await namespaces.settle(self._db, name, namespaced=self._namespaced_resources())

    async def _delete(self, request: kmock.Request, kind: objects.Kind) -> Any:
        options = request.data if isinstance(request.data, dict) else {}
        preconditions = options.get("preconditions") or {}
        policy = options.get("propagationPolicy") or request.params.get("propagationPolicy")
        async with self._lock:
            key = self._key(request, kind)
            old = self._db.live(key)
            if old is None:
                raise api_status.not_found(kind.plural, kind.group, key[2])
            meta = objects.metadata(old)
            if policy == "Foreground" and FOREGROUND_DELETION not in (meta.get("finalizers") or ()):
                # The API server holds the owner until the garbage collector has deleted the dependents that
                # block it (karpy_emulator.garbage), as apiserver's BeforeDelete does with this finalizer.
                held = objects.with_metadata(
                    old,
                    finalizers=[*(meta.get("finalizers") or ()), FOREGROUND_DELETION],
                    resourceVersion=str(self._db.resource_version + 1),
                )
                old = await self._db.update(key, old, held)
                meta = objects.metadata(old)
            for field, precondition in (("uid", "uid"), ("resourceVersion", "resourceVersion")):
                expected = preconditions.get(precondition)
                if expected and expected != meta.get(field):
                    actual = meta.get(field)
                    why = f"Precondition failed: {field} in precondition: {expected}, {field} in object meta: {actual}"
                    raise api_status.conflict(kind.plural, kind.group, key[2], why)
            if key[0] == namespaces.NAMESPACES:
                result, gone = await namespaces.delete(
                    self._db, old, namespaced=self._namespaced_resources(), now=self.clock()
                )
            else:
                result, gone = await self._db.delete(key, old)
                if gone and key[1]:
                    await self._settle_namespace(key[1])
        if gone and not (kind.plural == "pods" and kind.group == ""):
            return api_status.success(
                details={"name": key[2], "group": kind.group, "kind": kind.plural, "uid": meta.get("uid")}
            )
        return result

    async def _delete_collection(self, request: kmock.Request, kind: objects.Kind) -> dict[str, Any]:
        assert request.resource is not None
        watch = self._filter(request)
        async with self._lock:
            doomed = [obj for obj in self._db.live_objects(request.resource, request.namespace) if watch.matches(obj)]
            items = []
            for obj in doomed:
                meta = objects.metadata(obj)
                key = (request.resource, meta.get("namespace") if kind.namespaced else None, str(meta.get("name")))
                items.append((await self._db.delete(key, obj))[0])
        meta_list = {"resourceVersion": str(self._db.resource_version)}
        return {"apiVersion": kind.api_version, "kind": f"{kind.kind}List", "metadata": meta_list, "items": items}
