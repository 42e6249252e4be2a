"""Serve a `FakeKubeAPI` on 127.0.0.1 (random port) from a background thread with its own event loop.

The thread owns the loop, so the server keeps answering while a sync test blocks on the official client or a
Kopf operator runs in another loop (Kopf waits ~5 s for "hung" tasks it did not create; watch handlers in its
loop would be such tasks). `aiohttp`'s own server is used rather than `kmock.Server`, which also monkeypatches
aiohttp's resolver process-wide.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import pathlib
import socket
import threading
from collections.abc import Callable, Coroutine
from types import TracebackType
from typing import Any, Self, TypeVar

import aiohttp.web
import yaml

from karpy_emulator.apiserver import server

T = TypeVar("T")


class KubeAPIRunner:
    """`with KubeAPIRunner() as kube:` serves `kube.api` at `kube.url` until the block ends."""

    def __init__(
        self,
        api: server.FakeKubeAPI | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        startup_timeout: float = 10.0,
        shutdown_timeout: float = 10.0,
    ) -> None:
        self.api = api if api is not None else server.FakeKubeAPI()
        self._host = host
        self._port = port
        self._startup_timeout = startup_timeout
        self._shutdown_timeout = shutdown_timeout
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._ready = threading.Event()
        self._failure: BaseException | None = None
        self.port = 0

    @property
    def url(self) -> str:
        if not self.port:
            raise RuntimeError("the API server is not running")
        return f"http://{self._host}:{self.port}"

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError("the API server runner can be started only once")
        self._thread = threading.Thread(target=self._run, name=f"fake-kube-api-{id(self):x}", daemon=True)
        self._thread.start()
        if not self._ready.wait(self._startup_timeout):
            raise TimeoutError(f"the API server did not start within {self._startup_timeout} s")
        if self._failure is not None:
            self._thread.join(self._shutdown_timeout)
            raise RuntimeError("the API server failed to start") from self._failure

    def stop(self) -> None:
        thread, loop, stopping = self._thread, self._loop, self._stopping
        if thread is None or loop is None or stopping is None or not thread.is_alive():
            return
        loop.call_soon_threadsafe(stopping.set)
        thread.join(self._shutdown_timeout)
        if thread.is_alive():
            raise TimeoutError(f"the API server did not stop within {self._shutdown_timeout} s")

    def call(self, fn: Callable[[], Coroutine[Any, Any, T]], *, timeout: float = 10.0) -> T:
        """Run `fn()` on the server's loop (e.g. to seed or inspect the store) and return its result."""
        if self._loop is None:
            raise RuntimeError("the API server is not running")
        future: concurrent.futures.Future[T] = asyncio.run_coroutine_threadsafe(fn(), self._loop)
        return future.result(timeout)

    async def read(self, fn: Callable[[], T]) -> T:
        """`fn()` run on the server's loop, awaited from another loop: a read of the store that no write of the
        server interleaves with (the server changes its store only on its own loop)."""
        if self._loop is None:
            raise RuntimeError("the API server is not running")

        async def run() -> T:
            return fn()

        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(run(), self._loop))

    def write_kubeconfig(self, path: pathlib.Path, *, context: str = "fake") -> pathlib.Path:
        """A kubeconfig pointing at this server with a dummy token (nothing checks it)."""
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": context, "cluster": {"server": self.url}}],
            "users": [{"name": context, "user": {"token": "fake-token"}}],
            "contexts": [{"name": context, "context": {"cluster": context, "user": context, "namespace": "default"}}],
            "current-context": context,
        }
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        return path

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    async def __aenter__(self) -> Self:
        await asyncio.to_thread(self.start)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await asyncio.to_thread(self.stop)

    # -- the server thread --------------------------------------------------------------------------------------

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._serve())
        except BaseException as error:  # reported to start() or kept for the post-mortem
            self._failure = error
        finally:
            self._ready.set()
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    async def _serve(self) -> None:
        self._stopping = asyncio.Event()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.bind((self._host, self._port))
        except OSError:
            sock.close()
            raise
        async with self.api:
            runner = aiohttp.web.ServerRunner(aiohttp.web.Server(self.api), shutdown_timeout=self._shutdown_timeout / 2)
            await runner.setup()
            try:
                await aiohttp.web.SockSite(runner, sock).start()
                self.port = sock.getsockname()[1]
                self._ready.set()
                await self._stopping.wait()
                await self.api.close_watches()
            finally:
                await runner.cleanup()
