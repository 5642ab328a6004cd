"""One record per GGUF architecture (`general.architecture`): how llama.cpp's converter
wrote the tensors, and which of our models reads them. `from_gguf` reads every file
through `load`; a new architecture is one `GGUFArchitecture`, added with
`add_gguf_architecture` by the family whose model it builds."""

import dataclasses
import re
from collections.abc import Callable

from keras_attn.checkpoints import warn_unused
from keras_attn.checkpoints.checkpoint_errors import CheckpointError


@dataclasses.dataclass(frozen=True)
class GGUFArchitecture:
    """How the GGUF files of one architecture become one of our models.

    Args:
        name: the files' `general.architecture` (`"llama"`, `"gemma3"`).
        tensor_names: GGUF tensor name -> Hugging Face name, `{}` standing for a block's
            number (`"blk.{}.attn_q.weight": "model.layers.{}.self_attn.q_proj.weight"`).
        interleaved_rope_rows: whether the converter that writes this architecture
            interleaved the rows of each query and key head for GGML's RoPE, which
            rotates the pairs `(2i, 2i + 1)` where Hugging Face's rotates `(i, i + d/2)`;
            reading puts the halves back. llama.cpp's converter does it for Llama and
            not for Gemma 3 or Qwen2, and a wrong answer here gives a model that runs and
            answers wrongly: every architecture states it.
        config: `file -> dict`, the Hugging Face configuration the metadata describes.
        build: `(config, weights, path, **overrides) -> model`, the family's builder from
            a configuration and Hugging Face-named float32 weights.
        family: the registry family whose preprocessor the file's tokenizer becomes.
        norm_offset: subtracted from every `*norm.weight` tensor (llama.cpp stores
            Gemma's RMS norms as `1 + w`).
        hf_weights: `model -> {Hugging Face name: float32 array}`, the family's weights
            out (for `save_gguf`, which writes them back in this layout); `None`: files
            of this architecture are read only.
    """

    name: str
    tensor_names: dict
    interleaved_rope_rows: bool
    config: Callable
    build: Callable
    family: str
    norm_offset: float = 0.0
    hf_weights: Callable | None = None

    def transform(self, config):
        """`(gguf_name, values) -> values`: this architecture's layout changes, for
        `reader.hf_tensors`."""
        heads = {
            ".attn_q.": config.get("num_attention_heads"),
            ".attn_k.": config.get("num_key_value_heads") or config.get("num_attention_heads"),
        }

        def transform(name, values):
            if self.interleaved_rope_rows:
                for part, count in heads.items():
                    if part in name:
                        values = rope_halves(values, count)
            if self.norm_offset and name.endswith("norm.weight"):
                values = values - self.norm_offset
            return values

        return transform

    def load(self, file, keep_blocks=False, **overrides):
        """The model of an opened `GGUFFile` of this architecture, with the file's
        tokenizer attached as its `CausalLMPreprocessor` where we read its kind (else a
        warning names it, and the model takes token ids); `keep_blocks`: its projections
        and tied embedding kept in the file's blocks (`kept_formats`)."""
        from keras_attn.models.gguf import tokenizers
        from keras_attn.models.gguf.reader import hf_tensors

        config = self.config(file)
        keep = None
        if keep_blocks:
            tied = config.get("tie_word_embeddings", True)
            keep = lambda name: kept_matrix(name, tied)  # noqa: E731
        read = hf_tensors(file, self.tensor_names, config, self.transform(config), keep=keep)
        weights, unused = read[:2]
        if keep_blocks:
            overrides["kernel_formats"] = kept_formats(by_eights(weights, read[2]))
        tokenizers.attach(file, config, self.family, overrides)
        model = self.build(config, weights, file.path, **overrides)
        warn_unused(type(model), unused)
        model.gguf_source = file.path  # the metadata `save_gguf` carries over
        return model


# Our sub-layer of each Hugging Face projection of a Llama or Gemma block.
SUBLAYERS = {
    "self_attn.q_proj": "query",
    "self_attn.k_proj": "key",
    "self_attn.v_proj": "value",
    "self_attn.o_proj": "attention_output",
    "mlp.gate_proj": "feedforward_gate_dense",
    "mlp.up_proj": "feedforward_intermediate_dense",
    "mlp.down_proj": "feedforward_output_dense",
}
_BLOCK_MATRIX = re.compile(r"(?:language_model\.)?model\.layers\.(\d+)\.(.+)\.weight$")
_EMBEDDING = re.compile(r"(?:language_model\.)?model\.embed_tokens\.weight$")


def kept_matrix(hf_name, tied):
    """Whether `from_gguf(..., keep_blocks=True)` keeps `hf_name` in its blocks: a block's
    projection, and the token embedding where it is also the (tied) output head."""
    if _EMBEDDING.match(hf_name):
        return tied
    match = _BLOCK_MATRIX.match(hf_name)
    return bool(match) and match.group(2) in SUBLAYERS


def by_eights(weights, kept):
    """Where the custom call multiplies rows repacked by eights (`native.int8`), the
    kept projections in Q4_0 / Q4_1 with rows by eights repacked in `weights`; `kept`
    with their new format names."""
    from keras_attn.layers.quantized_blocks import native
    from keras_attn.layers.quantized_blocks.block_formats import repack

    if not native.int8():
        return kept
    kept = dict(kept)
    for name, kind in kept.items():
        if _BLOCK_MATRIX.match(name) and kind in ("Q4_0", "Q4_1") and not len(weights[name]) % 8:
            weights[name], kept[name] = repack(weights[name], kind)
    return kept


def kept_formats(kept):
    """`{Hugging Face name: block format}` -> the decoder's `kernel_formats`."""
    formats = {}
    for name, kind in kept.items():
        match = _BLOCK_MATRIX.match(name)
        if match is None:
            formats["token_embedding"] = kind
        else:
            layer = formats.setdefault(f"transformer_layer_{match.group(1)}", {})
            layer[SUBLAYERS[match.group(2)]] = kind
    return formats


def rope_halves(weights, heads):
    """A query or key projection `(heads * d, in)` with each head's rows interleaved
    (GGML's RoPE pairs) -> the rows of each half together (Hugging Face's)."""
    rows, columns = weights.shape
    if not heads or rows % (2 * heads):
        raise CheckpointError(f"a RoPE projection of {rows} rows for {heads} heads")
    pairs = weights.reshape(heads, rows // heads // 2, 2, columns)
    return pairs.transpose(0, 2, 1, 3).reshape(rows, columns)


# `general.architecture` -> its record.
ARCHITECTURES = {}


def add_gguf_architecture(record):
    """Adds `record` (a `GGUFArchitecture`) to what `from_gguf` reads; a name taken by
    another record is refused."""
    if not isinstance(record, GGUFArchitecture):
        raise TypeError(f"Expected a GGUFArchitecture. Received: {type(record).__name__}")
    known = ARCHITECTURES.get(record.name)
    if known is not None and known != record:
        raise ValueError(f"Expected a new GGUF architecture; {record.name!r} is read already")
    ARCHITECTURES[record.name] = record
    return record


def gguf_architecture(file):
    """The record of an opened `GGUFFile`'s architecture; a `CheckpointError` names the
    ones we read."""
    architecture = file.architecture()
    if architecture not in ARCHITECTURES:
        raise CheckpointError(
            f"{file.path}: general.architecture {architecture!r} is not one we read "
            f"({sorted(ARCHITECTURES)})"
        )
    return ARCHITECTURES[architecture]
