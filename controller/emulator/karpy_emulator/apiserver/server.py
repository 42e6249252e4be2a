"""`FakeKubeAPI`: kmock 0.8's `KubernetesEmulator` made to behave like a real API server for real clients.

kmock routes every request through its reaction DSL; this class adds one fallback reaction, one step above
kmock's own object fallbacks and below anything a test declares, that serves every resource request itself
(list, watch, get, create, patch, replace, delete, deletecollection, eviction, binding). A test can therefore still
inject a failure with `api['post', api.resource('karpenter.sh/v1/nodeclaims')] << 500`: an intercepted write is not
stored. Objects live in kmock's own store (`api.objects[...]`), so kmock's assertions keep working. The writes
and their checks are `writes.Writes`, a mixin; routing, discovery, reads and watches are here.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from typing import Any, Self

import aiohttp.web
import attrs
import kmock

from karpy import clock as karpy_clock
from karpy_emulator.apiserver import (
    api_status,
    audit,
    faults,
    incoming,
    kmock_private,
    namespaces,
    objects,
    openapi,
    pages,
    pods,
    protobuf,
    requestcounts,
    resources,
    store,
    tables,
    validation,
    watching,
    writes,
)

_JSON = {"Content-Type": "application/json"}
_TEXT = {"Content-Type": "text/plain; version=0.0.4"}


def _ok(payload: Any, code: int = 200) -> kmock_private.Response:
    return kmock_private.Response(status=code, payload=payload, headers=_JSON)


@attrs.define(kw_only=True)
class FakeKubeAPI(writes.Writes, kmock.KubernetesEmulator):
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
    activity: karpy_clock.Activity = karpy_clock.UNTRACKED
    """Where watch events not yet sent count as work in flight (the autojump clock's tracker; see `deliveries`)."""
    request_history: int | None = None
    """Requests kept for kmock's request spy (None: all, as kmock does); bound it for long runs."""
    kubernetes_version: str = resources.KUBERNETES_VERSION
    """The Kubernetes minor version served (`/version`; `major.minor`), as the nodes' kubelets report it."""
    namespace_lifecycle: bool = False
    """Start with the system namespaces and refuse objects in a namespace that does not exist, as a real cluster
    does (NamespaceLifecycle admission). Off, objects may name any namespace (what most tests seed)."""

    field_managers: bool = False
    """Record every writer's fields in `metadata.managedFields` (`operation: Update`, see `managers`), so a
    server-side apply conflicts with a field another writer changed, as a real API server does. Off, only appliers
    own fields: most tests compare whole objects, and a 10,000-pod run pays for it on every write."""

    fault_layer: faults.Faults | None = None
    """Failures answered to chosen clients in place of the server's answers (see `faults`); None: none."""

    accesses: audit.Log = attrs.field(factory=audit.Log, init=False)
    request_counts: requestcounts.Counts = attrs.field(factory=requestcounts.Counts, init=False)
    """Requests answered, by kube-apiserver's `apiserver_request_total` labels; served at `/metrics`."""
    """Every distinct (user, verb, resource, namespace, name) requested, for RBAC checks (see `audit`)."""

    _db: store.Store = attrs.field(init=False)
    _rng: random.Random = attrs.field(factory=random.Random, init=False)
    _evictions: list[pods.Eviction] = attrs.field(factory=list, init=False)
    _custom_groups: frozenset[str] = attrs.field(factory=resources.custom_groups, init=False)
    _object_reaction: Any = attrs.field(default=None, init=False)
    _version_reaction: Any = attrs.field(default=None, init=False)
    _own_reactions: int = attrs.field(default=0, init=False)
    _kinds: dict[kmock.resource, tuple[objects.Kind, frozenset[str]]] = attrs.field(factory=dict, init=False)
    _kinds_declared: int = attrs.field(default=0, init=False)
    _openapi: openapi.Served = attrs.field(factory=openapi.Served, init=False)
    _parser: incoming.Parser = attrs.field(factory=incoming.Parser, init=False)

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        self._rng.seed(self.seed)
        self._db = store.Store(
            self._objects,
            self._buses,
            self._lock,
            clock=self.clock,
            watch_history=self.watch_history,
            object_history=self.object_history,
            activity=self.activity,
        )
        resources.declare(self.resources)
        # One step above kmock's object fallbacks (which it shadows), below every reaction a test declares.
        self._object_reaction = (self.fallback**1)[self._is_object_request] << self._serve_object
        # also with a trailing slash
        self._version_reaction = (self.fallback**1)[self._is_version_discovery] << self._serve_version
        self._own_reactions = len(self._payloads)

    # -- public, for tests and the other stand-ins ------------------------------------------------------------

    @property
    def evictions(self) -> tuple[pods.Eviction, ...]:
        """Every eviction request answered so far, in order (proves budgets were honoured)."""
        return tuple(self._evictions)

    @property
    def resource_version(self) -> int:
        """The last resourceVersion handed out (a global counter, as etcd's revision)."""
        return self._db.resource_version

    def live(self, resource: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        """A copy of the stored object, or None when absent (for assertions; call on the server's loop)."""
        obj = self._db.live((kmock.resource(resource), namespace, name))
        return objects.clone(obj) if obj is not None else None

    async def close_watches(self) -> None:
        """End every open watch stream, so that the server can stop without waiting for clients."""
        await self._db.close_watches()

    async def end_watches(self) -> None:
        """End every open watch stream and keep serving: each client's next watch is a new request."""
        await self._db.end_watches()

    def requests_of(self, user: str) -> list[audit.Access]:
        """Every request `user` (its bearer token) made so far, in order, one entry per request (the `accesses`
        log keeps each distinct one once): how tests count watch streams and LISTs per resource."""
        return [access for request in list(self) if (access := audit.access(request)).user == user]

    def snapshot(self, resource: kmock.resource, watch: watching.Filter) -> tuple[list[dict[str, Any]], str]:
        """The stored objects a LIST with `watch`'s selectors would return, in its order, and the list's
        resourceVersion: the stored dicts themselves, never copied or encoded (the emulated control plane's
        in-process reads, `karpy_emulator.reads`; readers must not change them). Call on the server's loop."""
        listed = self._db.listed(resource, watch.namespace)
        if watch.by_namespace_only:  # what the stand-ins mostly ask: no object to test
            return [obj for _, obj in listed], str(self._db.resource_version)
        return [obj for _, obj in listed if watch.matches(obj)], str(self._db.resource_version)

    def changed_at(self, resources_: Iterable[kmock.resource]) -> int:
        """The revision of the latest write to any object of `resources_` (0: none): equal answers mean nothing of
        theirs changed in between (the emulated control plane's change feed, `karpy_emulator.reads`). Call on the
        server's loop."""
        return max((self._db.changed_at(resource) for resource in resources_), default=0)

    def changes_since(self, resource: kmock.resource, revision: int) -> list[watching.Change] | None:
        """The writes to `resource` after `revision`, oldest first, or None when some were compacted away (the
        stand-ins' informer caches, `karpy_emulator.informers`). Call on the server's loop."""
        return self._db.changes_since(resource, revision)

    async def __aenter__(self) -> Self:
        await super().__aenter__()
        if self.namespace_lifecycle:
            async with self._lock:
                for name in namespaces.SYSTEM:
                    if self._db.live(namespaces.key(name)) is None:
                        await self._store_new(namespaces.KIND, namespaces.key(name), namespaces.manifest(name))
        return self

    async def __call__(self, raw_request: aiohttp.web.BaseRequest) -> aiohttp.web.StreamResponse:
        raw_request = protobuf.readable(namespaces.routable(raw_request))
        if self.limit is not None or len(self._payloads) != self._own_reactions:
            return await super().__call__(raw_request)  # a test's reactions see kmock's own parse
        # kmock's RawHandler.__call__ with `incoming`'s parse: the request is recorded for kmock's spy as there, and a
        # failure is kept for the test (in `errors`) and answered as kmock answers it.
        request = await self._parser.parse(raw_request, id=len(self._requests))
        self._requests.append(request)
        streaming: aiohttp.web.StreamResponse | None = None
        try:
            try:
                return await self._handle(request)
            except kmock_private.StreamingError as wrapped:  # a watch failed after its headers went out
                streaming = wrapped.args[0]
                raise wrapped.__cause__ or wrapped from None
        except Exception as error:
            if not self._errors:
                raise
            self._errors[-1].append(error)
            if streaming is None or not streaming.prepared:
                return await self._render_error(error)
            await self._stream_error(error, streaming)
            await streaming.write_eof()
            return streaming

    async def _serve_server_version(self, request: kmock.Request) -> Any:
        return resources.server_version(self.kubernetes_version)

    async def _handle(self, request: kmock.Request) -> aiohttp.web.StreamResponse:
        request = namespaces.restored(request)
        if request.method == "GET" and request.url.path.startswith("/openapi/"):
            code, document = self._openapi.answer(request.url.path, request.headers.get("Accept", ""), self.resources)
            if document is None:
                error = api_status.resource_not_found(request.url.path)
                document = api_status.failure(code, "NotAcceptable" if code == 406 else error.reason, error.message)
            return await _ok(document, code)(request)
        if request.method == "GET" and request.url.path == requestcounts.PATH:
            text = self.request_counts.exposition()
            return await kmock_private.Response(status=200, payload=text.encode(), headers=_TEXT)(request)
        # Skips KubernetesEmulator._handle, which stores every write before routing (even refused or intercepted
        # ones); the writes happen in `_serve_object` instead, with the API server's checks.
        try:
            if self.fault_layer is not None and (injected := await self.fault_layer.before(request)) is not None:
                return injected
            if len(self._payloads) == self._own_reactions:
                # No reaction declared by a test: route straight to ours. kmock's router tests `request in
                # reaction` by re-filtering every request served so far, which grows quadratically with traffic.
                if self._is_object_request(request):
                    # What the reaction does, without kmock's per-request introspection of the callback: note the
                    # request for kmock's spy, then render our answer.
                    self._object_reaction._requests.append(request)
                    response = await self._serve_object(request)
                    return incoming.rendered(response) or await response(request)
                if self._is_version_discovery(request):
                    return await self._version_reaction(request)  # type: ignore[no-any-return]
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

    async def _serve_object(self, request: kmock.Request) -> kmock_private.Response:
        self._audit(request)
        try:
            response = await self._route(request)
        except api_status.ApiError as error:
            response = kmock_private.Response(status=error.code, payload=error.body(), headers=_JSON)
        self.request_counts.record(request, response.status or 200)
        return response

    def _audit(self, request: kmock.Request) -> None:
        self.accesses.record(audit.access(request))

    async def _route(self, request: kmock.Request) -> kmock_private.Response:
        kind = self._kind(request)
        named = request.name is not None
        if named and kind.namespaced and request.namespace is None:
            raise api_status.resource_not_found(request.url.path)
        if not kind.namespaced and request.namespace is not None:
            raise api_status.resource_not_found(request.url.path)
        sub = request.subresource
        if request.action == kmock.action.WATCH:
            return self._watch_response(request, kind)
        as_table = tables.wanted(request.headers.get("Accept", ""))
        match request.method, named, sub:
            case "GET", False, None if as_table:
                return _ok(self._table(request, kind, json.loads(self._list(request, kind))))
            case "GET", False, None:
                return _ok(self._list(request, kind))
            case "GET", True, None if as_table:
                obj = json.loads(self._fetch(request, kind))
                return _ok(self._table(request, kind, {"items": [obj], "metadata": objects.metadata(obj)}))
            case "GET", True, None | "status":
                return _ok(self._fetch(request, kind))
            case "GET", True, "scale":
                return _ok(self._scaled(self._fetch(request, kind)))
            case "POST", False, None if kind.plural == "bindings" and kind.group == "":
                body = self._body(request)
                return _ok(await self._bind(request, str(objects.metadata(body).get("name", "")), body), 201)
            case "POST", False, None:
                return _ok(await self._create(request, kind), 201)
            case "POST", True, "eviction":
                return _ok(await self._evict(request, kind), 201)
            case "POST", True, "binding":
                return _ok(await self._bind(request, str(request.name), self._body(request)), 201)
            case "PATCH", True, None | "status" | "scale":
                return _ok(await self._patch(request, kind))
            case "PUT", True, None | "status" | "scale":
                return _ok(await self._replace(request, kind))
            case "DELETE", True, None:
                return _ok(await self._delete(request, kind))
            case "DELETE", False, None:
                return _ok(await self._delete_collection(request, kind))
        raise api_status.method_not_allowed(f"{request.method} is not supported on {request.url.path}")

    def _kind(self, request: kmock.Request) -> objects.Kind:
        resource = request.resource
        assert resource is not None  # see _is_object_request
        assert resource.plural is not None
        if self._kinds_declared != len(self.resources):  # a resource was declared or dropped: look them up again
            self._kinds.clear()
            self._kinds_declared = len(self.resources)
        known = self._kinds.get(resource)
        if known is None:
            if resource not in self.resources:  # kmock's lookup is slow (a runtime protocol check): once per kind
                raise api_status.resource_not_found(request.url.path)
            info = self.resources[resource]
            group, version = resource.group or "", resource.version or ""
            kind = objects.Kind(
                plural=resource.plural,
                group=group,
                api_version=f"{group}/{version}" if group else version,
                kind=info.kind or resource.plural.capitalize(),
                namespaced=bool(info.namespaced),
                status_subresource="status" in info.subresources,
                custom=group in self._custom_groups,
            )
            known = self._kinds[resource] = (kind, frozenset(info.subresources))
        kind, subresources = known
        if request.subresource is not None and request.subresource not in subresources:
            raise api_status.resource_not_found(request.url.path)
        return kind

    def _namespaced_resources(self) -> list[kmock.resource]:
        return [resource for resource in self.resources if self.resources[resource].namespaced]

    # -- reads --------------------------------------------------------------------------------------------------

    def _fetch(self, request: kmock.Request, kind: objects.Kind) -> bytes:
        encoded = self._db.encoded(self._key(request, kind))
        if encoded is None:
            raise api_status.not_found(kind.plural, kind.group, str(request.name))
        return encoded

    def _list(self, request: kmock.Request, kind: objects.Kind) -> bytes:
        """The list as JSON, assembled from each item's stored encoding; one page of it with `?limit=`."""
        assert request.resource is not None
        watch = self._filter(request)
        continue_ = request.params.get("continue")
        resume = pages.resume(continue_) if continue_ else None
        if resume is not None and not resume.latest and not self._db.holds(request.resource, resume.revision):
            raise pages.expired(resume)  # compacted, as etcd's history is after a while
        limit = int(request.params.get("limit") or 0)
        # by namespace, then name: the order the store keeps
        listed = self._db.listed(request.resource, request.namespace, after=resume.position if resume else None)
        matching = (key for key, obj in listed if watch.by_namespace_only or watch.matches(obj))
        items, more = pages.page(matching, limit=limit)
        version = resume.resource_version if resume and not resume.latest else str(self._db.resource_version)
        meta: dict[str, Any] = {"resourceVersion": version}
        if more:
            meta["continue"] = pages.token(store.position(items[-1]), version)
        head = watching.encode({"apiVersion": kind.api_version, "kind": f"{kind.kind}List", "metadata": meta})
        body = b", ".join(self._db.encoded_live(key) for key in items)
        return head[:-1] + b', "items": [' + body + b"]}"

    def _table(self, request: kmock.Request, kind: objects.Kind, listed: Mapping[str, Any]) -> dict[str, Any]:
        meta = listed.get("metadata") or {}
        return tables.table(
            kind,
            listed.get("items") or (),
            now=self.clock(),
            resource_version=str(meta.get("resourceVersion", "")),
            include=request.params.get("includeObject", "Metadata"),
            continue_=meta.get("continue"),
        )

    # -- pods/eviction and pods/binding -------------------------------------------------------------------------

    async def _evict(self, request: kmock.Request, kind: objects.Kind) -> dict[str, Any]:
        key = self._key(request, kind)
        async with self._lock:
            record, refusal = await pods.evict(self._db, str(key[1]), key[2], now=self.clock())
        self._evictions.append(record)
        if refusal is not None:
            raise refusal
        return api_status.success(code=201)

    async def _bind(self, request: kmock.Request, name: str, body: Mapping[str, Any]) -> dict[str, Any]:
        async with self._lock:
            await pods.bind(self._db, str(request.namespace), name, body, clock=self.clock)
        return api_status.success(code=201)

    # -- watch --------------------------------------------------------------------------------------------------

    def _watch_response(self, request: kmock.Request, kind: objects.Kind) -> kmock_private.Response:
        assert request.resource is not None
        params = request.params
        since = params.get("resourceVersion") or None
        if since is not None and not since.isdigit():
            raise api_status.bad_request(f"invalid resourceVersion {since!r}")
        timeout = float(params["timeoutSeconds"]) if params.get("timeoutSeconds") else None
        stream = self._db.watch(
            request.resource,
            kind,
            self._filter(request),
            since=None if since == "0" else since,
            initial_events=params.get("sendInitialEvents") == "true",
            lifetime=timeout,
        )
        if self.fault_layer is not None:
            stream = self.fault_layer.watch_stream(request, stream)
        if tables.wanted(request.headers.get("Accept", "")):
            stream = self._table_frames(stream, kind, include=request.params.get("includeObject", "Metadata"))
            return kmock_private.Response(status=200, payload=stream, headers=tables.HEADERS)
        return kmock_private.Response(status=200, payload=stream, headers=_JSON)

    async def _table_frames(
        self, stream: AsyncIterator[bytes], kind: objects.Kind, *, include: str
    ) -> AsyncIterator[bytes]:
        """`kubectl get -w`: every watch event's object as a one-row Table."""
        async for frame in stream:
            yield tables.watch_frame(kind, frame, now=self.clock(), include=include)
