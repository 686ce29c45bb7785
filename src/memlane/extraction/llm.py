"""An extractor that asks a language model: any OpenAI-compatible chat endpoint (a local
server or a hosted one), an ``openai`` client object, or a callable ``prompt -> str``.

One prompt per batch: the window's turns, numbered, and the user's current facts (so that
the model can leave a known fact alone, or give a new value of its key). The answer must be
one JSON object of :data:`ANSWER_SCHEMA`; it is checked strictly (unknown fields, wrong
types, a turn number not in the window, a fact about another user: rejected). A malformed
answer is sent back once with what was wrong; a second one fails the batch, which the stage
then retries later (nothing of it is written). The prompt is kept within
``max_tokens_per_batch`` (prompt and answer together): the facts given as context are cut
first, then the longest turns.

The prompt's shape owes to mem0's (facts only from the user's own words, in the user's
language, the known memories shown so that the model answers what changed) and to LangMem's
memory manager (existing memories in, a structured answer out); see
docs/decisions/2026-11-27-extraction-off-the-write-path.md.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from ..errors import InvalidInput, shown
from ..text.tokens import tokenizer_for
from .types import ExtractionBatch, Rejected

__all__ = ["ANSWER_SCHEMA", "LLMExtractor", "build_prompt"]

#: the JSON Schema an answer must follow (also what the prompt shows the model)
ANSWER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "facts": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["text", "turns"],
                "properties": {
                    "text": {"type": "string"},
                    "key": {"type": ["string", "null"], "pattern": "^[a-z][a-z0-9_]{0,63}$"},
                    "kind": {"enum": ["fact", "preference"]},
                    "turns": {"type": "array", "items": {"type": "integer"}},
                    "user_id": {"type": "string"},
                },
            },
        },
        "entities": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["turn", "type", "text"],
                "properties": {
                    "turn": {"type": "integer"},
                    "type": {"type": "string"},
                    "text": {"type": "string"},
                },
            },
        },
        "tags": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["turn", "tags"],
                "properties": {
                    "turn": {"type": "integer"},
                    "tags": {"type": "array", "items": {"type": "string"}},
                },
            },
        },
    },
}

_INSTRUCTIONS = """\
You keep the long-term memory of an assistant about one user (user id: {user}).
Read the conversation window below and answer with ONE JSON object, nothing else.

Write down, as "facts", what the USER says about themself that stays true beyond this
conversation: personal details, where they live, allergies and health, work, plans, and
preferences (kind "preference"). Take facts only from turns of role "user", never from the
assistant's. Do not write down questions, hypotheticals, what others said, or what the user
denies. Write each fact as a short sentence in the user's language ("Lives in Porto").
Give a fact a "key" when it is the current value of something that has one value at a time
(name, city, employer, diet); reuse the key of a known fact when the user gives it a new
value. Leave out what the known facts below already say. "turns": the numbers of the turns
it comes from.

Also list "entities" (people, places, organisations, products, dates, amounts) and a few
topical "tags" (lower-case words) per turn, by turn number.

Known facts about the user:
{facts}

Conversation window:
{turns}

Answer with this JSON Schema (empty lists when there is nothing):
{schema}"""


def build_prompt(
    batch: ExtractionBatch, *, facts: int | None = None, cut: int | None = None
) -> str:
    """The prompt for a batch: at most ``facts`` known facts (keyed first), each turn cut to
    ``cut`` characters.

    >>> from datetime import datetime, timezone
    >>> from memlane.extraction import Turn
    >>> turn = Turn("m1", "user", "I moved to Porto", datetime(2026, 5, 1, tzinfo=timezone.utc), 1)
    >>> prompt = build_prompt(ExtractionBatch("u1", "s1", (turn,)))
    >>> "[1] 2026-05-01 user: I moved to Porto" in prompt
    True
    """
    known = sorted(batch.facts, key=lambda fact: fact.key is None)
    if facts is not None:
        known = known[:facts]
    listed = "\n".join(
        f"- {fact.key + ': ' if fact.key else ''}{fact.text} ({fact.kind})" for fact in known
    )
    lines = []
    for number, turn in enumerate(batch.turns, start=1):
        text = turn.content if cut is None or len(turn.content) <= cut else turn.content[:cut] + "…"
        when = turn.created_at.strftime("%Y-%m-%d")
        lines.append(f"[{number}] {when} {turn.role or 'user'}: {text}")
    return _INSTRUCTIONS.format(
        user=batch.user_id
        if batch.user_id is not None
        else "none; give no facts, only entities and tags",
        facts=listed or "(none yet)",
        turns="\n".join(lines),
        schema=json.dumps(ANSWER_SCHEMA, separators=(",", ":")),
    )


def _answer_of(text: str, batch: ExtractionBatch) -> dict[str, Any]:
    """The model's answer read strictly (:data:`ANSWER_SCHEMA`) and turned into the generic
    shape ``types.extraction_of`` reads (turn numbers become turn ids)."""
    stripped = text.strip()
    fenced = re.fullmatch(r"```(?:json)?\s*(.*?)\s*```", stripped, re.DOTALL)
    if fenced:  # (a fence around the object is forgiven; anything else is not)
        stripped = fenced.group(1)
    try:
        data = json.loads(stripped)
    except ValueError as exc:
        raise Rejected(f"the answer is not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise Rejected(f"the answer must be a JSON object, got {type(data).__name__}")
    unknown = sorted(set(data) - {"facts", "entities", "tags"})
    if unknown:
        raise Rejected(f"the answer has unknown fields {unknown}")
    count = len(batch.turns)

    def turn_id(number: Any, where: str) -> str:
        if isinstance(number, bool) or not isinstance(number, int) or not 1 <= number <= count:
            raise Rejected(f"{where}: turn {number!r:.20} is not a turn number from 1 to {count}")
        return batch.turns[number - 1].id

    def items(name: str) -> list[Any]:
        value = data.get(name, [])
        if not isinstance(value, list):
            raise Rejected(f"{name} must be a list, got {type(value).__name__}")
        for item in value:
            if not isinstance(item, dict):
                raise Rejected(f"each of {name} must be an object, got {type(item).__name__}")
        return value

    facts = []
    for fact in items("facts"):
        extra = sorted(set(fact) - {"text", "key", "kind", "turns", "user_id"})
        if extra:
            raise Rejected(f"a fact has unknown fields {extra}")
        turns = fact.get("turns", [])
        if not isinstance(turns, list):
            raise Rejected(f"a fact's turns must be a list of numbers, got {turns!r:.40}")
        converted = {k: v for k, v in fact.items() if k != "turns"}
        converted["sources"] = [turn_id(n, "a fact") for n in turns]
        facts.append(converted)
    entities: dict[str, list[dict[str, Any]]] = {}
    for entity in items("entities"):
        extra = sorted(set(entity) - {"turn", "type", "text"})
        if extra:
            raise Rejected(f"an entity has unknown fields {extra}")
        kind = entity.get("type")
        if isinstance(kind, str):  # ("Person", "DATE": the types are ours, lower case)
            kind = re.sub(r"[^a-z0-9_\-]+", "_", kind.strip().lower()).strip("_") or kind
        entities.setdefault(turn_id(entity.get("turn"), "an entity"), []).append(
            {"type": kind, "text": entity.get("text")}
        )
    tags: dict[str, list[Any]] = {}
    for tagged in items("tags"):
        extra = sorted(set(tagged) - {"turn", "tags"})
        if extra:
            raise Rejected(f"a tags entry has unknown fields {extra}")
        words = tagged.get("tags")
        if not isinstance(words, list) or not all(isinstance(w, str) for w in words):
            raise Rejected(f"tags must be a list of words, got {words!r:.40}")
        # ("Machine Learning" is "machine-learning": a tag is a filter key, so ours in form)
        shaped = [re.sub(r"[^a-z0-9_\-]+", "-", w.strip().lower()).strip("-")[:40] for w in words]
        tags.setdefault(turn_id(tagged.get("turn"), "tags"), []).extend(w for w in shaped if w)
    return {"facts": facts, "entities": entities, "tags": tags}


class LLMExtractor:
    """Facts, entities and tags drawn by a language model (see the module docstring).

    ``client``: the base URL of an OpenAI-compatible API (``"http://localhost:8000/v1"``:
    ``POST {base}/chat/completions`` with httpx, the ``[llm]`` extra), an ``openai`` client
    object (``client.chat.completions.create``), or a callable ``prompt -> str``. ``model``:
    the model name sent (needed for the first two). ``max_tokens_per_batch``: prompt and
    answer together (``answer_tokens`` of it for the answer), counted with ``tokenizer``
    (a model family, or a ``str -> int`` counter; ``gpt-4o``'s by default).

    >>> extractor = LLMExtractor("http://localhost:11434/v1", model="qwen2.5:7b")  # doctest: +SKIP
    >>> mgr = SessionManager("assistant", db_path="a.db", extractor=extractor)  # doctest: +SKIP
    """

    name = "llm"

    def __init__(
        self,
        client: str | Any | Callable[[str], str],
        model: str | None = None,
        *,
        api_key: str | None = None,
        max_tokens_per_batch: int = 4000,
        answer_tokens: int = 1000,
        window: int = 6,
        quiet_seconds: float = 30.0,
        timeout: float = 60.0,
        temperature: float = 0.0,
        json_mode: bool = True,
        version: str = "1",
        tokenizer: str | Callable[[str], int] = "gpt-4o",
    ) -> None:
        if isinstance(max_tokens_per_batch, bool) or not isinstance(max_tokens_per_batch, int):
            raise InvalidInput(
                f"max_tokens_per_batch must be a token count, got {shown(max_tokens_per_batch)}."
            )
        if not 100 <= answer_tokens < max_tokens_per_batch:
            raise InvalidInput(
                f"answer_tokens ({shown(answer_tokens)}) must be at least 100 and less than "
                f"max_tokens_per_batch ({max_tokens_per_batch}): the prompt needs the rest."
            )
        self.model = model
        self.window = window
        self.quiet_seconds = quiet_seconds
        self.timeout = float(timeout)
        #: how long one batch may take in all (two requests, and slack): the stage's limit
        self.call_timeout = 2 * self.timeout + 5.0
        self.max_tokens_per_batch = max_tokens_per_batch
        self.answer_tokens = answer_tokens
        self.temperature = temperature
        self.json_mode = json_mode
        self.version = f"{version}:{model}" if model else version
        self._url: str | None = None
        self._http: Any = None
        self._client: Any = None
        self._call: Callable[[str], str] | None = None
        self._headers = {"Content-Type": "application/json"}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        if isinstance(client, str):
            if not re.match(r"^https?://", client):
                raise InvalidInput(
                    f"LLMExtractor's client {shown(client)} is not a URL; give the API's base "
                    "URL (http://host:port/v1), an openai client, or a callable prompt -> str."
                )
            if model is None:
                raise InvalidInput("LLMExtractor needs model= to call a chat endpoint.")
            try:
                import httpx
            except ImportError:
                raise InvalidInput(
                    "LLMExtractor with a URL needs httpx: pip install 'memlane[llm]'."
                ) from None
            self._url = client.rstrip("/") + "/chat/completions"
            self._http = httpx.Client(timeout=self.timeout)
        elif hasattr(client, "chat") and hasattr(client.chat, "completions"):
            if model is None:
                raise InvalidInput("LLMExtractor needs model= to call an openai client.")
            self._client = client
        elif callable(client):
            self._call = client
        else:
            raise InvalidInput(
                f"LLMExtractor takes a base URL, an openai client or a callable prompt -> str, "
                f"got {type(client).__name__}."
            )
        self._count = tokenizer_for(tokenizer).count
        #: tokens of the last batch (prompt and answers, retries included)
        self.last_tokens = 0

    # -- one batch ---------------------------------------------------------------------------

    def __call__(self, batch: ExtractionBatch) -> dict[str, Any]:
        prompt = self._prompt(batch)
        messages = [{"role": "user", "content": prompt}]
        spent = 0
        error = ""
        for attempt in range(2):
            text, used = self._complete(messages)
            spent += used or (self._count(messages[-1]["content"]) + self._count(text))
            try:
                answer = _answer_of(text, batch)
            except Rejected as exc:
                error = str(exc)
                if attempt == 0:  # once more, with what was wrong
                    messages += [
                        {"role": "assistant", "content": text[:4000]},
                        {
                            "role": "user",
                            "content": f"That answer is not usable: {error}. Answer again "
                            "with only the JSON object, following the schema.",
                        },
                    ]
                continue
            self.last_tokens = spent
            return {**answer, "tokens": spent}
        self.last_tokens = spent
        failed = Rejected(f"two malformed answers; the last: {error}")
        failed.tokens = spent  # type: ignore[attr-defined]
        raise failed

    def _prompt(self, batch: ExtractionBatch) -> str:
        """The batch's prompt within the budget: fewer known facts, then shorter turns."""
        budget = self.max_tokens_per_batch - self.answer_tokens
        facts: int | None = None
        cut: int | None = None
        prompt = build_prompt(batch)
        while self._count(prompt) > budget:
            if facts is None:
                facts = len(batch.facts)
            if facts > 0:
                facts = facts // 2
            else:
                longest = max(len(turn.content) for turn in batch.turns)
                cut = max(40, (cut or longest) * 3 // 4)
                if cut == 40 and self._count(build_prompt(batch, facts=0, cut=40)) > budget:
                    raise Rejected(
                        f"the window does not fit max_tokens_per_batch "
                        f"({self.max_tokens_per_batch}) even cut short; raise it or lower window"
                    )
            prompt = build_prompt(batch, facts=facts, cut=cut)
        return prompt

    def _complete(self, messages: list[dict[str, str]]) -> tuple[str, int]:
        """The model's answer and the tokens it reported (0: not reported)."""
        if self._call is not None:
            answer = self._call(messages[-1]["content"] if len(messages) == 1 else _flat(messages))
            if not isinstance(answer, str):
                raise Rejected(f"the callable answered {type(answer).__name__}, not a string")
            return answer, 0
        body: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "temperature": self.temperature,
            "max_tokens": self.answer_tokens,
        }
        if self.json_mode:
            body["response_format"] = {"type": "json_object"}
        if self._client is not None:
            response = self._client.chat.completions.create(**body)
            text = response.choices[0].message.content or ""
            usage = getattr(response, "usage", None)
            return text, int(getattr(usage, "total_tokens", 0) or 0)
        assert self._http is not None and self._url is not None
        import httpx

        try:
            reply = self._http.post(self._url, json=body, headers=self._headers)
        except httpx.HTTPError as exc:  # (mapped once, here: no httpx error reaches a caller)
            raise Rejected(
                f"the endpoint {self._url} failed: {type(exc).__name__}: {exc}"
            ) from None
        if reply.status_code >= 400:
            raise Rejected(f"the endpoint answered HTTP {reply.status_code}: {reply.text[:200]}")
        try:
            data = reply.json()
            text = data["choices"][0]["message"]["content"] or ""
        except (ValueError, KeyError, IndexError, TypeError):
            why = f"the endpoint's reply is not a chat completion: {reply.text[:200]}"
            raise Rejected(why) from None
        usage = data.get("usage") if isinstance(data, Mapping) else None
        tokens = usage.get("total_tokens", 0) if isinstance(usage, Mapping) else 0
        return str(text), int(tokens) if isinstance(tokens, int) else 0

    def close(self) -> None:
        if self._http is not None:
            self._http.close()


def _flat(messages: list[dict[str, str]]) -> str:
    """A conversation as one prompt (for a callable ``prompt -> str``)."""
    return "\n\n".join(f"{m['role'].upper()}:\n{m['content']}" for m in messages)
