"""One record's redaction (``redaction.py``): every text of the record through the redactor,
placeholders numbered across the record, the redactor's answer checked (fail closed).

Not part of the public API.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ..errors import RedactionFailed
from ..redaction import Redaction, Redactor, Span

__all__ = ["COUNTS_KEY", "RecordRedaction"]

#: the metadata key holding how many distinct values of each kind a record had replaced
COUNTS_KEY = "asm_redacted"

_LABEL = re.compile(r"[A-Z][A-Z0-9_]{0,31}")
_SEPARATORS = re.compile(r"[\s().-]")
#: kinds whose values are numbers however they are grouped
_NUMBERS = frozenset({"CARD", "IBAN", "PHONE", "SSN"})
#: integers this long may be phone or card numbers written as JSON numbers
_NUMBER_DIGITS = 7


class RecordRedaction:
    """Redacts the texts of one record (an event, a session) with one numbering: the same
    value becomes the same placeholder (``[EMAIL_1]``) wherever it appears in the record.
    Redacting a text twice gives the same result and counts nothing twice."""

    def __init__(self, redactor: Redactor) -> None:
        self.redactor = redactor
        self._numbers: dict[tuple[str, str], int] = {}
        self._next: dict[str, int] = {}

    @property
    def counts(self) -> dict[str, int]:
        """Distinct values replaced so far, by kind."""
        return dict(sorted(self._next.items()))

    def text(self, value: str) -> str:
        found = self._ask(value)
        if not found:
            return value
        parts, at = [], 0
        for span in found:
            # one value however it is written: "4111 1111 1111 1111" is 4111111111111111
            original = value[span.start : span.end].casefold()
            if span.label in _NUMBERS:
                original = _SEPARATORS.sub("", original)
            number = self._numbers.get((span.label, original))
            if number is None:
                number = self._numbers[span.label, original] = self._next.get(span.label, 0) + 1
                self._next[span.label] = number
            parts += [value[at : span.start], f"[{span.label}_{number}]"]
            at = span.end
        parts.append(value[at:])
        return "".join(parts)

    def json(self, value: Any) -> Any:
        """A JSON value with every string leaf redacted (keys kept), and long integers that
        hold something to redact replaced by their placeholder text."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, Mapping):
            return {key: self.json(item) for key, item in value.items()}
        if isinstance(value, list | tuple):
            return [self.json(item) for item in value]
        if isinstance(value, int) and not isinstance(value, bool):
            written = str(value)
            if len(written.lstrip("-")) >= _NUMBER_DIGITS:
                redacted = self.text(written)
                if redacted != written:
                    return redacted
        return value

    def with_counts(self, metadata: Mapping[str, Any]) -> dict[str, Any]:
        """``metadata`` with the counts of this record's replacements (none: unchanged)."""
        return {**metadata, COUNTS_KEY: self.counts} if self._next else dict(metadata)

    def _ask(self, value: str) -> tuple[Span, ...]:
        """The redactor's spans over ``value``, checked: a failing or malformed answer stops
        the write (nothing is stored unredacted)."""
        try:
            answer = self.redactor(value)
        except Exception as exc:
            raise RedactionFailed(
                f"The redactor failed ({type(exc).__name__}: {exc}); nothing was stored. Fix "
                "the redactor, or open the manager without it to store text unredacted."
            ) from exc
        if not isinstance(answer, Redaction):
            raise RedactionFailed(
                f"The redactor returned {type(answer).__name__}, not a Redaction; nothing was "
                "stored."
            )
        at = 0
        for span in answer.spans:
            if (
                not isinstance(span, Span)
                or not isinstance(span.start, int)
                or not isinstance(span.end, int)
                or not at <= span.start < span.end <= len(value)
                or not isinstance(span.label, str)
                or not _LABEL.fullmatch(span.label)
            ):
                raise RedactionFailed(
                    f"The redactor returned a span that does not fit the text ({span!r} in "
                    f"{len(value)} characters; spans must be in order, not overlap, and carry "
                    "an upper-case label); nothing was stored."
                )
            at = span.end
        return tuple(answer.spans)
