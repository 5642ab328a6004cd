"""A model written back as a GGUF file that llama.cpp runs (after LoRA fine-tuning, say):
the weights under llama.cpp's names and layout, the rest of the metadata (tokenizer,
chat template, sizes) carried over from the GGUF file the model was read from.

The inverse of `GGUFArchitecture.load`: the family's Hugging Face names
(`GGUFArchitecture.hf_weights`) back to GGUF names, the query and key rows interleaved
again where the architecture's converter does it, the norm offset added back; matrices
quantised with `gguf`'s own quantisers, vectors kept float32 (as llama.cpp's converter
does). The file is written beside its path and renamed into place when complete.
"""

import os
import pathlib
import re
import tempfile

import numpy as np

from keras_attn.checkpoints.checkpoint_errors import CheckpointError

# quantization -> (GGML tensor type, llama.cpp's `general.file_type`) by their names in
# `gguf`; the 4-bit ones are llama.cpp's legacy blocks, the ones `gguf` can quantise.
QUANTIZATIONS = {
    "f32": ("F32", "ALL_F32"),
    "f16": ("F16", "MOSTLY_F16"),
    "bf16": ("BF16", "MOSTLY_BF16"),
    "q8_0": ("Q8_0", "MOSTLY_Q8_0"),
    "q4_0": ("Q4_0", "MOSTLY_Q4_0"),
    "q4_1": ("Q4_1", "MOSTLY_Q4_1"),
}
# Keys the writer sets itself rather than copying from the source file.
_WRITTEN = ("general.architecture", "general.file_type", "general.quantization_version")
_NOT_COPIED = (*_WRITTEN, "general.alignment")


def interleave_rope_rows(weights, heads):
    """Hugging Face's query or key rows `(heads * d, in)` -> GGML's (each head's two
    halves interleaved): the inverse of `architectures.rope_halves`."""
    rows, columns = weights.shape
    if not heads or rows % (2 * heads):
        raise CheckpointError(f"a RoPE projection of {rows} rows for {heads} heads")
    halves = weights.reshape(heads, 2, rows // heads // 2, columns)
    return halves.transpose(0, 2, 1, 3).reshape(rows, columns)


def gguf_tensors(record, config, hf_weights):
    """`{GGUF name: float32 array}` of a model's Hugging Face-named weights, in the
    layout `record`'s converter writes (the inverse of `record.transform`)."""
    patterns = [
        (re.compile(re.escape(ours).replace(r"\{\}", r"(\d+)") + "$"), theirs)
        for theirs, ours in record.tensor_names.items()
    ]
    heads = {
        ".attn_q.": config.get("num_attention_heads"),
        ".attn_k.": config.get("num_key_value_heads") or config.get("num_attention_heads"),
    }
    out, unnamed = {}, []
    for name, values in hf_weights.items():
        gguf_name = next(
            (theirs.format(*m.groups()) for p, theirs in patterns if (m := p.match(name))),
            None,
        )
        if gguf_name is None:
            unnamed.append(name)
            continue
        if record.interleaved_rope_rows:
            for part, count in heads.items():
                if part in gguf_name and gguf_name.endswith(".weight"):
                    values = interleave_rope_rows(values, count)
        if record.norm_offset and gguf_name.endswith("norm.weight"):
            values = values + record.norm_offset
        out[gguf_name] = np.ascontiguousarray(values, "float32")
    if unnamed:
        raise CheckpointError(
            f"no GGUF name for the weight(s) {unnamed[:6]} in architecture {record.name!r}"
        )
    return out


def check_quantization(quantization):
    if quantization not in QUANTIZATIONS:
        raise ValueError(
            f"Expected quantization to be one of {sorted(QUANTIZATIONS)}. "
            f"Received: quantization={quantization!r}"
        )


def save_gguf(model, path, quantization="q8_0", source=None):
    """Writes `model` as a GGUF file llama.cpp loads (see `RMSNormDecoder.save_gguf`).

    Args:
        model: a `LlamaLanguageModel` or `GemmaLanguageModel` (LoRA weights merged: the
            file holds each kernel with its low-rank update added).
        path: the `.gguf` file to write (its folder must exist; an existing file is
            replaced only once the new one is complete).
        quantization: the matrices' type, one of `QUANTIZATIONS` (`"q8_0"` by default;
            `"f32"` keeps every weight exactly); 1-D weights stay float32, as do matrices
            whose rows do not split into the type's blocks.
        source: the GGUF file whose metadata the new file carries (tokenizer, chat
            template, hyperparameters); by default the file `from_gguf` read the model
            from. Its tensors must have the model's shapes.

    Returns:
        The path written, a `pathlib.Path`.

    Raises:
        ValueError: an unknown `quantization`, a path that is a folder or whose folder
            is missing, no `source` known, a model quantised by Keras.
        CheckpointError: a `source` whose architecture or tensor shapes are not the
            model's, a non-finite weight (all named).
    """
    import gguf

    from keras_attn.models.gguf.architectures import gguf_architecture
    from keras_attn.models.gguf.reader import GGUFFile

    check_quantization(quantization)
    path = pathlib.Path(path)
    if path.is_dir() or not path.parent.is_dir():
        raise ValueError(
            f"Expected path to be a file in an existing folder. Received: path={str(path)!r}"
        )
    source = source if source is not None else getattr(model, "gguf_source", None)
    if source is None:
        raise ValueError(
            "Expected source, the GGUF file whose tokenizer and metadata the new file "
            "carries (from_gguf records it; a model built or loaded otherwise needs it)"
        )
    if any(getattr(layer, "quantization_mode", None) for layer in model._flatten_layers()):
        raise ValueError(
            f"{type(model).__name__} holds weights quantised by Keras: save_gguf writes "
            "float weights (it quantises them itself: quantization=...)"
        )
    file = source if isinstance(source, GGUFFile) else GGUFFile(source)
    record = gguf_architecture(file)
    if record.hf_weights is None:
        raise CheckpointError(f"architecture {record.name!r}: no writer for its weights")
    config = record.config(file)
    tensors = gguf_tensors(record, config, record.hf_weights(model))
    _check_like(file, tensors)
    kind = gguf.GGMLQuantizationType[QUANTIZATIONS[quantization][0]]
    file_type = gguf.LlamaFileType[QUANTIZATIONS[quantization][1]]
    partial = tempfile.NamedTemporaryFile(
        dir=path.parent, prefix=f".{path.name}.", suffix=".partial", delete=False
    )
    partial.close()
    try:
        writer = gguf.GGUFWriter(partial.name, record.name)
        for key, value in file.metadata.items():
            if key in _NOT_COPIED:
                continue
            if value == []:
                raise CheckpointError(
                    f"{file.path}: metadata key {key} is an empty array, which gguf's writer "
                    "refuses to write"
                )
            # Strings as the file's own bytes where they were no UTF-8 (read with U+FFFD).
            value = file.undecodable.get(key, value)
            value_type, item_type = file.types[key]
            writer.add_key_value(
                key,
                value,
                gguf.GGUFValueType(value_type),
                None if item_type is None else gguf.GGUFValueType(item_type),
            )
        writer.add_file_type(int(file_type))
        writer.add_quantization_version(gguf.GGML_QUANT_VERSION)
        for name, values in tensors.items():
            _add_tensor(writer, gguf, name, values, kind)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
        os.replace(partial.name, path)
    finally:
        if os.path.exists(partial.name):
            os.remove(partial.name)
    return path


def _check_like(file, tensors):
    """The tensors to write are the source file's, shape for shape (so its metadata
    describes them), and finite."""
    ours = {name: tuple(values.shape) for name, values in tensors.items()}
    theirs = dict(file.shapes)
    missing = sorted(set(theirs) - set(ours))
    extra = sorted(set(ours) - set(theirs))
    wrong = sorted(n for n in set(ours) & set(theirs) if ours[n] != tuple(theirs[n]))
    if missing or extra or wrong:
        detail = "; ".join(
            f"{what}: {names[:4]}"
            for what, names in (("not in the model", missing), ("not in the file", extra))
            if names
        )
        if wrong:
            detail += f"{'; ' if detail else ''}other shapes: " + ", ".join(
                f"{n} {ours[n]} vs {tuple(theirs[n])}" for n in wrong[:4]
            )
        raise CheckpointError(
            f"{file.path}: its tensors are not the model's ({detail}); its metadata would "
            "describe another model"
        )
    bad = [name for name, values in tensors.items() if not np.isfinite(values).all()]
    if bad:
        raise CheckpointError(f"non-finite values in the model's {bad[:6]}")


def _add_tensor(writer, gguf, name, values, kind):
    block = gguf.GGML_QUANT_SIZES[kind][0]
    if values.ndim < 2 or values.shape[-1] % block:
        kind = gguf.GGMLQuantizationType.F32
    if kind == gguf.GGMLQuantizationType.F32:
        writer.add_tensor(name, values)
        return
    data = gguf.quants.quantize(values, kind)
    writer.add_tensor(name, data, raw_shape=data.shape, raw_dtype=kind)
