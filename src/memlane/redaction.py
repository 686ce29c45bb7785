"""Redaction at write: what a :class:`Redactor` finds never reaches the store.

``SessionManager(..., redactor="default")`` (or any :class:`Redactor`) runs inside the single
write path over an event's content, tags, every value of its metadata and every string leaf
of its payload (keys are kept, so the JSON stays valid; an integer of 7 or more digits is
checked as text too), a session's goal and metadata, a user fact, a knowledge document. What it
finds becomes a placeholder such as ``[EMAIL_1]``, numbered within one record so that the same
value is the same placeholder wherever it appears in it; the event's metadata keeps how many
distinct values of each kind were replaced (``asm_redacted``), never the values.

:class:`PiiRedactor`, the built-in one, is offline and conservative: each detector finds
candidates by pattern and keeps only those that pass a real check —

- ``EMAIL`` addresses (a dot-separated domain with a letter TLD);
- ``CARD`` payment card numbers of 13 to 19 digits (spaces or dashes allowed) that pass the Luhn
  check and start like a card network's numbers;
- ``IBAN`` account numbers whose mod-97 check is 1;
- ``IP`` addresses, v4 and v6, parsed by :mod:`ipaddress` (not guessed);
- ``SSN`` US social security numbers written ``123-45-6789``, without the numbers that are
  never issued (area 000, 666, 9xx; group 00; serial 0000);
- ``PHONE`` numbers in international form (``+49 30 901820``) or the North American one
  (``(415) 555-2671``), valid by Google's libphonenumber (``phonenumberslite``);
- ``API_KEY`` keys with a vendor prefix (OpenAI, Anthropic, GitHub, GitLab, Slack, AWS,
  Google, Stripe, Hugging Face, npm) and ``JWT`` tokens whose header decodes to JSON with an
  ``alg``.

Person names are **not** redacted: telling a name from a word needs a model, and removing the
names of the people an agent works with destroys the memory it exists to keep. An adapter for
a heavier detector (e.g. Microsoft Presidio) is a :class:`Redactor`: any callable from text to
a :class:`Redaction`. A redactor that raises, or returns spans that do not fit the text, makes
the write fail with :class:`~memlane.errors.RedactionFailed`: nothing is stored.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from .errors import InvalidInput

__all__ = ["LABELS", "PiiRedactor", "Redaction", "Redactor", "Span", "redactor_of"]


@dataclass(frozen=True)
class Span:
    """``text[start:end]`` is a value of kind ``label`` (upper case: ``EMAIL``, ``CARD``)."""

    start: int
    end: int
    label: str


@dataclass(frozen=True)
class Redaction:
    """What a redactor found in a text: the spans (over the text it was given, in order,
    not overlapping) and the text with each replaced by ``[LABEL]``. The write path numbers
    the placeholders itself, from the spans."""

    text: str
    spans: tuple[Span, ...]


@runtime_checkable
class Redactor(Protocol):
    """Any callable from a text to the :class:`Redaction` of it."""

    def __call__(self, text: str) -> Redaction: ...


def apply(text: str, spans: Iterable[Span]) -> Redaction:
    """``text`` with each span replaced by ``[LABEL]``.

    >>> apply("mail a@b.io now", [Span(5, 11, "EMAIL")]).text
    'mail [EMAIL] now'
    """
    ordered = tuple(spans)
    parts, at = [], 0
    for span in ordered:
        parts += [text[at : span.start], f"[{span.label}]"]
        at = span.end
    parts.append(text[at:])
    return Redaction("".join(parts), ordered)


# -- validators -------------------------------------------------------------------------


def _digits(value: str) -> str:
    return "".join(ch for ch in value if ch.isdigit())


def luhn(number: str) -> bool:
    """The Luhn checksum of a card number.

    >>> luhn("4111 1111 1111 1111"), luhn("4111 1111 1111 1112")
    (True, False)
    """
    digits = [int(ch) for ch in _digits(number)]
    total = 0
    for position, digit in enumerate(reversed(digits)):
        if position % 2:
            digit *= 2
            if digit > 9:
                digit -= 9
        total += digit
    return bool(digits) and total % 10 == 0


# The first digits card networks issue (Visa, Mastercard, Amex, Discover, JCB, Diners,
# UnionPay, Maestro): a 16-digit number that merely passes Luhn (one in ten do) is not enough.
_CARD_PREFIX = re.compile(r"^(?:4|5[1-5]|2[2-7]|3[47]|3[0689]|35|6011|64[4-9]|65|62|5[06-9]|6)")


def _card(value: str) -> bool:
    digits = _digits(value)
    return 13 <= len(digits) <= 19 and bool(_CARD_PREFIX.match(digits)) and luhn(digits)


def iban_ok(value: str) -> bool:
    """The ISO 13616 mod-97 check.

    >>> iban_ok("DE89 3704 0044 0532 0130 00"), iban_ok("DE88 3704 0044 0532 0130 00")
    (True, False)
    """
    compact = value.replace(" ", "").upper()
    if not 15 <= len(compact) <= 34 or not compact.isalnum():
        return False
    moved = compact[4:] + compact[:4]
    number = "".join(str(int(ch, 36)) for ch in moved)
    return int(number) % 97 == 1


def _ip(value: str) -> bool:
    """A valid address; an IPv6 one needs three groups and a digit, so that C++'s ``a::b``
    or a word pair joined by ``::`` is not one (``::1``, loopback, is nobody's data)."""
    try:
        address = ipaddress.ip_address(value)
    except ValueError:
        return False
    if address.version == 6:
        groups = [group for group in value.split("%", 1)[0].split(":") if group]
        return len(groups) >= 3 and any(ch.isdigit() for ch in value)
    return True


def _ssn(value: str) -> bool:
    area, group, serial = value[:3], value[4:6], value[7:]
    return (
        area not in ("000", "666")
        and not area.startswith("9")
        and group != "00"
        and serial != "0000"
    )


def _jwt(value: str) -> bool:
    header = value.split(".", 1)[0]
    try:
        decoded = json.loads(base64.urlsafe_b64decode(header + "=" * (-len(header) % 4)))
    except (binascii.Error, ValueError):
        return False
    return isinstance(decoded, dict) and "alg" in decoded


class _Phones:
    """Phone numbers validated by libphonenumber (loaded on first use)."""

    def __init__(self, region: str) -> None:
        self.region = region

    def __call__(self, value: str) -> bool:
        import phonenumbers

        try:
            number = phonenumbers.parse(value, None if value.startswith("+") else self.region)
        except phonenumbers.NumberParseException:
            return False
        return bool(phonenumbers.is_valid_number(number))


# -- the detectors ------------------------------------------------------------------------

_BOUNDARY_BEFORE = r"(?<![\w.+-])"
_BOUNDARY_AFTER = r"(?![\w-])"
_API_KEYS = "|".join(
    (
        r"sk-ant-[A-Za-z0-9_-]{20,}",  # Anthropic
        r"sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}",  # OpenAI
        r"gh[pousr]_[A-Za-z0-9]{36,}",  # GitHub tokens
        r"github_pat_[A-Za-z0-9_]{22,}",
        r"glpat-[A-Za-z0-9_-]{20,}",  # GitLab
        r"xox[abposr]-[A-Za-z0-9-]{10,}",  # Slack
        r"(?:AKIA|ASIA)[0-9A-Z]{16}",  # AWS access key ids
        r"AIza[0-9A-Za-z_-]{35}",  # Google
        r"(?:sk|pk|rk)_(?:live|test)_[0-9A-Za-z]{16,}",  # Stripe
        r"hf_[A-Za-z0-9]{30,}",  # Hugging Face
        r"npm_[A-Za-z0-9]{36}",  # npm
    )
)
_PATTERNS: dict[str, str] = {
    "JWT": r"eyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{10,}",
    "API_KEY": rf"(?<![A-Za-z0-9_-])(?:{_API_KEYS})(?![A-Za-z0-9_-])",
    "EMAIL": r"(?<![\w.%+-])[A-Za-z0-9._%+-]{1,64}@(?:[A-Za-z0-9-]{1,63}\.)+[A-Za-z]{2,24}"
    r"(?![\w-])",
    "IBAN": rf"{_BOUNDARY_BEFORE}[A-Z]{{2}}\d{{2}}(?: ?[A-Z0-9]){{11,30}}{_BOUNDARY_AFTER}",
    "CARD": rf"{_BOUNDARY_BEFORE}\d(?:[ -]?\d){{12,18}}{_BOUNDARY_AFTER}",
    "SSN": rf"{_BOUNDARY_BEFORE}\d{{3}}-\d{{2}}-\d{{4}}{_BOUNDARY_AFTER}",
    "IP": r"(?<![\w.:])(?:(?:\d{1,3}\.){3}\d{1,3}|(?:[0-9A-Fa-f]{0,4}:){2,7}[0-9A-Fa-f]{0,4}"
    r"(?:%\w+)?)(?![\w:]|\.\w)",
    "PHONE": rf"{_BOUNDARY_BEFORE}(?:\+\d[\d ().-]{{6,20}}\d"
    rf"|\(?\d{{3}}\)?[ .-]?\d{{3}}[ .-]\d{{4}}){_BOUNDARY_AFTER}",
}
#: the kinds :class:`PiiRedactor` finds, in the order they claim overlapping text
LABELS = tuple(_PATTERNS)


class PiiRedactor:
    """The built-in offline redactor (see the module docstring); ``kinds`` narrows it to
    some of :data:`LABELS`; ``phone_region`` reads numbers without a ``+`` (ISO 3166 code).

    >>> PiiRedactor()("write to ada@example.org or +44 20 7946 0958").text
    'write to [EMAIL] or [PHONE]'
    """

    def __init__(self, kinds: Iterable[str] | None = None, *, phone_region: str = "US") -> None:
        wanted = LABELS if kinds is None else tuple(kinds)
        unknown = sorted(set(wanted) - set(LABELS))
        if unknown:
            raise InvalidInput(f"Unknown kinds {unknown}; choose from {', '.join(LABELS)}.")
        checks: dict[str, Callable[[str], bool] | None] = {
            "JWT": _jwt,
            "API_KEY": None,
            "EMAIL": None,
            "IBAN": iban_ok,
            "CARD": _card,
            "SSN": _ssn,
            "IP": _ip,
            "PHONE": _Phones(phone_region),
        }
        self._detectors = [
            (label, re.compile(_PATTERNS[label]), checks[label])
            for label in LABELS
            if label in wanted
        ]

    def __call__(self, text: str) -> Redaction:
        found: list[Span] = []
        for label, pattern, check in self._detectors:
            for match in pattern.finditer(text):
                value = match.group()
                if check is None or check(value):
                    found.append(Span(match.start(), match.end(), label))
        if not found:
            return Redaction(text, ())
        # overlapping finds: the earlier detector (LABELS' order), then the longer, wins
        rank = {label: n for n, label in enumerate(LABELS)}
        found.sort(key=lambda s: (rank[s.label], -(s.end - s.start), s.start))
        kept: list[Span] = []
        for span in found:
            if all(span.end <= other.start or span.start >= other.end for other in kept):
                kept.append(span)
        return apply(text, sorted(kept, key=lambda s: s.start))


def redactor_of(spec: object) -> Redactor | None:
    """The redactor ``SessionManager(redactor=...)`` names: None, ``"default"`` (a
    :class:`PiiRedactor`), or a callable :class:`Redactor`."""
    if spec is None or (callable(spec) and not isinstance(spec, str | type)):
        return spec
    if spec == "default":
        return PiiRedactor()
    raise InvalidInput(
        f"redactor must be None, 'default' or a callable (text) -> Redaction, got {spec!r}."
    )
