"""The digests of large events, made off the caller's path.

``record()`` of an event larger than :data:`~memlane.records.validate.DIGEST_INLINE_CHARS`
stores it with a token count estimated from a sample of its text, no payload preview, and a
keyword-index row of its first 32,768 characters only, and marks it ``deferred`` (so does a
flattened JSON output whose whole text is longer than its content: ``core/searchable.py``). The
background worker (and ``flush()``) then digests it here: the exact count under the
manager's model, the preview restore reads instead of the payload, and the whole text the
store's keyword index holds. Until then every read is still correct: restore reads the
payload itself, the in-memory keyword ranking reads the row, and the token count is an
estimate. Not part of the public API.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from ..core import canonical_json
from ..core.searchable import needs_whole_text, searchable_text
from ..store.base import DeferredEvent, Outbox
from ..text.shrink import payload_digest

__all__ = ["digest_deferred"]

log = logging.getLogger("memlane.deferred")

#: events digested per call: a few megabytes of work at most between two embedding batches
BATCH = 4


def digest_deferred(store: Outbox, count: Callable[[str], int], limit: int = BATCH) -> int:
    """Digest up to ``limit`` deferred events, each in its own short transaction (the slow
    part runs before it); return how many were found."""
    found = store.deferred_events(limit)
    for event in found:
        try:
            tokens, preview, text = _digest(event, count)
        except Exception as exc:  # (a user's token counter that fails, say) never a poison row
            log.warning("event %s digested without its exact count or preview: %s", event.seq, exc)
            size = len(event.content) + len(event.payload_json or "")
            tokens, preview, text = size // 4 + 1, None, event.content if event.indexed else None
        with store.atomic() as tx:
            store.finish_deferred(tx, event.seq, tokens, preview, text)
    return len(found)


def _digest(
    event: DeferredEvent, count: Callable[[str], int]
) -> tuple[int, str | None, str | None]:
    payload_json = event.payload_json
    tokens = count(event.content) + (0 if payload_json is None else count(payload_json))
    _, preview = payload_digest(payload_json)
    if not event.indexed:
        return tokens, preview, None
    derived = canonical_json.loads(event.metadata_json).get("derived_content") is True
    if not needs_whole_text(event.content, derived) or payload_json is None:
        return tokens, preview, event.content
    return (
        tokens,
        preview,
        searchable_text(event.content, canonical_json.loads(payload_json), derived),
    )
