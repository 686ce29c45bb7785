"""The extractor as the stage uses it: checked when a manager is configured
(:func:`extractor_of`), then asked in a thread of its own with a timeout, its answer checked
whole (:class:`Asker`). A call that hangs cannot be stopped (Python threads cannot be): no
other call is made beside it until it ends."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from ..errors import InvalidInput, shown
from .rules import RuleExtractor
from .types import Extraction, ExtractionBatch, Rejected, extraction_of, extractor_identity

__all__ = ["QUIET_SECONDS", "TIMEOUT", "WINDOW", "Asker", "Hung", "Stopping", "extractor_of"]

#: turns per batch when the extractor does not say (``window``)
WINDOW = 6
#: seconds an extractor may take per batch when it does not say (``timeout``)
TIMEOUT = 60.0
#: a window that is not full is extracted once its session was quiet this long (seconds)
QUIET_SECONDS = 30.0

_ACCEPTED = (
    'None, "rules" (the offline RuleExtractor), an LLMExtractor, or any callable '
    "batch -> Extraction (memlane.extraction)"
)


def extractor_of(value: Any) -> Callable[[ExtractionBatch], Any] | None:
    """``SessionManager(extractor=...)`` checked: the extractor, or None."""
    if value is None:
        return None
    if isinstance(value, str):
        if value == "rules":
            return RuleExtractor()
        raise InvalidInput(f"Unknown extractor {shown(value)}; extractor= accepts {_ACCEPTED}.")
    if not callable(value):
        raise InvalidInput(
            f"extractor must be callable, got {type(value).__name__}; extractor= accepts "
            f"{_ACCEPTED}."
        )
    window = getattr(value, "window", WINDOW)
    if isinstance(window, bool) or not isinstance(window, int) or not 1 <= window <= 200:
        raise InvalidInput(f"The extractor's window must be 1 to 200 turns, got {shown(window)}.")
    for name, default in (("timeout", TIMEOUT), ("quiet_seconds", QUIET_SECONDS)):
        seconds = getattr(value, name, default)
        if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not seconds >= 0:
            raise InvalidInput(f"The extractor's {name} must be seconds, got {shown(seconds)}.")
        if name == "timeout" and not seconds > 0:
            raise InvalidInput("The extractor's timeout must be more than 0 seconds.")
    return value  # type: ignore[no-any-return]


class Stopping(Exception):
    """The manager closes: the batch in progress is abandoned (nothing written)."""


class Hung(Exception):
    """The extractor did not answer within its timeout."""


class Asker:
    """Asks one extractor (checked by :func:`extractor_of`) about batches: its name and
    version, its settings (or the defaults), the tokens it reported, and the call that
    hangs, if one does."""

    def __init__(self, extractor: Callable[[ExtractionBatch], Any]) -> None:
        self.extractor = extractor
        self.name, self.version = extractor_identity(extractor)
        self.window = int(getattr(extractor, "window", WINDOW))
        self.quiet_seconds = float(getattr(extractor, "quiet_seconds", QUIET_SECONDS))
        # (an extractor that times out its own requests says how long a whole call may take)
        limit: Any = getattr(extractor, "call_timeout", None)
        self.timeout = float(limit or getattr(extractor, "timeout", TIMEOUT))
        self.tokens = 0
        self._hung: threading.Thread | None = None

    @property
    def hanging(self) -> bool:
        """Whether a call that timed out is still running (no other is made meanwhile)."""
        return self._hung is not None and self._hung.is_alive()

    def ask(self, batch: ExtractionBatch, stop: threading.Event) -> Extraction:
        """The extractor's answer, checked; :class:`Rejected` (it raised, or answered
        something unusable), :class:`Hung` (no answer within the timeout) or
        :class:`Stopping` (``stop`` was set meanwhile) if none."""
        box: dict[str, Any] = {}

        def call() -> None:
            try:
                box["answer"] = self.extractor(batch)
            except BaseException as exc:  # (reported below, in the pass's thread)
                box["error"] = exc

        thread = threading.Thread(target=call, name="memlane-extractor", daemon=True)
        thread.start()
        deadline = time.monotonic() + self.timeout
        while thread.is_alive() and time.monotonic() < deadline and not stop.is_set():
            thread.join(min(0.1, max(0.0, deadline - time.monotonic())))
        if thread.is_alive() and stop.is_set():
            raise Stopping
        if thread.is_alive():
            self._hung = thread  # no other call until it ends (a thread cannot be stopped)
            raise Hung(f"the extractor {self.name!r} did not answer within {self.timeout:g} s")
        if "error" in box:
            exc = box["error"]
            tokens = getattr(exc, "tokens", 0)
            if isinstance(tokens, int):
                self.tokens += tokens
            failed = Rejected(f"the extractor {self.name!r} raised {type(exc).__name__}: {exc}")
            failed.tokens = tokens if isinstance(tokens, int) else 0  # type: ignore[attr-defined]
            raise failed
        try:
            extraction = extraction_of(box.get("answer"), batch)
        except Rejected as exc:
            why = f"the extractor {self.name!r} answered something unusable: {exc}"
            raise Rejected(why) from None
        self.tokens += extraction.tokens
        return extraction
