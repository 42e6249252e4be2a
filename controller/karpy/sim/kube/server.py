"""`FakeKubeAPI`: kmock 0.8's `KubernetesEmulator` made to behave like a real API server for real clients.

kmock routes every request through its reaction DSL; this class adds one fallback reaction, one step above
kmock's own object fallbacks and below anything a test declares, that serves every resource request itself
(list, watch, get, create, patch, replace, delete, deletecollection, eviction, binding). A test can therefore still
inject a failure with `api['post', api.resource('karpenter.sh/v1/nodeclaims')] << 500`: an intercepted write is not
stored. Objects live in kmock's own store (`api.objects[...]`), so kmock's assertions keep working.
"""

from __future__ import annotations

import asyncio
import collections
import copy
import random
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp.web
import attrs
import kmock
from kmock._internal import rendering  # kmock 0.8 leaves Response out of __all__

from karpy.sim.kube import disruption, objects, patches, resources, selectors, status, validation, watching

_JSON = {"Content-Type": "application/json"}
_PATCH_TYPES = {
    "application/json-patch+json": "json",
    "application/merge-patch+json": "merge",
    "application/strategic-merge-patch+json": "strategic",
}
PODS = kmock.resource("v1/pods")
PDBS = kmock.resource("policy/v1/poddisruptionbudgets")
_SCALED_KINDS = {
    "ReplicaSet": kmock.resource("apps/v1/replicasets"),
    "Deployment": kmock.resource("apps/v1/deployments"),
    "StatefulSet": kmock.resource("apps/v1/statefulsets"),
    "ReplicationController": kmock.resource("v1/replicationcontrollers"),
}
Key = tuple[kmock.resource, str | None, str]


@dataclass(frozen=True, slots=True)
class Eviction:
    """One request to the Eviction API and the answer it got (201 evicted, 429 refused by a budget, ...)."""

    namespace: str
    name: str
    code: int
    at: float
    budgets: tuple[str, ...]

    @property
    def allowed(self) -> bool:
        return self.code == 201


def _ok(payload: Any, code: int = 200) -> rendering.Response:
    return rendering.Response(status=code, payload=payload, headers=_JSON)


@attrs.define(kw_only=True)
class FakeKubeAPI(kmock.KubernetesEmulator):
    """An in-memory Kubernetes API server; enter it (`async with`) and serve it (see `runner`)."""

    clock: Callable[[], float] = time.time
    """Epoch seconds for creationTimestamp/deletionTimestamp and the eviction log; inject a virtual clock."""
    validators: Mapping[str, validation.Validator] = attrs.field(factory=validation.karpenter)
    """Admission per `group/version/plural`: the causes of a 422 for the object about to be stored."""
    defaulters: Mapping[str, validation.Defaulter] = attrs.field(factory=validation.karpenter_defaults)
    """CRD defaulting per `group/version/plural`, applied before admission as the API server does."""
    watch_history: int = 10_000
    """Changes kept per resource for watches resuming from a resourceVersion; older ones answer 410 Expired."""
    seed: int | None = None
    """Seed of generated names and uids (None: random)."""
    object_history: int | None = None
    """Versions kept per object in `api.objects[...].history` (None: all, as kmock does); bound it for long runs."""
    request_history: int | None = None
    """Requests kept for kmock's request spy (None: all, as kmock does); bound it for long runs."""

    _resource_version: int = attrs.field(default=1, init=False)  # etcd starts an empty cluster at revision 1
    _changes: dict[kmock.resource, collections.deque[watching.Change]] = attrs.field(factory=dict, init=False)
    _compacted: dict[kmock.resource, int] = attrs.field(factory=dict, init=False)
    _rng: random.Random = attrs.field(factory=random.Random, init=False)
    _evictions: list[Eviction] = attrs.field(factory=list, init=False)
    _custom_groups: frozenset[str] = attrs.field(factory=resources.custom_groups, init=False)
    _closing: bool = attrs.field(default=False, init=False)

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        self._rng.seed(self.seed)
        resources.declare(self.resources)
        # One step above kmock's object fallbacks (which it shadows), below every reaction a test declares.
        (self.fallback**1)[self._is_object_request] << self._serve_object
        (self.fallback**1)[self._is_version_discovery] << self._serve_version  # also with a trailing slash

    # -- public, for tests and the other stand-ins ------------------------------------------------------------

    @property
    def evictions(self) -> tuple[Eviction, ...]:
        """Every eviction request answered so far, in order (proves budgets were honoured)."""
        return tuple(self._evictions)

    @property
    def resource_version(self) -> int:
        """The last resourceVersion handed out (a global counter, as etcd's revision)."""
        return self._resource_version

    def live(self, resource: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        """A copy of the stored object, or None when absent (for assertions; call on the server's loop)."""
        obj = self._live((kmock.resource(resource), namespace, name))
        return copy.deepcopy(obj) if obj is not None else None

    async def close_watches(self) -> None:
        """End every open watch stream, so that the server can stop without waiting for clients."""
        self._closing = True
        for bus in list(self._buses.values()):
            await bus.put(None)

    async def _handle(self, request: kmock.Request) -> aiohttp.web.StreamResponse:
        # Skips KubernetesEmulator._handle, which stores every write before routing (even refused or intercepted
        # ones); the writes happen in `_serve_object` instead, with the API server's checks.
        try:
            return await kmock.RawHandler._handle(self, request)
        finally:
            self._forget_old_requests()

    def _forget_old_requests(self) -> None:
        limit = self.request_history
        if limit is not None and len(self._requests) > 2 * limit:  # trimmed in batches: O(1) amortised
            del self._requests[:-limit]
            for reaction in self._payloads:
                del reaction._requests[:-limit]

    # -- discovery ----------------------------------------------------------------------------------------------

    async def _serve_version(self, request: kmock.Request) -> Any:
        assert request.resource is not None  # routed here by kmock only for /api/v1 and /apis/<group>/<version>
        group, version = request.resource.group or "", request.resource.version or ""
        entries = [(res, self.resources[res]) for res in self.resources if (res.group, res.version) == (group, version)]
        if not entries and group:
            raise kmock.KubernetesResourceNotFoundError()
        return resources.resource_list(group, version, entries)

    # -- routing ------------------------------------------------------------------------------------------------

    @staticmethod
    def _is_version_discovery(request: kmock.Request) -> bool:
        resource = request.resource
        return (
            request.method == "GET"
            and resource is not None
            and resource.version is not None
            and resource.plural is None
            and request.namespace is None
        )

    @staticmethod
    def _is_object_request(request: kmock.Request) -> bool:
        return request.resource is not None and request.resource.plural is not None

    async def _serve_object(self, request: kmock.Request) -> rendering.Response:
        try:
            return await self._route(request)
        except status.ApiError as error:
            return rendering.Response(status=error.code, payload=error.body(), headers=_JSON)

    async def _route(self, request: kmock.Request) -> rendering.Response:
        kind = self._kind(request)
        named = request.name is not None
        if named and kind.namespaced and request.namespace is None:
            raise status.resource_not_found(request.url.path)
        if not kind.namespaced and request.namespace is not None:
            raise status.resource_not_found(request.url.path)
        sub = request.subresource
        if request.action == kmock.action.WATCH:
            return self._watch_response(request, kind)
        match request.method, named, sub:
            case "GET", False, None:
                return _ok(self._list(request, kind))
            case "GET", True, None | "status":
                return _ok(self._fetch(request, kind))
            case "POST", False, None if kind.plural == "bindings" and kind.group == "":
                body = self._body(request)
                return _ok(await self._bind(request, str(objects.metadata(body).get("name", "")), body), 201)
            case "POST", False, None:
                return _ok(await self._create(request, kind), 201)
            case "POST", True, "eviction":
                return _ok(await self._evict(request, kind), 201)
            case "POST", True, "binding":
                return _ok(await self._bind(request, str(request.name), self._body(request)), 201)
            case "PATCH", True, None | "status":
                return _ok(await self._patch(request, kind))
            case "PUT", True, None | "status":
                return _ok(await self._replace(request, kind))
            case "DELETE", True, None:
                return _ok(await self._delete(request, kind))
            case "DELETE", False, None:
                return _ok(await self._delete_collection(request, kind))
        raise status.method_not_allowed(f"{request.method} is not supported on {request.url.path}")

    def _kind(self, request: kmock.Request) -> objects.Kind:
        resource = request.resource
        assert resource is not None  # see _is_object_request
        assert resource.plural is not None
        if resource not in self.resources:
            raise status.resource_not_found(request.url.path)
        info = self.resources[resource]
        group, version = resource.group or "", resource.version or ""
        if request.subresource not in (None, *info.subresources):
            raise status.resource_not_found(request.url.path)
        return objects.Kind(
            plural=resource.plural,
            group=group,
            api_version=f"{group}/{version}" if group else version,
            kind=info.kind or resource.plural.capitalize(),
            namespaced=bool(info.namespaced),
            status_subresource="status" in info.subresources,
            custom=group in self._custom_groups,
        )

    @staticmethod
    def _body(request: kmock.Request) -> dict[str, Any]:
        if not isinstance(request.data, dict):
            raise status.bad_request("the request body must be a JSON object")
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
            raise status.bad_request(str(error)) from error
        return watching.Filter(namespace=request.namespace, name=request.name, labels=labels, fields=fields)

    # -- the store ----------------------------------------------------------------------------------------------

    def _live(self, key: Key) -> dict[str, Any] | None:
        if key not in self._objects:
            return None
        stored = self._objects[key]
        return None if stored.deleted else stored.last.raw

    def _live_objects(self, resource: kmock.resource, namespace: str | None = None) -> Iterator[dict[str, Any]]:
        for (res, ns, _), stored in self._objects.items():
            if res == resource and not stored.deleted and (namespace is None or ns == namespace):
                yield stored.last.raw

    def _store(self, key: Key, obj: dict[str, Any]) -> None:
        if key not in self._objects:
            self._objects[key] = obj
            return
        history = self._objects[key].history
        history.append(obj)
        if self.object_history is not None and len(history) > self.object_history:
            del history[: len(history) - self.object_history]

    async def _publish(self, resource: kmock.resource, change: watching.Change) -> None:
        changes = self._changes.setdefault(resource, collections.deque(maxlen=self.watch_history))
        if len(changes) == changes.maxlen:
            self._compacted[resource] = changes[0].resource_version
        changes.append(change)
        await self._buses[resource].put(change)

    def _next_version(self) -> int:
        self._resource_version += 1
        return self._resource_version

    def _default(self, kind: objects.Kind, obj: dict[str, Any]) -> dict[str, Any]:
        defaulter = self.defaulters.get(f"{kind.api_version}/{kind.plural}")
        return obj if defaulter is None else defaulter(obj)

    def _validate(self, kind: objects.Kind, obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> None:
        validator = self.validators.get(f"{kind.api_version}/{kind.plural}")
        if validator is None:
            return
        causes = list(validator(obj, old))
        if causes:
            raise status.invalid(kind.kind, kind.group, str(objects.metadata(obj).get("name", "")), causes)

    # -- reads --------------------------------------------------------------------------------------------------

    def _fetch(self, request: kmock.Request, kind: objects.Kind) -> dict[str, Any]:
        obj = self._live(self._key(request, kind))
        if obj is None:
            raise status.not_found(kind.plural, kind.group, str(request.name))
        return obj

    def _list(self, request: kmock.Request, kind: objects.Kind) -> dict[str, Any]:
        assert request.resource is not None
        watch = self._filter(request)
        items = [obj for obj in self._live_objects(request.resource, request.namespace) if watch.matches(obj)]
        items.sort(key=lambda obj: (objects.metadata(obj).get("namespace", ""), objects.metadata(obj).get("name", "")))
        meta: dict[str, Any] = {"resourceVersion": str(self._resource_version)}
        start = int(request.params.get("continue") or 0)
        limit = int(request.params.get("limit") or 0)
        if start:
            items = items[start:]
        if limit and len(items) > limit:
            items = items[:limit]
            meta["continue"] = str(start + limit)
        return {"apiVersion": kind.api_version, "kind": f"{kind.kind}List", "metadata": meta, "items": items}

    # -- writes -------------------------------------------------------------------------------------------------

    async def _create(self, request: kmock.Request, kind: objects.Kind) -> dict[str, Any]:
        assert request.resource is not None
        body = self._body(request)
        meta = objects.metadata(body)
        if kind.namespaced and meta.get("namespace") not in (None, "", request.namespace):
            raise status.bad_request(
                "the namespace of the provided object does not match the namespace sent on the request"
            )
        async with self._lock:
            name = str(meta.get("name") or "")
            if not name and meta.get("generateName"):
                name = objects.generate_name(str(meta["generateName"]), self._rng)
            if not name:
                cause = status.Cause("metadata.name", "Required value: name or generateName is required")
                raise status.invalid(kind.kind, kind.group, "", [cause])
            key = self._key(request, kind, name)
            if self._live(key) is not None:
                raise status.already_exists(kind.plural, kind.group, name)
            uid = objects.new_uid(self._rng)
            now = self.clock()
            obj = objects.created(
                body, kind, namespace=key[1], name=name, uid=uid, resource_version=self._resource_version + 1, now=now
            )
            obj = self._default(kind, obj)
            self._validate(kind, obj, None)
            if "dryRun" in request.params:
                return obj
            self._next_version()
            self._store(key, obj)
            await self._publish(
                request.resource, watching.Change(watching.EventType.ADDED, self._resource_version, obj)
            )
        return obj

    async def _patch(self, request: kmock.Request, kind: objects.Kind) -> dict[str, Any]:
        content_type = request.headers.get("Content-Type", "").split(";")[0].strip()
        patch_type = _PATCH_TYPES.get(content_type)
        if patch_type is None or (patch_type == "strategic" and kind.custom):
            raise status.unsupported_media_type(content_type)
        async with self._lock:
            key = self._key(request, kind)
            old = self._live(key)
            if old is None:
                raise status.not_found(kind.plural, kind.group, key[2])
            try:
                match patch_type:
                    case "json":
                        new = patches.json_patch(old, request.data)
                    case "merge":
                        new = patches.merge_patch(old, self._body(request))
                    case _:
                        new = patches.strategic_merge_patch(old, self._body(request))
            except patches.PatchError as error:
                raise status.ApiError(422, "Invalid", f"the patch could not be applied: {error}") from error
            if not isinstance(new, dict):
                raise status.ApiError(422, "Invalid", "the patch must leave an object")
            if patch_type != "json":
                self._check_version(kind, old, objects.metadata(self._body(request)).get("resourceVersion"))
            return await self._write(request, kind, key, old, new)

    async def _replace(self, request: kmock.Request, kind: objects.Kind) -> dict[str, Any]:
        body = self._body(request)
        if objects.metadata(body).get("name") not in (None, request.name):
            raise status.bad_request("the name of the object does not match the name on the URL")
        async with self._lock:
            key = self._key(request, kind)
            old = self._live(key)
            if old is None:
                raise status.not_found(kind.plural, kind.group, key[2])
            version = objects.metadata(body).get("resourceVersion")
            if not version and kind.custom:
                cause = status.Cause("metadata.resourceVersion", "Invalid value: 0x0: must be specified for an update")
                raise status.invalid(kind.kind, kind.group, key[2], [cause])
            self._check_version(kind, old, version)
            return await self._write(request, kind, key, old, body)

    def _check_version(self, kind: objects.Kind, old: Mapping[str, Any], version: Any) -> None:
        if version and str(version) != objects.metadata(old).get("resourceVersion"):
            raise status.conflict(kind.plural, kind.group, str(objects.metadata(old).get("name")), status.STALE)

    async def _write(
        self, request: kmock.Request, kind: objects.Kind, key: Key, old: dict[str, Any], new: Mapping[str, Any]
    ) -> dict[str, Any]:
        """Store an update computed under the lock; deletes the object when its last finalizer went away."""
        scope = objects.Scope.STATUS if request.subresource == "status" else objects.Scope.MAIN
        result = objects.updated(old, new, kind, scope=scope, resource_version=self._resource_version + 1)
        if result is None:
            return old
        result = self._default(kind, result)
        self._validate(kind, result, old)
        if "dryRun" in request.params:
            return result
        return await self._commit_update(key, old, result)

    async def _commit_update(self, key: Key, old: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
        self._next_version()
        self._store(key, result)
        meta = objects.metadata(result)
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            self._objects[key].delete()
            await self._publish(key[0], watching.Change(watching.EventType.DELETED, self._resource_version, result))
        else:
            change = watching.Change(watching.EventType.MODIFIED, self._resource_version, result, old)
            await self._publish(key[0], change)
        return result

    async def _delete(self, request: kmock.Request, kind: objects.Kind) -> Any:
        options = request.data if isinstance(request.data, dict) else {}
        preconditions = options.get("preconditions") or {}
        async with self._lock:
            key = self._key(request, kind)
            old = self._live(key)
            if old is None:
                raise status.not_found(kind.plural, kind.group, key[2])
            meta = objects.metadata(old)
            for field, precondition in (("uid", "uid"), ("resourceVersion", "resourceVersion")):
                expected = preconditions.get(precondition)
                if expected and expected != meta.get(field):
                    actual = meta.get(field)
                    why = f"Precondition failed: {field} in precondition: {expected}, {field} in object meta: {actual}"
                    raise status.conflict(kind.plural, kind.group, key[2], why)
            result, gone = await self._delete_locked(key, old)
        if gone and not (kind.plural == "pods" and kind.group == ""):
            return status.success(
                details={"name": key[2], "group": kind.group, "kind": kind.plural, "uid": meta.get("uid")}
            )
        return result

    async def _delete_locked(self, key: Key, old: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        """Delete now, or mark deleting when finalizers hold the object; returns (object, whether it is gone)."""
        meta = objects.metadata(old)
        if meta.get("finalizers"):
            if meta.get("deletionTimestamp"):
                return old, False
            marked = copy.deepcopy(old)
            marked["metadata"].update(deletionTimestamp=objects.timestamp(self.clock()), deletionGracePeriodSeconds=0)
            marked["metadata"]["resourceVersion"] = str(self._resource_version + 1)
            return await self._commit_update(key, old, marked), False
        final = copy.deepcopy(old)
        final["metadata"]["resourceVersion"] = str(self._next_version())
        self._store(key, final)
        self._objects[key].delete()
        await self._publish(key[0], watching.Change(watching.EventType.DELETED, self._resource_version, final))
        return final, True

    async def _delete_collection(self, request: kmock.Request, kind: objects.Kind) -> dict[str, Any]:
        assert request.resource is not None
        watch = self._filter(request)
        async with self._lock:
            doomed = [obj for obj in self._live_objects(request.resource, request.namespace) if watch.matches(obj)]
            items = []
            for obj in doomed:
                meta = objects.metadata(obj)
                key = (request.resource, meta.get("namespace") if kind.namespaced else None, str(meta.get("name")))
                items.append((await self._delete_locked(key, obj))[0])
        meta_list = {"resourceVersion": str(self._resource_version)}
        return {"apiVersion": kind.api_version, "kind": f"{kind.kind}List", "metadata": meta_list, "items": items}

    # -- pods/eviction and pods/binding -------------------------------------------------------------------------

    async def _evict(self, request: kmock.Request, kind: objects.Kind) -> dict[str, Any]:
        async with self._lock:
            key = self._key(request, kind)
            pod = self._live(key)
            if pod is None:
                raise status.not_found(kind.plural, kind.group, key[2])
            namespace = key[1]
            pdbs, pods = list(self._live_objects(PDBS, namespace)), list(self._live_objects(PODS, namespace))
            decision = disruption.decide(pod, pdbs, pods, self._controller_scale)
            error = decision.error()
            record = Eviction(
                namespace=str(namespace),
                name=key[2],
                code=error.code if error is not None else 201,
                at=self.clock(),
                budgets=tuple(b.name for b in decision.budgets),
            )
            self._evictions.append(record)
            if error is not None:
                raise error
            await self._delete_locked(key, pod)
        return status.success(code=201)

    def _controller_scale(self, pod: Mapping[str, Any]) -> tuple[str, int] | None:
        """The pod's scaling controller (a ReplicaSet's Deployment, a StatefulSet, ...) as (uid, spec.replicas)."""
        namespace = objects.metadata(pod).get("namespace")
        owner: Mapping[str, Any] | None = pod
        found: tuple[str, int] | None = None
        while owner is not None:
            ref = next((r for r in objects.metadata(owner).get("ownerReferences") or () if r.get("controller")), None)
            resource = _SCALED_KINDS.get((ref or {}).get("kind", ""))
            if ref is None or resource is None:
                return found
            owner = self._live((resource, namespace, str(ref.get("name"))))
            if owner is not None:
                found = (str(objects.metadata(owner).get("uid")), int((owner.get("spec") or {}).get("replicas", 1)))
        return found

    async def _bind(self, request: kmock.Request, name: str, body: Mapping[str, Any]) -> dict[str, Any]:
        node = (body.get("target") or {}).get("name")
        if not node:
            raise status.bad_request("a binding needs target.name")
        pods = objects.Kind("pods", "", "v1", "Pod", namespaced=True, status_subresource=True, custom=False)
        async with self._lock:
            key: Key = (PODS, request.namespace, name)
            old = self._live(key)
            if old is None:
                raise status.not_found("pods", "", name)
            assigned = (old.get("spec") or {}).get("nodeName")
            if assigned:
                raise status.conflict("pods", "", name, f'pod {name} is already assigned to node "{assigned}"')
            if objects.metadata(old).get("deletionTimestamp"):
                raise status.conflict("pods", "", name, "pod is being deleted, cannot be assigned to a host")
            bound = copy.deepcopy(old)
            bound.setdefault("spec", {})["nodeName"] = node
            conditions = [
                c for c in (bound.setdefault("status", {}).get("conditions") or []) if c.get("type") != "PodScheduled"
            ]
            conditions.append(
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": objects.timestamp(self.clock())}
            )
            bound["status"]["conditions"] = conditions
            result = objects.updated(
                old, bound, pods, scope=objects.Scope.ALL, resource_version=self._resource_version + 1
            )
            if result is not None:
                await self._commit_update(key, old, result)
        return status.success(code=201)

    # -- watch --------------------------------------------------------------------------------------------------

    def _watch_response(self, request: kmock.Request, kind: objects.Kind) -> rendering.Response:
        assert request.resource is not None
        params = request.params
        since = params.get("resourceVersion") or None
        if since is not None and not since.isdigit():
            raise status.bad_request(f"invalid resourceVersion {since!r}")
        timeout = float(params["timeoutSeconds"]) if params.get("timeoutSeconds") else None
        stream = self._watch(
            request.resource,
            kind,
            self._filter(request),
            since=None if since == "0" else since,
            initial_events=params.get("sendInitialEvents") == "true",
            lifetime=timeout,
        )
        return rendering.Response(status=200, payload=stream, headers=_JSON)

    async def _watch(
        self,
        resource: kmock.resource,
        kind: objects.Kind,
        watch: watching.Filter,
        *,
        since: str | None,
        initial_events: bool,
        lifetime: float | None,
    ) -> AsyncIterator[Any]:
        yield b""  # sends the headers now: a watch on a quiet resource must still start
        if self._closing:
            return
        bus = self._buses[resource]
        async with self._lock:  # no write between the snapshot and the mark
            mark = await bus.mark()
            backlog = self._backlog(resource, kind, watch, since=since, initial_events=initial_events)
        try:
            for event in backlog:
                yield event
            if backlog and backlog[-1]["type"] == watching.EventType.ERROR:
                return
            async with asyncio.timeout(lifetime):  # ?timeoutSeconds=
                async for change in bus.stream(since=mark):
                    if change is None:
                        return
                    visible = watching.translate(change, watch)
                    if visible is not None:
                        yield visible
        except TimeoutError:
            return
        finally:
            await bus.unmark(mark)

    def _backlog(
        self,
        resource: kmock.resource,
        kind: objects.Kind,
        watch: watching.Filter,
        *,
        since: str | None,
        initial_events: bool,
    ) -> list[dict[str, Any]]:
        if since is None or initial_events:
            current = [obj for obj in self._live_objects(resource, watch.namespace) if watch.matches(obj)]
            events = [watching.event(watching.EventType.ADDED, obj) for obj in current]
            if initial_events:
                events.append(watching.initial_events_end(self._resource_version, kind.api_version, kind.kind))
            return events
        if int(since) < self._compacted.get(resource, 0):
            return [watching.expired(since)]
        changes = self._changes.get(resource, ())
        replayed = (watching.translate(c, watch) for c in changes if c.resource_version > int(since))
        return [event for event in replayed if event is not None]
