"""Numbers drawn from their inputs, the same in every process.

Every "random" figure of the sandbox is a pure function of a few labelled parts (a salt
naming what is drawn, then the postcode, sector, month, ...): the parts are joined into
a string, hashed with BLAKE2b and the first 8 bytes read as a fraction in [0, 1).
Python's `hash()` would do the same job faster but is salted per process
(PYTHONHASHSEED), so a sandbox restarted between two runs would change its answers.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from collections.abc import Sequence

_T = TypeVar("_T")

Part = str | int


def fraction(*parts: Part) -> float:
    """A number in [0, 1), fixed by `parts`."""
    # The unit separator cannot occur in postcodes or labels, so ("a", "bc") and
    # ("ab", "c") hash differently.
    key = "\x1f".join(str(part) for part in parts).encode()
    digest = hashlib.blake2b(key, digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


def between(low: float, high: float, *parts: Part) -> float:
    """A number in [low, high), fixed by `parts`."""
    return low + (high - low) * fraction(*parts)


def integer(low: int, high: int, *parts: Part) -> int:
    """An integer in [low, high], both ends included, fixed by `parts`."""
    return low + int(fraction(*parts) * (high - low + 1))


def pick(options: Sequence[_T], *parts: Part) -> _T:
    """One of `options`, fixed by `parts`."""
    return options[int(fraction(*parts) * len(options))]


def chance(share: float, *parts: Part) -> bool:
    """True for about `share` of all possible `parts`."""
    return fraction(*parts) < share
