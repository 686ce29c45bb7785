"""Long technical chats for bench/long_events.py (``--dataset tech``): a user builds a
software project with an assistant over one long session, and is later asked the kinds of
question that need *several* events or a rule said long before (issue 31, item 5).

Each chat (made from a seed; words in :mod:`tech_chats_words`) is one project — an expense
tracker in Flask, a ticket booking system in Go — worked on aspect after aspect (the schema,
password hashing, a CI pipeline, keyset pagination: 13-16 of the 24, from six themes), each
aspect over 2-4 exchanges: a user message (60-400 o200k tokens, sometimes with a pasted
snippet) and an assistant answer (300-1,500 tokens of explanation and code), with a few
unrelated small-talk exchanges between; ~550 tokens a message, ~140 messages, as the held-out
long chats the issue describes. Planted in user messages of the first 60%: two standing
instructions, two preferences, four settings (two of them changed later).

Questions, asked at the end of the chat (``category``; the answering messages):

- **ordering**: "In what order did I bring up the different security topics for my expense
  tracker?" — the user messages that opened each aspect of the theme (one question per
  theme with three aspects or more, and one over the whole project);
- **summary**: "Recap the testing work we did on the fitness log" — every message of the
  theme's aspects (two themes a chat);
- **instruction** / **preference**: a later request the rule bears on ("Which library
  should I use to generate PDF reports?" after "Please always give version numbers when you
  recommend a library") — the message that states the rule (two requests each);
- **fact**: "What did I set the connection pool size to?", direct or paraphrased — the
  message stating it;
- **update**: "What's the current cache expiry?" — the message that changed it.

A span (what shows the answer in a context) is the rule's or setting's sentence, or the
first 120 characters of an answering message. Deterministic; nothing calls memlane.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

from long_events_data import Item, LongSession, Probe
from tech_chats_words import (
    ANSWER_CLOSINGS,
    ANSWER_OPENINGS,
    ASKS,
    ASPECTS,
    FACT_STATEMENTS,
    FACTS,
    GENERIC,
    INSTRUCTIONS,
    OPENINGS,
    ORDERING_ALL,
    ORDERING_QUESTIONS,
    PREFERENCES,
    PROJECTS,
    SMALL_TALK,
    SUMMARY_QUESTIONS,
    THEME_NAMES,
    UPDATE_QUESTIONS,
    UPDATE_STATEMENTS,
    USER_NOTES,
)

__all__ = ["tech_chats"]

SPAN_CHARS = 120  # the opening of an answering message that shows it
FOLLOW_UPS = (
    "That makes sense. {question}",
    "Thanks, I tried it. {question}",
    "{question} I want to be sure before I change anything.",
    "Okay. One more thing on this: {question}",
)


_PASTED = (
    "    result = handler(request)",
    "    if not result:",
    "        return None",
    "    items = [row for row in rows if row is not None]",
    "    logger.info('done in %s ms', elapsed)",
    "    config = load_settings()",
    "    for row in rows:",
    "        total += row.amount",
    "    session.commit()",
    "    response.raise_for_status()",
)
_ERRORS = (
    "TypeError: 'NoneType' object is not subscriptable",
    "KeyError: 'owner_id'",
    "ConnectionRefusedError: [Errno 111] Connection refused",
    "a timeout after 30 seconds",
    "a 500 from the server and nothing useful in the log",
    "ValueError: invalid literal for int() with base 10",
)


@dataclass
class _Aspect:
    theme: str
    name: str
    sentences: tuple[str, ...]
    code: str
    follow_ups: tuple[str, ...]
    messages: list[int] = field(default_factory=list)  # item indices, the first the opening


def tech_chats(seed: int, chats: int = 8) -> list[LongSession]:
    """``chats`` long technical chats made from ``seed`` (see the module docstring)."""
    rng = random.Random(seed)
    return [_chat(random.Random(rng.getrandbits(64)), i) for i in range(chats)]


def _log_uniform(rng: random.Random, low: int, high: int) -> int:
    return round(math.exp(rng.uniform(math.log(low), math.log(high))))


def _chat(rng: random.Random, index: int) -> LongSession:
    project, stack, entity, lang = PROJECTS[index % len(PROJECTS)]
    words = {"project": project, "stack": stack, "entity": entity, "lang": lang}

    def fill(text: str) -> str:
        return text.format(**words, n=rng.randint(20, 900))

    # 13-16 aspects from the six themes, two or three of each, in a random order
    aspects: list[_Aspect] = []
    for theme, options in ASPECTS.items():
        for name, sentences, code, follow_ups in rng.sample(options, rng.choice((3, 3, 4))):
            aspects.append(
                _Aspect(
                    theme,
                    fill(name),
                    tuple(fill(s) for s in sentences),
                    fill(code),
                    tuple(fill(f) for f in follow_ups),
                )
            )
    rng.shuffle(aspects)
    plan: list[tuple[str, _Aspect | None, int]] = []  # ("open" | "follow" | "talk", aspect, n)
    talks = iter(rng.sample(range(len(SMALL_TALK)), len(SMALL_TALK)))
    for aspect in aspects:
        plan.append(("open", aspect, 0))
        for n in range(1, rng.randint(2, 5)):
            plan.append(("follow", aspect, n))
        if rng.random() < 0.3:
            talk = next(talks, None)
            if talk is not None:
                plan.append(("talk", None, talk))

    # what is planted in user messages of the first 60%: rules, settings, their changes
    exchanges = len(plan)
    early = list(range(1, max(2, round(exchanges * 0.6))))
    instructions = rng.sample(INSTRUCTIONS, 2)
    preferences = rng.sample(PREFERENCES, 2)
    facts = rng.sample(FACTS, 4)
    slots = rng.sample(early, 8)
    planted: dict[int, list[tuple[str, object]]] = {}
    for slot, rule in zip(slots[:2], instructions, strict=True):
        planted.setdefault(slot, []).append(("instruction", rule))
    for slot, rule in zip(slots[2:4], preferences, strict=True):
        planted.setdefault(slot, []).append(("preference", rule))
    for slot, fact in zip(slots[4:], facts, strict=True):
        planted.setdefault(slot, []).append(("fact", fact))
    changes = {}  # exchange -> (fact, old value, new value)
    for fact in facts[2:]:
        later = [i for i in range(max(slots) + 1, exchanges) if i not in changes]
        if later:
            changes[rng.choice(later)] = fact

    items: list[Item] = []
    moment = datetime(2026, 2, 2, 19, tzinfo=timezone.utc) + timedelta(days=index * 40)
    said: dict[str, tuple[int, str]] = {}  # rule / setting -> (item, its sentence)
    values: dict[str, str] = {}
    for number, (kind, aspect, n) in enumerate(plan):
        moment += timedelta(minutes=rng.randint(2, 30))
        if number and rng.random() < 0.15:
            moment += timedelta(days=rng.randint(1, 4))  # a new evening
        extras: list[str] = []
        for what, thing in planted.get(number, []):
            if what in ("instruction", "preference"):
                sentence = fill(thing[0])  # type: ignore[index]
                said[sentence] = (len(items), sentence)
                extras.append(sentence)
            else:
                setting, options = thing[0], thing[1]  # type: ignore[index]
                values[setting] = rng.choice(options)
                sentence = rng.choice(FACT_STATEMENTS).format(
                    setting=setting, value=values[setting]
                )
                said[setting] = (len(items), sentence)
                extras.append(sentence)
        if number in changes:
            setting, options = changes[number][0], changes[number][1]
            old = values[setting]
            values[setting] = rng.choice([v for v in options if v != old])
            sentence = rng.choice(UPDATE_STATEMENTS).format(
                setting=setting, value=values[setting], old=old
            )
            said["update:" + setting] = (len(items), sentence)
            extras.append(sentence)
        if kind == "talk":
            question, answer = SMALL_TALK[n]
            user = " ".join([question, *extras])
            items.append(Item("message", user, moment, role="user"))
            moment += timedelta(seconds=rng.randint(20, 90))
            items.append(Item("message", answer, moment, role="assistant"))
            continue
        assert aspect is not None
        if kind == "open":
            text = rng.choice(OPENINGS).format(aspect=aspect.name, ask=rng.choice(ASKS), **words)
        else:
            question = aspect.follow_ups[(n - 1) % len(aspect.follow_ups)]
            text = rng.choice(FOLLOW_UPS).format(question=question)
        parts = [text]
        if rng.random() < 0.4:
            parts.append(fill(rng.choice(USER_NOTES)))
        rng.shuffle(extras)
        at = rng.randint(0, len(parts))
        parts[at:at] = extras  # a rule or a setting said in passing, anywhere in the message
        if rng.random() < 0.4:
            parts.append(_paste(rng, aspect))
        aspect.messages.append(len(items))
        items.append(Item("message", " ".join(p for p in parts if p), moment, role="user"))
        moment += timedelta(seconds=rng.randint(20, 90))
        aspect.messages.append(len(items))
        items.append(Item("message", _answer(rng, aspect, words), moment, role="assistant"))

    session = LongSession(f"chat-{index:02d}", f"Build the {project} ({stack})", items)
    session.probes = _questions(rng, session, aspects, words, instructions, preferences, facts,
                                said)  # fmt: skip
    return session


def _paste(rng: random.Random, aspect: _Aspect) -> str:
    """What a user pastes: their code as it stands, with the error it gives."""
    lines = [aspect.code]
    for _ in range(rng.randint(4, 30)):
        lines.append(f"    # {rng.choice(GENERIC)}" if rng.random() < 0.3 else rng.choice(_PASTED))
    error = rng.choice(_ERRORS)
    code = "\n".join(lines)
    return f"Here is what I have now:\n```\n{code}\n```\nand it fails with: {error}"


def _answer(rng: random.Random, aspect: _Aspect, words: dict[str, str]) -> str:
    """An assistant's answer of 300-1,500 o200k tokens (~4 characters each) about ``aspect``."""
    target = _log_uniform(rng, 400, 2000) * 4
    opening = rng.choice(ANSWER_OPENINGS).format(aspect=aspect.name, **words)
    parts = [opening]
    own = list(aspect.sentences)
    rng.shuffle(own)
    step = 1
    size = len(opening)
    while size < target:
        chunk = [*own[: rng.randint(1, 2)], *rng.sample(GENERIC, rng.randint(1, 3))]
        own = own[2:] + own[:2]
        paragraph = f"{step}. " + " ".join(chunk)
        if rng.random() < 0.35:
            lines = [aspect.code, *(f"# {s}" for s in rng.sample(GENERIC, 2))]
            paragraph += "\n\n```\n" + "\n".join(lines) + "\n```"
        parts.append(paragraph)
        size += len(paragraph) + 2
        step += 1
    parts.append(rng.choice(ANSWER_CLOSINGS).format(**words))
    return "\n\n".join(parts)


def _questions(
    rng: random.Random,
    session: LongSession,
    aspects: Sequence[_Aspect],
    words: dict[str, str],
    instructions: Sequence[tuple[str, tuple[str, ...]]],
    preferences: Sequence[tuple[str, tuple[str, ...]]],
    facts: Sequence[tuple[str, tuple[str, ...], str, str]],
    said: dict[str, tuple[int, str]],
) -> list[Probe]:
    texts = [item.content for item in session.items]

    def probe(question: str, category: str, where: dict[int, str], paraphrased=False) -> Probe:
        spans = {i: (span,) for i, span in where.items()}
        depth = min(texts[i].find(span) for i, span in where.items())
        return Probe(question, category, spans, depth, paraphrased)

    def openings(indices: Sequence[int]) -> dict[int, str]:
        return {i: texts[i][:SPAN_CHARS] for i in indices}

    probes: list[Probe] = []
    themes: dict[str, list[_Aspect]] = {}
    for aspect in aspects:
        themes.setdefault(aspect.theme, []).append(aspect)
    wide = [theme for theme, group in themes.items() if len(group) >= 3]
    for theme in rng.sample(wide, min(2, len(wide))):
        name = rng.choice(THEME_NAMES[theme])
        question = rng.choice(ORDERING_QUESTIONS).format(theme=name, **words)
        probes.append(probe(question, "ordering", openings([a.messages[0] for a in themes[theme]])))
    question = rng.choice(ORDERING_ALL).format(**words)
    firsts = sorted(a.messages[0] for a in aspects)
    probes.append(probe(question, "ordering", openings(firsts)))
    for theme in rng.sample(sorted(themes), 2):
        name = rng.choice(THEME_NAMES[theme])
        question = rng.choice(SUMMARY_QUESTIONS).format(theme=name, **words)
        every = sorted(i for a in themes[theme] for i in a.messages)
        probes.append(probe(question, "summary", openings(every)))
    for category, rules in (("instruction", instructions), ("preference", preferences)):
        for statement, requests in rules:
            where, sentence = said[statement.format(**words)]
            for request in requests:
                probes.append(probe(request.format(**words), category, {where: sentence}))
    for setting, _, direct, paraphrase in facts[:2]:
        where, sentence = said[setting]
        paraphrased = rng.random() < 0.5
        probes.append(
            probe(paraphrase if paraphrased else direct, "fact", {where: sentence}, paraphrased)
        )
    for setting, *_ in facts[2:]:
        if "update:" + setting in said:
            where, sentence = said["update:" + setting]
            question = rng.choice(UPDATE_QUESTIONS).format(setting=setting)
            probes.append(probe(question, "update", {where: sentence}))
    return probes
