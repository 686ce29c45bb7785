"""The data of bench/long_events.py: sessions of long events, each question with the events
that answer it and the text (a span) that shows the answer.

Two sources, both deterministic:

- :func:`joined_locomo`: a LoCoMo conversation's turns, in order, joined into long messages of
  300-2,000 o200k tokens (target sizes drawn log-uniformly from a seeded generator; a message
  takes whole turns while they fit its target, so the last one of a conversation can be
  shorter), roles alternating user / assistant, each message's content the ``"Speaker:
  text"`` lines joined by newlines, dated by its first turn's LoCoMo session. A question's
  answering messages are those holding one of its gold turns, and its spans are those turns'
  lines.
- :func:`generated_runs`: agent runs made up here from a seed, nothing copied. An agent works
  on a task and records long tool outputs (JSON API responses, application logs, stack traces,
  file listings, CSV tables), long assistant messages (prose and code blocks), short user
  turns and steps. Facts are planted at random depths of some of those events (a log line, a
  JSON field, a CSV row, a setting in a code block, a frame of a traceback, a line of a
  listing, a sentence of prose) and each gets a question from templates, some paraphrased
  (the question shares few words with the fact). A fact is kept only if its span occurs
  exactly once in the whole session, in the event it was planted in.

Nothing here calls memlane: :mod:`long_events` records the items through the public API.
"""

from __future__ import annotations

import json
import math
import random
import string
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from typing import Any

from locomo import CATEGORIES
from long_events_words import (
    ADJECTIVES,
    CARRIERS,
    CAUSES,
    CITIES,
    COMPANY_KINDS,
    CURRENCIES,
    DATABASES,
    DECISIONS,
    FACTS,
    FIRST_NAMES,
    FUNCS,
    GOALS,
    HOST_KINDS,
    INVOICE_STATUSES,
    ITEM_WEIGHTS,
    LAST_NAMES,
    LEVELS,
    MISSING_FIELDS,
    MODULES,
    MONTH_NAMES,
    MONTHS,
    NOUNS,
    PATHS,
    PROSE,
    QUESTIONS,
    REGIONS,
    SERVICES,
    SETTINGS,
    SHIP_STATUSES,
    STEPS,
    SYLLABLES,
    TABLES,
    THINGS,
    TOOLS,
    TOPICS,
    USER_TURNS,
    WAREHOUSES,
)

__all__ = [
    "Item",
    "LongSession",
    "Probe",
    "generated_runs",
    "joined_locomo",
    "render",
]

# -- the data model --------------------------------------------------------------------------


@dataclass
class Item:
    """One event to record. ``kind``: ``message`` (``role`` user / assistant), ``tool_output``
    (``content`` a string, or a JSON value recorded as the output's payload) or ``step``."""

    kind: str
    content: Any
    created_at: datetime
    role: str | None = None
    tool: str | None = None


@dataclass
class Probe:
    """A question; ``spans`` maps each answering item (its index in the session) to the
    texts in it that show the answer."""

    text: str
    category: str
    spans: dict[int, tuple[str, ...]]
    depth: int  # characters before the first span in its item's rendered text
    paraphrased: bool = False
    fact: str = ""  # the generated fact's kind (generated runs)


@dataclass
class LongSession:
    name: str
    goal: str
    items: list[Item]
    probes: list[Probe] = field(default_factory=list)
    dropped: int = 0  # planted facts left without a question (their span was not unique)


def render(item: Item) -> str:
    """An item's text as a reader sees it whole: the string, or a JSON output compact with
    sorted keys (restore shows payloads so)."""
    if isinstance(item.content, str):
        return item.content
    return json.dumps(item.content, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


# -- LoCoMo joined -----------------------------------------------------------------------------


def joined_locomo(
    conversation: Any,
    count: Callable[[str], int],
    rng: random.Random,
    sizes: tuple[int, int] = (300, 2000),
    short_share: float = 0.0,
) -> LongSession:
    """One LoCoMo conversation (bench/locomo.py's ``Conversation``) as one session of long
    messages; its questions become probes (category: LoCoMo's name). With ``short_share``,
    that share of the blocks (drawn one by one) stays as LoCoMo's single turns, a message
    each (role by speaker: the first one's ``user``), so that short turns and long messages
    mix in one session."""
    low, high = sizes
    items: list[Item] = []
    where: dict[str, int] = {}  # dia_id -> the item holding it
    lines: list[str] = []
    speakers: list[str] = []
    used = 0
    target = _log_uniform(rng, low, high)
    short = short_share > 0 and rng.random() < short_share  # (no draw without: same data)
    first_date: datetime | None = None
    dates: list[datetime] = []

    def close() -> None:
        nonlocal lines, speakers, dates, used, target, first_date, short
        if lines and short:
            for line, speaker, when in zip(lines, speakers, dates, strict=True):
                role = "user" if speaker == conversation.speakers[0] else "assistant"
                items.append(Item("message", line, when, role=role))
        elif lines:
            assert first_date is not None
            role = "user" if len(items) % 2 == 0 else "assistant"
            items.append(Item("message", "\n".join(lines), first_date, role=role))
        lines, speakers, dates, used, first_date = [], [], [], 0, None
        target = _log_uniform(rng, low, high)
        short = short_share > 0 and rng.random() < short_share

    for part in conversation.sessions:
        for turn in part.turns:
            cost = count(turn.content) + 1  # + the newline joining it
            if lines and used + cost > target:
                close()
            if first_date is None:
                first_date = part.date
            lines.append(turn.content)
            speakers.append(turn.speaker)
            dates.append(part.date)
            used += cost
            where[turn.dia_id] = len(items) + (len(lines) - 1 if short else 0)
    close()
    turns = {turn.dia_id: turn.content for turn in conversation.turns}
    probes = []
    for question in conversation.questions:
        spans: dict[int, list[str]] = {}
        for dia_id in sorted(question.gold):
            spans.setdefault(where[dia_id], []).append(turns[dia_id])
        depth = min(render(items[i]).find(s) for i, ss in spans.items() for s in ss)
        probes.append(
            Probe(
                question.text,
                CATEGORIES[question.category],
                {i: tuple(ss) for i, ss in spans.items()},
                depth,
            )
        )
    goal = f"Conversation between {conversation.speakers[0]} and {conversation.speakers[1]}"
    return LongSession(conversation.sample_id, goal, items, probes)


def one_session(sessions: Sequence[LongSession], name: str = "one-session") -> LongSession:
    """``sessions`` as one session, one after the other: each one's times moved to begin a
    day after the previous one ends (so the log stays in time order), its probes' items
    renumbered. A LoCoMo conversation joined is ~16k tokens, so that at 8k tokens restore
    chooses among half of it; an agent's long chat is ~100k (issue 31's held-out chats:
    ~200 messages of ~550 tokens), where it chooses among a tenth. Five conversations with
    messages of ~150-1,500 tokens make one of ~80k."""
    items: list[Item] = []
    probes: list[Probe] = []
    end: datetime | None = None
    for session in sessions:
        shift = timedelta(0)
        if end is not None and session.items:
            shift = max(timedelta(0), end + timedelta(days=1) - session.items[0].created_at)
        offset = len(items)
        items += [replace(item, created_at=item.created_at + shift) for item in session.items]
        probes += [
            replace(probe, spans={offset + i: spans for i, spans in probe.spans.items()})
            for probe in session.probes
        ]
        if items:
            end = items[-1].created_at
    goal = "; ".join(session.goal for session in sessions)
    return LongSession(name, goal, items, probes)


def _log_uniform(rng: random.Random, low: int, high: int) -> int:
    return round(math.exp(rng.uniform(math.log(low), math.log(high))))


@dataclass
class Fact:
    """A fact to plant: its kind, the words its question uses, what it adds to its carrier."""

    kind: str
    words: dict[str, str]
    span: str  # the text showing the answer, exactly once in the session
    line: Any  # what is inserted: a text line, a JSON record, a CSV row
    question: str = ""
    paraphrased: bool = False


class _Run:
    """One generated session: the plan, the facts, the items' text."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.taken: set[tuple[str, str]] = set()  # (fact kind, key) pairs planted
        self.ids: set[str] = set()

    # small random pieces

    def uid(self, make: Callable[[], str]) -> str:
        """A random identifier new to this session."""
        while True:
            value = make()
            if value not in self.ids:
                self.ids.add(value)
                return value

    def digits(self, n: int) -> str:
        return "".join(self.rng.choice(string.digits) for _ in range(n))

    def hexs(self, n: int) -> str:
        return "".join(self.rng.choice("0123456789abcdef") for _ in range(n))

    def host(self) -> str:
        return f"{self.rng.choice(HOST_KINDS)}-{self.rng.randint(1, 24)}"

    def service(self) -> str:
        return self.rng.choice(list(SERVICES))

    def company(self) -> str:
        rng = self.rng
        name = "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 3))).capitalize()
        return f"{name} {rng.choice(COMPANY_KINDS)}"

    def background_company(self) -> str:
        """A company no invoice question is about."""
        while ("json_invoice", name := self.company()) in self.taken:
            pass
        return name

    def person(self) -> str:
        return f"{self.rng.choice(FIRST_NAMES)} {self.rng.choice(LAST_NAMES)}"

    def product(self) -> str:
        return f"{self.rng.choice(ADJECTIVES)} {self.rng.choice(NOUNS)}"

    def ts(self, base: datetime) -> str:
        moment = base + timedelta(milliseconds=self.rng.randint(0, 3_600_000))
        return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"

    def fill(self, template: str) -> str:
        rng = self.rng
        service = self.service()
        symptom, cause = rng.choice(CAUSES)
        return template.format(
            service=service,
            desc=SERVICES[service],
            thing=rng.choice(THINGS),
            symptom=symptom,
            cause=cause,
            hh=f"{rng.randint(0, 23):02d}",
            mm=f"{rng.randint(0, 59):02d}",
            n=rng.randint(2, 40),
            table=rng.choice(TABLES),
            region=rng.choice(REGIONS),
            host=self.host(),
        )

    # facts

    def fact(self, kind: str, base: datetime) -> Fact | None:
        """A new fact of ``kind`` (None when this session has used up its keys)."""
        rng = self.rng
        for _ in range(20):
            made = self._fact(kind, base)
            key = (kind, made.words["key"])
            if key not in self.taken:
                self.taken.add(key)
                direct, paraphrased = QUESTIONS[kind]
                made.paraphrased = rng.random() < 0.4
                template = rng.choice(paraphrased if made.paraphrased else direct)
                made.question = template.format(**made.words)
                return made
        return None

    def _fact(self, kind: str, base: datetime) -> Fact:
        rng = self.rng
        if kind == "log_timeout":
            service, host = self.service(), self.host()
            line = (
                f"{self.ts(base)} ERROR {service}[{rng.randint(100, 9999)}]: upstream call "
                f"timed out after {rng.randint(5, 120)}s on host {host} "
                f"(request_id={self.uid(lambda: self.hexs(12))})"
            )
            words = {"service": service, "desc": SERVICES[service], "key": service}
            return Fact(kind, words, line, line)
        if kind == "log_rejected":
            service, partner = self.service(), self.company()
            code = self.uid(lambda: f"E{rng.randint(1000, 9999)}")
            line = (
                f"{self.ts(base)} WARN  {service}[{rng.randint(100, 9999)}]: rejected batch "
                f"{self.uid(lambda: self.digits(7))} from {partner}: error code {code} "
                f"({rng.choice(('schema mismatch', 'quota exceeded', 'bad signature'))})"
            )
            words = {"service": service, "desc": SERVICES[service], "partner": partner}
            return Fact(kind, {**words, "key": partner}, line, line)
        if kind == "json_invoice":
            customer = self.company()
            invoice_id = self.uid(lambda: f"INV-{self.digits(5)}")
            record = self.invoice(base, customer=customer, invoice_id=invoice_id)
            record["status"] = "disputed"
            return Fact(kind, {"customer": customer, "key": customer}, invoice_id, record)
        if kind == "json_shipment":
            city = rng.choice(list(CITIES))
            number = self.uid(lambda: f"1Z{self.digits(4)}{rng.choice('ABCDEFXY')}{self.digits(7)}")
            record = self.shipment(base, city=city, number=number)
            record["status"] = "held_at_customs"
            return Fact(kind, {"city": city, "key": city}, number, record)
        if kind == "json_apikey":
            person = self.person()
            key_id = self.uid(lambda: f"key_{self.hexs(16)}")
            record = self.user(base, person=person, key_id=key_id)
            return Fact(kind, {"person": person, "key": person}, key_id, record)
        if kind == "csv_inventory":
            product, warehouse = self.product(), rng.choice(WAREHOUSES)
            row = self.inventory_row(product, warehouse)
            words = {"product": product, "warehouse": warehouse, "key": f"{product}@{warehouse}"}
            return Fact(kind, words, row, row)
        if kind == "csv_revenue":
            region = rng.choice(REGIONS)
            day = base.date() - timedelta(days=rng.randint(1, 60))
            row = self.revenue_row(region, day)
            words = {"region": region, "date": f"{day:%Y-%m-%d}", "key": f"{region}{day}"}
            return Fact(kind, words, row, row)
        if kind == "config":
            service, setting = self.service(), rng.choice(list(SETTINGS))
            meaning, low, high, step = SETTINGS[setting]
            value = rng.randrange(low, high + 1, step)
            sep = rng.choice((" = ", "="))  # a Python module or an .env file
            words = {
                "service": service,
                "desc": SERVICES[service],
                "setting": setting,
                "meaning": meaning,
                "key": f"{service}/{setting}",
            }
            return Fact(kind, words, f"{setting}{sep}{value}", (service, setting, value, sep))
        if kind == "trace":
            missing = rng.choice(MISSING_FIELDS)
            module, func = rng.choice(MODULES), rng.choice(FUNCS)
            frame = f'File "/srv/app/{module}.py", line {rng.randint(20, 900)}, in {func}'
            words = {"field": missing, "field_words": missing.replace("_", " "), "key": missing}
            return Fact(kind, words, frame, (frame, f"KeyError: '{missing}'"))
        if kind == "listing":
            db = rng.choice(DATABASES)
            day = base.date() - timedelta(days=rng.randint(1, 40))
            name = f"{db}-{day:%Y-%m-%d}.sql.gz"
            line = self.listing_line(name, base, size=rng.randint(2_000_000, 900_000_000))
            words = {
                "db": db,
                "month_name": MONTH_NAMES[day.month - 1],
                "day": str(day.day),
                "key": name,
            }
            return Fact(kind, words, line, line)
        if kind == "cause":
            symptom, cause = rng.choice(CAUSES)
            sentence = f"After comparing the traces, the root cause of {symptom} was {cause}."
            return Fact(kind, {"symptom": symptom, "key": symptom}, sentence, sentence)
        if kind == "decision":
            topic, decision = rng.choice(DECISIONS)
            sentence = f"We agreed on {topic}: we will {decision}."
            return Fact(kind, {"topic": topic, "key": topic}, sentence, sentence)
        raise ValueError(kind)

    # records and lines shared by facts and background

    def invoice(self, base: datetime, customer: str = "", invoice_id: str = "") -> dict[str, Any]:
        rng = self.rng
        city = rng.choice(list(CITIES))
        lines: list[dict[str, Any]] = [
            {
                "sku": f"{rng.choice(string.ascii_uppercase)}{rng.choice(string.ascii_uppercase)}"
                f"-{self.digits(4)}",
                "description": self.product(),
                "quantity": rng.randint(1, 40),
                "unit_price": round(rng.uniform(2, 400), 2),
            }
            for _ in range(rng.randint(1, 4))
        ]
        return {
            "invoice_id": invoice_id or self.uid(lambda: f"INV-{self.digits(5)}"),
            "customer": {
                "name": customer or self.background_company(),
                "address": {"city": city, "country": CITIES[city]},
            },
            "total": {
                "amount": round(sum(x["quantity"] * x["unit_price"] for x in lines), 2),
                "currency": rng.choice(CURRENCIES),
            },
            "status": rng.choice(INVOICE_STATUSES),
            "issued_at": f"{base.date() - timedelta(days=rng.randint(0, 90))}",
            "lines": lines,
        }

    def shipment(self, base: datetime, city: str = "", number: str = "") -> dict[str, Any]:
        rng = self.rng
        city = city or rng.choice(list(CITIES))
        number = number or self.uid(
            lambda: f"1Z{self.digits(4)}{rng.choice('ABCDEFXY')}{self.digits(7)}"
        )
        return {
            "tracking_number": number,
            "carrier": rng.choice(CARRIERS),
            "destination": {"city": city, "country": CITIES[city]},
            "status": rng.choice(SHIP_STATUSES),
            "weight_kg": round(rng.uniform(0.2, 30), 2),
            "events": [
                {"at": self.ts(base), "where": rng.choice(list(CITIES)), "what": what}
                for what in rng.sample(("picked_up", "sorted", "departed", "arrived"), 2)
            ],
        }

    def user(self, base: datetime, person: str = "", key_id: str = "") -> dict[str, Any]:
        rng = self.rng
        while not person or (("json_apikey", person) in self.taken and not key_id):
            person = self.person()
        first, last = person.lower().split()
        return {
            "id": self.uid(lambda: f"usr_{self.hexs(10)}"),
            "name": person,
            "email": f"{first}.{last}@example.com",
            "role": rng.choice(("admin", "support", "analyst", "developer", "viewer")),
            "last_login": self.ts(base),
            "mfa": {"enabled": rng.random() < 0.7, "method": rng.choice(("totp", "webauthn"))},
            "api_keys": [
                {
                    "key_id": key_id or self.uid(lambda: f"key_{self.hexs(16)}"),
                    "scopes": rng.sample(("read", "write", "billing", "admin", "export"), 2),
                    "created": f"{base.date() - timedelta(days=rng.randint(1, 400))}",
                }
            ],
        }

    def inventory_row(self, product: str, warehouse: str) -> str:
        rng = self.rng
        sku = self.uid(lambda: f"{rng.choice(string.ascii_uppercase)}K-{self.digits(5)}")
        return (
            f"{sku},{product},{warehouse},{rng.randint(0, 4000)},{rng.randint(10, 500)},"
            f"{rng.uniform(1, 300):.2f}"
        )

    def revenue_row(self, region: str, day: Any) -> str:
        rng = self.rng
        orders = rng.randint(40, 9000)
        return (
            f"{day:%Y-%m-%d},{region},{orders},{orders * rng.uniform(20, 90):.2f},"
            f"{rng.randint(0, orders // 20)}"
        )

    def listing_line(self, name: str, base: datetime, size: int = 0) -> str:
        """An ``ls -la`` line; a dump named ``db-YYYY-MM-DD.sql.gz`` was written that night."""
        rng = self.rng
        day = base - timedelta(days=rng.randint(0, 40), minutes=rng.randint(0, 1440))
        if name.endswith(".sql.gz"):
            day = datetime.strptime(name[-17:-7], "%Y-%m-%d") + timedelta(
                hours=23, minutes=rng.randint(0, 59)
            )
        return (
            f"-rw-r----- 1 {rng.choice(('postgres', 'deploy', 'backup'))} "
            f"{rng.choice(('backup', 'ops', 'staff'))} {size or rng.randint(200, 90_000_000):>10} "
            f"{MONTHS[day.month - 1]} {day.day:>2} {day:%H:%M} {name}"
        )

    # carriers: a text of about ``size`` characters, with a fact planted at a random place

    def log(self, base: datetime, size: int, fact: Fact | None) -> str:
        rng = self.rng
        lines: list[str] = []
        used = 0
        while used < size:
            service = self.service()
            pick = rng.random()
            if pick < 0.45:
                message = (
                    f"{rng.choice(('GET', 'POST', 'PUT'))} {rng.choice(PATHS)}/"
                    f"{rng.randint(1, 99999)} {rng.choice((200, 200, 200, 201, 204, 404, 500))}"
                    f" in {rng.randint(1, 2500)}ms"
                )
            elif pick < 0.55:
                message = f"cache {rng.choice(('hit', 'miss'))} for key {self.hexs(10)}"
            elif pick < 0.63:
                message = f"retrying {rng.choice(TABLES)} write (attempt {rng.randint(2, 5)}/5)"
            elif pick < 0.7:
                message = f"gc pause {rng.randint(3, 400)}ms heap={rng.randint(200, 4000)}MB"
            elif pick < 0.8:
                message = (
                    f"query {rng.choice(TABLES)} took {rng.randint(1, 9000)}ms "
                    f"rows={rng.randint(0, 50000)}"
                )
            elif pick < 0.88:
                message = f"published {rng.randint(1, 500)} events to {rng.choice(TOPICS)}"
            elif pick < 0.94 and ("log_timeout", service) not in self.taken:
                # looks like the planted fact, on a service no question asks about
                message = (
                    f"upstream call timed out after {rng.randint(5, 120)}s on host "
                    f"{self.host()} (request_id={self.hexs(12)})"
                )
            else:
                message = (
                    f"connection pool size={rng.randint(5, 200)} idle={rng.randint(0, 50)} "
                    f"waiting={rng.randint(0, 30)}"
                )
            line = (
                f"{self.ts(base)} {rng.choice(LEVELS):5} {service}[{rng.randint(100, 9999)}]: "
                f"{message}"
            )
            lines.append(line)
            used += len(line) + 1
        lines.sort()  # in time order, as a log is
        if fact is not None:
            lines.insert(rng.randint(0, len(lines)), fact.line)
        return "\n".join(lines)

    def json_output(
        self, base: datetime, size: int, fact: Fact | None, indent: int | None = None
    ) -> dict[str, Any]:
        """An API response of about ``size`` characters once dumped with ``indent``."""
        rng = self.rng
        schemas: dict[str, Callable[[], dict[str, Any]]] = {
            "json_invoice": lambda: self.invoice(base),
            "json_shipment": lambda: self.shipment(base),
            "json_apikey": lambda: self.user(base),
        }
        kind = fact.kind if fact is not None else rng.choice(list(schemas))
        records: list[dict[str, Any]] = []
        used = 200
        while used < size:
            record = schemas[kind]()
            records.append(record)
            # (a record sits three levels deep: each of its lines gets 6 more spaces)
            text = json.dumps(record, indent=indent)
            used += len(text) + 2 + (6 * (text.count("\n") + 1) if indent else 0)
        if fact is not None:
            records.insert(rng.randint(0, len(records)), fact.line)
        name = {"json_invoice": "invoices", "json_shipment": "shipments", "json_apikey": "users"}
        return {
            "data": {name[kind]: records},
            "meta": {
                "page": rng.randint(1, 9),
                "per_page": len(records),
                "request_id": self.hexs(16),
                "generated_at": self.ts(base),
            },
        }

    def csv(self, base: datetime, size: int, fact: Fact | None) -> str:
        rng = self.rng
        kind = fact.kind if fact is not None else rng.choice(("csv_inventory", "csv_revenue"))
        if kind == "csv_inventory":
            header = "sku,product,warehouse,on_hand,reorder_point,unit_cost"

            def row() -> str:
                product, warehouse = self.product(), rng.choice(WAREHOUSES)
                if ("csv_inventory", f"{product}@{warehouse}") in self.taken:
                    return ""
                return self.inventory_row(product, warehouse)

        else:
            header = "date,region,orders,revenue,refunds"

            def row() -> str:
                region = rng.choice(REGIONS)
                day = base.date() - timedelta(days=rng.randint(1, 60))
                if ("csv_revenue", f"{region}{day}") in self.taken:
                    return ""
                return self.revenue_row(region, day)

        rows: list[str] = []
        used = len(header)
        while used < size:
            line = row()
            if line:
                rows.append(line)
                used += len(line) + 1
        if fact is not None:
            rows.insert(rng.randint(0, len(rows)), fact.line)
        return "\n".join([header, *rows])

    def trace(self, base: datetime, size: int, fact: Fact | None) -> str:
        """Tracebacks between log excerpts."""
        rng = self.rng
        blocks: list[str] = []
        used = 0
        while used < size:
            if rng.random() < 0.5:
                block = self.log(base, rng.randint(200, 900), None)
            else:
                missing = rng.choice(MISSING_FIELDS)
                errors = [
                    f"ValueError: invalid literal for int() with base 10: '{self.hexs(4)}'",
                    "TimeoutError: timed out",
                    "ConnectionResetError: [Errno 104] Connection reset by peer",
                ]
                if ("trace", missing) not in self.taken:  # no question asks about it
                    errors.append(f"KeyError: '{missing}'")
                error = rng.choice(errors)
                block = self.traceback(error)
            blocks.append(block)
            used += len(block) + 1
        if fact is not None:
            frame, error = fact.line
            blocks.insert(rng.randint(0, len(blocks)), self.traceback(error, frame))
        return "\n".join(blocks)

    def traceback(self, error: str, last: str = "") -> str:
        rng = self.rng
        frames = ["Traceback (most recent call last):"]
        for _ in range(rng.randint(3, 9)):
            frames.append(
                f'  File "/srv/app/{rng.choice(MODULES)}.py", line {rng.randint(20, 900)}, in '
                f"{rng.choice(FUNCS)}"
            )
            frames.append(f"    {rng.choice(FUNCS)}({rng.choice(TABLES)}, ctx)")
        if last:
            frames.append(f"  {last}")
            frames.append("    return lookup[key]")
        frames.append(error)
        return "\n".join(frames)

    def listing(self, base: datetime, size: int, fact: Fact | None) -> str:
        rng = self.rng
        folder = "/var/backups/db" if fact is not None else rng.choice(
            ("/var/backups/db", "/srv/app/releases", "/var/log/app", "/data/exports")
        )  # fmt: skip
        lines = [f"$ ls -la {folder}", f"total {rng.randint(1000, 9_000_000)}"]
        used = 0
        while used < size:
            if folder == "/var/backups/db":
                day = base.date() - timedelta(days=rng.randint(1, 40))
                name = f"{rng.choice(DATABASES)}-{day:%Y-%m-%d}.sql.gz"
                if ("listing", name) in self.taken:
                    continue
            else:
                name = f"{rng.choice(TOPICS)}-{self.hexs(8)}.{rng.choice(('log', 'csv', 'tar'))}"
            line = self.listing_line(name, base)
            lines.append(line)
            used += len(line) + 1
        if fact is not None:
            lines.insert(rng.randint(2, len(lines)), fact.line)
        return "\n".join(lines)

    def assistant(self, base: datetime, size: int, fact: Fact | None) -> str:
        rng = self.rng
        parts: list[str] = []
        used = 0
        while used < size:
            if rng.random() < 0.3:
                part = self.code_block()
            else:
                part = " ".join(self.fill(rng.choice(PROSE)) for _ in range(rng.randint(2, 6)))
            parts.append(part)
            used += len(part) + 2
        if fact is not None and fact.kind == "config":
            at = rng.randint(0, len(parts))
            parts.insert(at, self.code_block(fact.line))
        elif fact is not None:
            # inside a paragraph, among other sentences
            at = rng.randint(0, len(parts))
            before = " ".join(self.fill(rng.choice(PROSE)) for _ in range(rng.randint(0, 3)))
            after = " ".join(self.fill(rng.choice(PROSE)) for _ in range(rng.randint(0, 3)))
            parts.insert(at, " ".join(x for x in (before, fact.line, after) if x))
        return "\n\n".join(parts)

    def code_block(self, planted: tuple[str, str, int, str] | None = None) -> str:
        """A fenced block: SQL, shell, or settings (``planted``: service, setting, value and
        separator of a fact's setting, among others)."""
        rng = self.rng
        service = planted[0] if planted else self.service()
        style = rng.choice(("python", "env", "sql", "bash"))
        if planted is not None:
            style = "python" if planted[3] == " = " else "env"
        if planted is None and style in ("sql", "bash"):
            if style == "sql":
                body = (
                    f"SELECT {rng.choice(TABLES)}.id, count(*)\nFROM {rng.choice(TABLES)}\n"
                    f"WHERE created_at > now() - interval '{rng.randint(1, 48)} hours'\n"
                    f"GROUP BY 1 ORDER BY 2 DESC LIMIT {rng.randint(5, 100)};"
                )
            else:
                body = (
                    f"kubectl -n prod rollout restart deploy/{service}\n"
                    f"kubectl -n prod logs deploy/{service} --since={rng.randint(5, 90)}m | "
                    f"grep -c {rng.choice(('ERROR', 'WARN', 'timeout'))}"
                )
            return f"```{style}\n{body}\n```"
        style = "python" if style in ("sql", "bash") else style
        names = [s for s in SETTINGS if ("config", f"{service}/{s}") not in self.taken]
        chosen = rng.sample(names, min(len(names), rng.randint(3, 7)))
        values = {}
        for setting in chosen:
            _, low, high, step = SETTINGS[setting]
            values[setting] = rng.randrange(low, high + 1, step)
        if planted is not None:
            values[planted[1]] = planted[2]
        items = list(values.items())
        rng.shuffle(items)
        sep = " = " if style == "python" else "="
        body = "\n".join(f"{name}{sep}{value}" for name, value in items)
        label = "python" if style == "python" else "bash"
        header = f"# {service}/settings.py" if style == "python" else f"# {service}/.env"
        return f"```{label}\n{header}\n{body}\n```"


def generated_runs(
    seed: int, sessions: int = 10, events: tuple[int, int] = (100, 200)
) -> list[LongSession]:
    """``sessions`` agent runs of ``events`` events each, made from ``seed`` (see the
    module docstring)."""
    rng = random.Random(seed)
    return [_generate(random.Random(rng.getrandbits(64)), i, events) for i in range(sessions)]


def _generate(rng: random.Random, index: int, events: tuple[int, int]) -> LongSession:
    run = _Run(rng)
    start = datetime(2026, 3, 2, 9, tzinfo=timezone.utc) + timedelta(days=index)
    count = rng.randint(*events)
    kinds = [
        "user",
        *rng.choices(list(ITEM_WEIGHTS), weights=list(ITEM_WEIGHTS.values()), k=count - 1),
    ]
    # facts: about one per eight events, each in its own carrier
    wanted = max(1, round(count / 8))
    facts: dict[int, Fact] = {}
    for kind in rng.choices(list(FACTS), k=wanted):
        slots = [i for i, k in enumerate(kinds) if k == FACTS[kind][1] and i not in facts]
        if not slots:
            continue
        fact = run.fact(kind, start)
        if fact is not None:
            facts[rng.choice(slots)] = fact
    items: list[Item] = []
    moment = start
    for i, kind in enumerate(kinds):
        moment += timedelta(seconds=rng.randint(5, 120))
        fact = facts.get(i)
        items.append(_item(run, kind, moment, fact, GOALS[index % len(GOALS)] if i == 0 else ""))
    texts = [render(item) for item in items]
    session = LongSession(f"run-{index:02d}", GOALS[index % len(GOALS)] + f" (run {index})", items)
    for i, fact in sorted(facts.items()):
        found = [j for j, text in enumerate(texts) if fact.span in text]
        if found != [i] or texts[i].count(fact.span) != 1:
            session.dropped += 1
            continue
        session.probes.append(
            Probe(
                fact.question,
                FACTS[fact.kind][0],
                {i: (fact.span,)},
                texts[i].find(fact.span),
                fact.paraphrased,
                fact.kind,
            )
        )
    return session


def _item(run: _Run, kind: str, moment: datetime, fact: Fact | None, goal: str) -> Item:
    """The item of ``kind``; ``goal``: the first user turn's task."""
    rng = run.rng
    if kind == "user":
        text = f"{goal}. Start with the logs." if goal else run.fill(rng.choice(USER_TURNS))
        return Item("message", text, moment, role="user")
    if kind == "step":
        step, tool = rng.choice(STEPS)
        return Item("step", run.fill(step), moment, tool=tool)
    if kind == "assistant":
        tokens = _log_uniform(rng, 300, 1500)
        return Item("message", run.assistant(moment, tokens * 4, fact), moment, role="assistant")
    size = {
        "log": (2_000, 20_000),
        "json": (2_000, 20_000),
        "csv": (2_000, 15_000),
        "trace": (1_500, 8_000),
        "listing": (1_000, 8_000),
    }[kind]
    target = _log_uniform(rng, *size)
    tool = rng.choice(TOOLS[kind])
    if kind == "json":
        # half of the JSON outputs as the text a tool printed, half as structured payloads
        printed = rng.random() < 0.5
        output = run.json_output(moment, target, fact, indent=2 if printed else None)
        content: Any = json.dumps(output, indent=2) if printed else output
        return Item("tool_output", content, moment, tool=tool)
    make = {"log": run.log, "csv": run.csv, "trace": run.trace, "listing": run.listing}[kind]
    return Item("tool_output", make(moment, target, fact), moment, tool=tool)
