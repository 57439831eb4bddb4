"""One file that runs on several machines may each replace: the book of `run --book`.

`read` gives the file's bytes and their version; `swap` replaces the file only if it still
holds that version, and says whether it did:

- at a URL (`s3://bucket/key`), the version is the object's ETag and `swap` is a
  compare-and-swap (`If-Match`, or `If-None-Match: *` for a file that did not exist): two
  runs that read one version and both write, on any machines, cannot both succeed: the
  loser is told, and nothing it wrote is lost in silence. The store is probed at opening,
  as a run's place is (`store/objects.ObjectStore.probe`);
- on a local path, the file is replaced atomically (a kill leaves the old one whole); two
  processes writing one local file at once are not detected (the last wins), as a local
  run's book always was: give each concurrent run its own book, or keep it at a URL.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from batchval._internal.place.files import atomic_file

if TYPE_CHECKING:
    from batchval._internal.store import ObjectStore


class VersionedFile(Protocol):
    location: str

    def read(self) -> tuple[bytes, str | None] | None:
        """The bytes and their version (None: a local file has none), or None: no file."""
        ...

    def swap(self, data: bytes, version: str | None) -> bool:
        """Replace the file with `data` if it still holds `version` (None: if it still does
        not exist); False when another writer came first."""
        ...


class LocalFile:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.location = str(path)

    def read(self) -> tuple[bytes, str | None] | None:
        with contextlib.suppress(FileNotFoundError):
            return self.path.read_bytes(), None
        return None

    def swap(self, data: bytes, version: str | None) -> bool:
        with atomic_file(self.path) as file:
            file.write(data)
        return True


class StoredFile:
    def __init__(self, objects: ObjectStore, key: str, location: str) -> None:
        self._objects = objects
        self._key = key
        self.location = location

    def read(self) -> tuple[bytes, str | None] | None:
        return self._objects.get(self._key)

    def swap(self, data: bytes, version: str | None) -> bool:
        if version is None:
            return self._objects.create(self._key, data)
        return self._objects.replace(self._key, data, version)


def versioned_file(location: str, env: Mapping[str, str]) -> VersionedFile:
    """The file at `location`: an `s3://bucket/key` or `az://container/key` URL (its store
    read from `env` as AWS's or Azure's tools read it, and probed: raises
    ObjectStoreError), or a local path."""
    from batchval._internal.place.place import is_url, local_path

    if not is_url(location):
        return LocalFile(local_path(location))
    parent, _, key = location.rstrip("/").rpartition("/")
    from batchval._internal.store import ObjectStore, ObjectStoreRefusedError

    if not key or parent.endswith(":/"):
        raise ObjectStoreRefusedError(
            location, "the URL names no object (s3://bucket/key, az://container/key)"
        )
    objects = ObjectStore.from_url(parent, env)
    objects.probe()
    return StoredFile(objects, key, location)
