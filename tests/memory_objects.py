"""An object store in memory that honours create-only and compare-and-swap writes, as
S3 does them, for the tests of the store's object-storage pieces."""

from __future__ import annotations

import hashlib
import threading
import time
from typing import BinaryIO


class MemoryObjects:
    """Create-only and compare-and-swap, as S3 does them (etag: a hash of the bytes)."""

    def __init__(self) -> None:
        self.objects: dict[str, bytes] = {}
        self.written: dict[str, float] = {}  # when each key was last written (monotonic)
        self._lock = threading.Lock()

    def get(self, key: str) -> tuple[bytes, str] | None:
        with self._lock:
            data = self.objects.get(key)
        return None if data is None else (data, hashlib.md5(data).hexdigest())

    def read_into(self, key: str, out: BinaryIO) -> int | None:
        with self._lock:
            data = self.objects.get(key)
        if data is None:
            return None
        out.write(data)
        return len(data)

    def create(self, key: str, data: bytes) -> bool:
        with self._lock:
            if key in self.objects:
                return False
            self.objects[key] = data
            self.written[key] = time.monotonic()
            return True

    def replace(self, key: str, data: bytes, etag: str) -> bool:
        with self._lock:
            held = self.objects.get(key)
            if held is None or hashlib.md5(held).hexdigest() != etag:
                return False
            self.objects[key] = data
            self.written[key] = time.monotonic()
            return True

    def write_if(self, key: str, data: bytes, etag: str | None) -> str | None:
        written = self.create(key, data) if etag is None else self.replace(key, data, etag)
        return hashlib.md5(data).hexdigest() if written else None

    def list(self, prefix: str) -> list[str]:
        with self._lock:
            return sorted(k for k in self.objects if k.startswith(prefix))

    def put(self, key: str, data: bytes) -> None:
        with self._lock:
            self.objects[key] = data
            self.written[key] = time.monotonic()

    def age(self, key: str) -> float | None:
        with self._lock:
            written = self.written.get(key) if key in self.objects else None
        return None if written is None else time.monotonic() - written

    def copy(self, source: str, target: str) -> None:
        with self._lock:
            if source not in self.objects:
                raise FileNotFoundError(source)
            self.objects[target] = self.objects[source]
            self.written[target] = time.monotonic()

    def delete(self, key: str) -> None:
        with self._lock:
            self.objects.pop(key, None)

    def probe(self) -> None:
        """It honours both conditions."""
