"""The boto3 session the controller's clients share, whose loader keeps botocore's data files in less memory.

botocore keeps every JSON file its clients load parsed in the session's loader for the life of the process
(botocore/loaders.py: `Loader.load_service_model` and `load_data_with_path` are `instance_cache`d, and each client's
`ServiceModel` holds the same object), and parses each into `collections.OrderedDict`s, about twice the memory of a
dict, whose insertion order is the same and which botocore reads only as a mapping. The file loader here parses
botocore's files into dicts instead, and empties each `documentation` string of a service model (`service-2`) as its
object is built, so the text never sits in memory: more than half of EC2's 4.3 MB model is documentation, which only
help(), the generated docstrings and botocore's doc builder read (botocore/model.py `Shape.documentation`,
`OperationModel.documentation`, botocore/client.py `ClientMethodDocstring`), never a call. The key stays: some
readers index it (`ServiceModel.client_context_parameters`). EC2's model then takes 6.6 MB instead of 13.9 MB and
botocore's endpoint data 3.9 MB instead of 6.7 MB (tracemalloc, bench/startup_memory.py gives the process's RSS).

Search paths are the loader's own: AWS_DATA_PATH and ~/.aws/models still come first, as botocore documents.

Responses' timestamps are read by `timestamp` (botocore's documented hook: the response parser factory's
`timestamp_parser` default): the ISO 8601 times EC2 answers with are read by `datetime.fromisoformat` instead of
dateutil's general parser, a fifth of the CPU botocore spent parsing DescribeInstances answers during basic's
scale-out (bench/performance.py under py-spy: every instance carries several times, and the instance garbage
collection and the tagger describe every instance again). Any other form goes to botocore's own parser.
"""

from __future__ import annotations

import datetime
import gzip
import json
import os
from collections.abc import Iterable, Mapping
from typing import Any, Final

import boto3.session
import botocore.loaders
import botocore.session
import botocore.utils

from karpy.cloudprovider.aws import models

SERVICE_MODEL: Final = "service-2"
"""The file name (without extension) of a service's API model in botocore's data layout."""
ENDPOINTS: Final = "endpoints"
"""botocore's endpoint data file (without extension)."""


def _read(path: str) -> bytes | None:
    """A model file's bytes in the encodings botocore ships them in (botocore/loaders.py `_JSON_OPEN_METHODS`, in
    its order); None when neither is there, and botocore then reads the model itself, documentation included."""
    if os.path.isfile(path + ".json"):
        with open(path + ".json", "rb") as plain:
            return plain.read()
    if os.path.isfile(path + ".json.gz"):
        with gzip.open(path + ".json.gz", "rb") as compressed:
            return compressed.read()
    return None


def _undocumented(pairs: Iterable[tuple[str, Any]]) -> dict[str, Any]:
    """One JSON object of a service model, its `documentation` text emptied."""
    return {key: "" if key == "documentation" and isinstance(value, str) else value for key, value in pairs}


class CompactFileLoader(botocore.loaders.JSONFileLoader):  # type: ignore[misc]
    """botocore's JSON file loader, but into dicts, and a service model's documentation strings are empty. With
    `operations` (per service, `karpy.cloudprovider.aws.models.CALLED`), the models of those services keep only
    those operations and what they reach (`models.prune`), and the endpoint data only their services
    (`models.prune_endpoints`)."""

    def __init__(self, operations: Mapping[str, frozenset[str]] | None = None) -> None:
        super().__init__()
        self._operations = operations or {}

    def load_file(self, file_path: str) -> Any:
        payload = _read(file_path)
        if payload is None:
            return super().load_file(file_path)
        if os.path.basename(file_path) == SERVICE_MODEL:
            loaded = json.loads(payload.decode("utf-8"), object_pairs_hook=_undocumented)
            # botocore's data layout: <service>/<api version>/service-2.json
            service = os.path.basename(os.path.dirname(os.path.dirname(file_path)))
            wanted = self._operations.get(service)
            return loaded if wanted is None else models.prune(loaded, wanted)
        loaded = json.loads(payload.decode("utf-8"))
        if self._operations and os.path.basename(file_path) == ENDPOINTS:
            return models.prune_endpoints(loaded)
        return loaded


def timestamp(value: Any) -> datetime.datetime:
    """A response's timestamp as botocore's `parse_timestamp` reads it (an aware datetime, the same instant), the
    extended ISO 8601 form with a zone (`2026-12-07T11:18:26.000Z`) read without dateutil. Only that form: a date
    alone, a number, an RFC 822 date or a time without a zone go to botocore (`20261207` is epoch seconds there)."""
    if isinstance(value, str) and "T" in value and "-" in value:
        try:
            parsed = datetime.datetime.fromisoformat(value)
        except ValueError:
            pass
        else:
            if parsed.tzinfo is not None:
                return parsed
    read: datetime.datetime = botocore.utils.parse_timestamp(value)
    return read


def botocore_session(*, operations: Mapping[str, frozenset[str]] | None = None) -> botocore.session.Session:
    """A botocore session whose loader reads its files with `CompactFileLoader(operations)` and whose responses'
    timestamps are read by `timestamp`."""
    core = botocore.session.get_session()
    core.get_component("data_loader").file_loader = CompactFileLoader(operations)
    core.get_component("response_parser_factory").set_parser_defaults(timestamp_parser=timestamp)
    return core


def session(region: str, *, operations: Mapping[str, frozenset[str]] | None = None) -> boto3.session.Session:
    """A boto3 session for `region` on `botocore_session(operations=operations)`. Build every client of a process
    from one: a session loads each model, and botocore's endpoint data, once for all its clients. The controller
    passes `models.CALLED`; tests and tools that call other operations pass nothing."""
    return boto3.session.Session(botocore_session=botocore_session(operations=operations), region_name=region)
