"""Sortable, monotonic identifiers (ULID layout: 48-bit milliseconds + 80 random bits).

Ids made by one process sort in the order they were made, even within one millisecond
(the random part is incremented instead of redrawn). Ids from different processes sort by
time to the millisecond. Written out in Crockford base32: 26 characters, no padding.
"""

from __future__ import annotations

import os
import threading
import time

__all__ = ["new_id"]

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_RANDOM_BITS = 80
_lock = threading.Lock()
_last_ms = -1
_last_random = 0


def _encode(value: int) -> str:
    chars = []
    for _ in range(26):
        chars.append(_ALPHABET[value & 31])
        value >>= 5
    return "".join(reversed(chars))


def new_id() -> str:
    """Return a new 26-character id that sorts after every id this process made before.

    >>> a, b = new_id(), new_id()
    >>> a < b and len(a) == 26
    True
    """
    global _last_ms, _last_random
    with _lock:
        now_ms = time.time_ns() // 1_000_000
        if now_ms <= _last_ms:
            # Same millisecond (or the clock stepped back): stay monotonic by counting up.
            now_ms = _last_ms
            _last_random += 1
            if _last_random >> _RANDOM_BITS:  # 2**80 ids in one ms: move to the next ms
                now_ms += 1
                _last_random = int.from_bytes(os.urandom(10), "big") >> 1
        else:
            # Leave the top bit clear so that increments within a millisecond never overflow.
            _last_random = int.from_bytes(os.urandom(10), "big") >> 1
        _last_ms = now_ms
        return _encode((now_ms << _RANDOM_BITS) | _last_random)
