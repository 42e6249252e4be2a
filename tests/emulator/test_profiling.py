"""profiling: KARPY_EMULATOR_PROFILE profiles the main thread and (before Python 3.12) the API server's thread
started meanwhile, one pstats file each; other threads (moto's) are not profiled; unset, nothing is written."""

from __future__ import annotations

import pathlib
import pstats
import threading

import pytest

from karpy_emulator import profiling


def _in_main() -> int:
    return sum(range(100))


def _in_apiserver() -> int:
    return sum(range(200))


def _in_worker() -> int:
    return sum(range(300))


def _functions(path: pathlib.Path) -> set[str]:
    stats = pstats.Stats(str(path))
    return {name for (_, _, name) in stats.stats}  # type: ignore[attr-defined]  # pstats keeps them untyped


def _run_threads() -> None:
    _in_main()
    for name, target in (("fake-kube-api-7f", _in_apiserver), ("Thread-3 (process_request_thread)", _in_worker)):
        thread = threading.Thread(target=target, name=name)
        thread.start()
        thread.join()


def test_the_main_and_api_server_threads_get_a_profile_each(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    prefix = tmp_path / "emu"
    monkeypatch.setenv(profiling.PROFILE_ENV, str(prefix))
    with profiling.from_environment():
        _run_threads()
    main, apiserver, other = (pathlib.Path(f"{prefix}.{group.value}.prof") for group in profiling.Group)
    assert "_in_main" in _functions(main)
    if profiling.PER_THREAD:
        assert "_in_apiserver" not in _functions(main)
        assert "_in_apiserver" in _functions(apiserver)
        assert "_in_main" not in _functions(apiserver)
        assert "_in_worker" not in _functions(main) | _functions(apiserver)
    else:  # 3.12+: one profiler per interpreter, which sees every thread
        assert not apiserver.exists()
        assert {"_in_apiserver", "_in_worker"} <= _functions(main)
    assert not other.exists()  # moto's threads get no file of their own
    assert threading.getprofile() is None  # the hook for new threads is gone with the block


def test_unset_profiles_nothing(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(profiling.PROFILE_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    with profiling.from_environment():
        _run_threads()
    assert list(tmp_path.iterdir()) == []
