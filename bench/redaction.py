"""The built-in redactor (redaction.py) measured three ways, by hand:

    python bench/redaction.py ../shared/bench/locomo/locomo_dev.json [--planted 400]

1. **False positives**: every turn of the LoCoMo development half (real conversations, no
   personal data of the kinds it looks for) through ``PiiRedactor``; a changed turn is a
   false positive. Prints the count by kind and each changed turn.
2. **Recall** on a planted set of this script's own (seeded): ``--planted`` sentences per
   kind, each holding one valid value in one of its usual writings (cards of five networks
   with a Luhn digit, grouped by spaces, dashes or not at all; IBANs of six countries, grouped
   or compact; libphonenumber's example numbers of 20 regions, international or E.164, US ones
   also national; e-mail addresses, some upper case; ...); a value counts when a span of its
   kind covers it exactly. The set is built from the formats the detectors know, so it
   measures that they find them in running text, not what they were never taught.
3. **record() p50** with the redactor on and off, side by side in one run: 2,000 LoCoMo
   turns recorded alternately into two fresh SQLite stores (hash embedder, no worker).
"""

from __future__ import annotations

import argparse
import base64
import ipaddress
import json
import random
import statistics
import string
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from locomo import load  # noqa: E402

from memlane import SessionManager  # noqa: E402
from memlane.redaction import LABELS, PiiRedactor, luhn  # noqa: E402
from memlane.testing import HashEmbedder  # noqa: E402

_IBAN_COUNTRIES = {"DE": 18, "GB": 18, "FR": 23, "NL": 14, "ES": 20, "CH": 17}  # BBAN lengths
_CARD_PREFIXES = ["4", "51", "2221", "37", "6011"]
_PHONE_REGIONS = [
    "US", "GB", "DE", "FR", "IN", "BR", "JP", "AU", "CA", "MX",
    "ES", "IT", "NL", "SE", "CH", "ZA", "NG", "KR", "SG", "AR",
]  # fmt: skip
_KEY_FORMS = [
    ("sk-proj-", string.ascii_letters + string.digits, 40),
    ("sk-ant-api03-", string.ascii_letters + string.digits, 40),
    ("ghp_", string.ascii_letters + string.digits, 36),
    ("glpat-", string.ascii_letters + string.digits, 20),
    ("xoxb-", string.digits + "-", 30),
    ("AKIA", string.ascii_uppercase + string.digits, 16),
    ("AIza", string.ascii_letters + string.digits, 35),
    ("sk_live_", string.ascii_letters + string.digits, 24),
    ("hf_", string.ascii_letters, 34),
]
_FRAMES = [
    "please note {} for later",
    "the value was {}.",
    "({}) came up in the logs",
    "Contact: {}",
]


def _card(rng: random.Random) -> str:
    prefix = rng.choice(_CARD_PREFIXES)
    length = 15 if prefix == "37" else 16
    body = prefix + "".join(rng.choice(string.digits) for _ in range(length - len(prefix) - 1))
    check = next(d for d in string.digits if luhn(body + d))
    number = body + check
    return rng.choice([" ", "-", ""]).join(number[i : i + 4] for i in range(0, len(number), 4))


def _iban(rng: random.Random) -> str:
    country = rng.choice(list(_IBAN_COUNTRIES))
    bban = "".join(rng.choice(string.digits) for _ in range(_IBAN_COUNTRIES[country]))
    moved = bban + country + "00"
    check = 98 - int("".join(str(int(ch, 36)) for ch in moved)) % 97
    iban = f"{country}{check:02d}{bban}"
    return rng.choice([" ", ""]).join(iban[i : i + 4] for i in range(0, len(iban), 4))


def _phone(rng: random.Random) -> str:
    import phonenumbers

    region = rng.choice(_PHONE_REGIONS)
    number = phonenumbers.example_number(region)
    form = phonenumbers.PhoneNumberFormat
    formats = [form.INTERNATIONAL, form.E164] + ([form.NATIONAL] if region == "US" else [])
    return phonenumbers.format_number(number, rng.choice(formats))


def _ssn(rng: random.Random) -> str:
    area = rng.choice([n for n in range(1, 900) if n != 666])
    return f"{area:03d}-{rng.randint(1, 99):02d}-{rng.randint(1, 9999):04d}"


def _ip(rng: random.Random) -> str:
    if rng.random() < 0.5:
        return str(ipaddress.IPv4Address(rng.randint(1 << 24, (223 << 24) - 1)))
    return str(ipaddress.IPv6Address(rng.getrandbits(128) | (0x2001 << 112)))


def _key(rng: random.Random) -> str:
    prefix, alphabet, length = rng.choice(_KEY_FORMS)
    return prefix + "".join(rng.choice(alphabet) for _ in range(length))


def _jwt(rng: random.Random) -> str:
    def part(value: object) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")

    signature = "".join(rng.choice(string.ascii_letters + string.digits + "-_") for _ in range(43))
    return (
        f"{part({'alg': 'HS256', 'typ': 'JWT'})}.{part({'sub': rng.randint(1, 10**9)})}.{signature}"
    )


def _email(rng: random.Random) -> str:
    user = "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(3, 10)))
    domain = "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(3, 8)))
    email = f"{user}.{rng.randint(1, 99)}@{domain}.{rng.choice(['com', 'org', 'co.uk', 'io'])}"
    return email.upper() if rng.random() < 0.2 else email


_MAKERS: dict[str, Callable[[random.Random], str]] = {
    "EMAIL": _email,
    "CARD": _card,
    "IBAN": _iban,
    "IP": _ip,
    "SSN": _ssn,
    "PHONE": _phone,
    "API_KEY": _key,
    "JWT": _jwt,
}


def false_positives(turns: list[str], redactor: PiiRedactor) -> None:
    changed: Counter[str] = Counter()
    examples = []
    for text in turns:
        found = redactor(text)
        if found.spans:
            changed.update(span.label for span in found.spans)
            examples.append((text, found.text))
    print(f"LoCoMo dev turns: {len(turns):,}; changed: {len(examples)} "
          f"({len(examples) / len(turns):.3%}); by kind: {dict(changed)}")  # fmt: skip
    for before, after in examples:
        print(f"  - {before!r}\n    → {after!r}")


def recall(per_kind: int, redactor: PiiRedactor) -> None:
    rng = random.Random(13)
    print("| kind | planted | found | recall |")
    print("|---|---|---|---|")
    for label in LABELS:
        hit = 0
        for _ in range(per_kind):
            value = _MAKERS[label](rng)
            text = rng.choice(_FRAMES).format(value)
            start = text.index(value)
            spans = redactor(text).spans
            if any(
                s.label == label and (s.start, s.end) == (start, start + len(value)) for s in spans
            ):
                hit += 1
        print(f"| {label} | {per_kind} | {hit} | {hit / per_kind:.3f} |")


def record_latency(turns: list[str], count: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        options = {"embedder": HashEmbedder(), "background": False}
        off = SessionManager("bench", Path(folder) / "off.db", **options)  # type: ignore[arg-type]
        on = SessionManager("bench", Path(folder) / "on.db", redactor="default", **options)  # type: ignore[arg-type]
        sessions = {id(m): m.start_session("bench").id for m in (off, on)}
        for mgr in (off, on):  # warm: tokenizer, phonenumbers metadata
            mgr.add_message(sessions[id(mgr)], "user", "warm up +44 20 7946 0958")
        times: dict[str, list[float]] = {"off": [], "on": []}
        for text in turns[:count]:
            for name, mgr in (("off", off), ("on", on)):
                started = time.perf_counter()
                mgr.add_message(sessions[id(mgr)], "user", text)
                times[name].append((time.perf_counter() - started) * 1000)
        off.close()
        on.close()
    p50 = {name: statistics.median(values) for name, values in times.items()}
    off, on = p50["off"], p50["on"]
    print(
        f"add_message p50: off {off:.3f} ms, on {on:.3f} ms "
        f"(+{on - off:.3f} ms, {on / off:.2f}×), {count} turns each"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("locomo", type=Path)
    parser.add_argument("--planted", type=int, default=400)
    parser.add_argument("--records", type=int, default=2000)
    args = parser.parse_args()
    conversations, _ = load(args.locomo)
    turns = [turn.text for conv in conversations for turn in conv.turns]
    redactor = PiiRedactor()
    false_positives(turns, redactor)
    recall(args.planted, redactor)
    record_latency(turns, args.records)


if __name__ == "__main__":
    main()
