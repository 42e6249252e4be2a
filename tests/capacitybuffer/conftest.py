"""Fixtures of the capacitybuffer tests: the emulated API server and a RestClient on it."""

from tests.served_api import api, kube

__all__ = ["api", "kube"]
