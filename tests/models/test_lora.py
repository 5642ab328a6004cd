"""LoRA fine-tuning (`enable_lora`, `.lora.h5` adapters, `merged_copy`) on every
family's backbone and task models, on TensorFlow, JAX and PyTorch; its errors."""

import keras
import numpy as np
import pytest

from keras_attn.models import BertSpanQA, BertTokenClassifier
from tests import model_harness as harness

pytestmark = pytest.mark.backends("tensorflow", "jax", "torch")

_LM_INPUTS = harness._ids((2, 8))
_SEQ2SEQ_INPUTS = {
    "encoder_token_ids": harness._ids((2, 6)),
    "decoder_token_ids": harness._ids((2, 7), seed=1),
}
_ENCODER = harness.encoder_inputs()
FAMILIES = {
    "bert": (harness.tiny_bert, _ENCODER, "sequence_output"),
    "bert_classifier": (harness.tiny_bert_classifier, _ENCODER, None),
    "bert_token_classifier": (
        harness._task(BertTokenClassifier, harness.tiny_bert, num_classes=3),
        _ENCODER,
        None,
    ),
    "bert_span_qa": (harness._task(BertSpanQA, harness.tiny_bert), _ENCODER, "start_logits"),
    "xlnet": (harness.tiny_xlnet, _ENCODER, "sequence_output"),
    "xlnet_classifier": (harness.tiny_xlnet_classifier, _ENCODER, None),
    "gpt": (harness.tiny_gpt, _LM_INPUTS, None),
    "transformer_xl": (harness.tiny_transformer_xl, _LM_INPUTS, None),
    "seq2seq": (harness.tiny_seq2seq, _SEQ2SEQ_INPUTS, None),
}


@pytest.mark.slow
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_lora_on_every_family(family, tmp_path):
    make, inputs, output_key = FAMILIES[family]
    deeper = harness.seeded(lambda: make(num_layers=3))
    harness.run_lora_test(make, inputs, tmp_path, output_key, other_architecture=deeper)


def _backbone():
    return harness.tiny_bert()


def test_targets_alpha_and_the_parameter_share():
    model = _backbone()
    total = model.count_params()
    model.enable_lora(2, target_names=["query", "key", "value", "attention_output"], alpha=4)
    adapted = [layer for layer in model._flatten_layers() if getattr(layer, "lora_enabled", 0)]
    assert len(adapted) == 4 * 2 and {layer.lora_alpha for layer in adapted} == {4}
    trained = sum(int(np.prod(w.shape)) for w in model.trainable_weights)
    # Keras's EinsumDense LoRA: A has the kernel's shape but its last axis (rank 2
    # instead), B is (rank, last axis). Query, key, value kernels (16, 2 heads, 8):
    # A (16, 2, 2) + B (2, 8); the output's (2, 8, 16): A (2, 8, 2) + B (2, 16).
    per_block = 3 * (16 * 2 * 2 + 2 * 8) + (2 * 8 * 2 + 2 * 16)
    assert trained == 2 * per_block and trained < 0.2 * total


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda m: m.enable_lora(0), "rank"),
        (lambda m: m.enable_lora(4, alpha=-1), "alpha"),
        (lambda m: m.enable_lora(4, target_names=["attention"]), r"name no Dense.*'query'"),
        # a string is not a list of names: its characters name no projection
        (lambda m: m.enable_lora(4, target_names="query"), "name no Dense"),
        (lambda m: m.save_lora_weights("adapters.lora.h5"), "no LoRA adapters to save"),
        (lambda m: m.merged_copy(), "no LoRA adapters to merge"),
    ],
)
def test_bad_calls_are_named(call, match):
    with pytest.raises(ValueError, match=match):
        call(_backbone())


def test_lora_is_enabled_once_and_files_are_checked(tmp_path):
    model = _backbone()
    model.enable_lora(4)
    with pytest.raises(ValueError, match="already enabled.*rank 4"):
        model.enable_lora(8)
    with pytest.raises(ValueError, match=r"ending in '\.lora\.h5'"):
        model.save_lora_weights(tmp_path / "adapters.h5")
    (tmp_path / "bad.lora.h5").write_bytes(b"not hdf5")
    with pytest.raises(ValueError, match="not a readable .lora.h5 file"):
        _backbone().load_lora_weights(tmp_path / "bad.lora.h5")


def test_adapters_of_other_targets_are_refused_by_name(tmp_path):
    model = _backbone()
    model.enable_lora(4, target_names=["query", "key"])
    model.save_lora_weights(tmp_path / "qk.lora.h5")
    other = _backbone()
    other.enable_lora(4)  # query and value: the same shapes as query and key
    with pytest.raises(ValueError, match=r"another architecture.*self_attention/key has"):
        other.load_lora_weights(tmp_path / "qk.lora.h5")


def _rewritten(source, target, attrs=None, drop=None, arrays=None):
    """A copy of the adapter file `source` with attributes replaced, a group dropped or
    its arrays replaced: what a hostile user hands `load_lora_weights`."""
    import shutil

    import h5py

    shutil.copyfile(source, target)
    with h5py.File(target, "r+") as f:
        for key, value in (attrs or {}).items():
            if value is None:
                del f.attrs[key]
            else:
                f.attrs[key] = value
        if drop:
            del f[drop]
        for name, value in (arrays or {}).items():
            del f[name]
            f[name] = value
    return target


def _untouched(model):
    """No LoRA and every weight trainable: what a refused load must leave."""
    return model.lora_rank is None and all(w.trainable for w in model.weights)


def test_a_refused_adapter_file_leaves_the_model_as_it_was(tmp_path):
    import json

    import h5py

    model = _backbone()
    model.enable_lora(4)
    good = tmp_path / "good.lora.h5"
    model.save_lora_weights(good)
    with h5py.File(good, "r") as f:
        signature = json.loads(f.attrs["signature"])
        b_shape = f["0000/lora_kernel_b"].shape
    huge = [[name, kind, [*a[:-1], 10**6], [10**6, b[-1]]] for name, kind, a, b in signature]
    cases = [
        # a rank past every kernel's side: refused before anything is allocated
        ({"attrs": {"rank": 10**6, "signature": json.dumps(huge)}}, r"says rank 1000000.*at most"),
        ({"attrs": {"rank": 8}}, r"another architecture"),  # signature says rank 4
        ({"attrs": {"signature": "{not json"}}, r"damaged \.lora\.h5 file \(Expecting"),
        ({"attrs": {"targets": None}}, r"damaged \.lora\.h5 file"),  # was a raw KeyError
        ({"attrs": {"paths": json.dumps([])}}, r"damaged .*malformed"),
        ({"attrs": {"alpha": float("nan")}}, r"damaged .*alpha nan"),  # NaN outputs else
        ({"attrs": {"rank": 0}}, r"damaged .*rank 0"),
        ({"drop": "0001"}, r"damaged .*arrays"),
        ({"arrays": {"0000/lora_kernel_a": np.zeros((3, 4), "float32")}}, r"arrays 0000 have"),
        ({"arrays": {"0000/lora_kernel_b": np.full(b_shape, b"x")}}, r"not floating-point"),
        ({"attrs": {"targets": json.dumps(["nothing_here"])}}, r"targets name no projection"),
    ]
    for index, (change, message) in enumerate(cases):
        crafted = _rewritten(good, tmp_path / f"crafted{index}.lora.h5", **change)
        fresh = _backbone()
        with pytest.raises(ValueError, match=message) as caught:
            fresh.load_lora_weights(crafted)
        assert str(crafted) in str(caught.value)
        assert _untouched(fresh), message
    (tmp_path / "cut.lora.h5").write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    with pytest.raises(ValueError, match=r"cut\.lora\.h5 is (not a readable|a damaged)"):
        _backbone().load_lora_weights(tmp_path / "cut.lora.h5")
    # Refused into a model that has adapters: its own adapters are kept as they were.
    other = _backbone()
    other.enable_lora(4, target_names=["query", "key"])
    numpy = keras.ops.convert_to_numpy
    before = [numpy(w) for w in other.trainable_weights]
    with pytest.raises(ValueError, match="another architecture"):
        other.load_lora_weights(_rewritten(good, tmp_path / "s.lora.h5", drop=None))
    after = [numpy(w) for w in other.trainable_weights]
    assert all(np.array_equal(a, b) for a, b in zip(before, after, strict=True))


def test_lora_on_projections_kept_in_gguf_blocks(tmp_path):
    """A Llama whose query and value projections stay in GGUF's blocks (`kernel_formats`,
    as `from_gguf(path, keep_blocks=True)` builds them): LoRA puts float adapters on
    them and nothing else trains; the adapter file and a `.keras` file both bring the
    adapters back; merging them into the blocks is refused by name."""
    from keras_attn.models import LlamaLanguageModel

    formats = {f"transformer_layer_{i}": {"query": "Q8_0", "value": "Q4_0"} for i in range(2)}

    def kept():
        keras.utils.set_random_seed(0)
        model = LlamaLanguageModel(40, 2, 2, 64, 64, kernel_formats=formats)
        model(_LM_INPUTS)
        rng = np.random.default_rng(2)
        for layer in model._flatten_layers():
            if hasattr(layer, "block_format"):  # small random blocks, finite scales
                raw = rng.integers(0, 256, layer.blocks.shape).astype("uint8")
                step = 34 if layer.block_format == "Q8_0" else 18
                raw.reshape(len(raw), -1, step)[..., :2] = np.frombuffer(
                    np.float16(0.01).tobytes(), "uint8"
                )
                layer.blocks.assign(raw)
        return model

    model = kept()
    before = keras.ops.convert_to_numpy(model(_LM_INPUTS))
    model.enable_lora(2)
    assert sorted({w.path.split("/")[-2] for w in model.trainable_weights}) == ["query", "value"]
    assert {w.name for w in model.trainable_weights} == {"lora_kernel_a", "lora_kernel_b"}
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(model(_LM_INPUTS)), before)
    for weight in model.trainable_weights:
        weight.assign(np.random.default_rng(3).normal(size=weight.shape).astype("float32"))
    adapted = keras.ops.convert_to_numpy(model(_LM_INPUTS))
    assert np.abs(adapted - before).max() > 1e-3
    model.save_lora_weights(tmp_path / "kept.lora.h5")
    fresh = kept()
    fresh.load_lora_weights(tmp_path / "kept.lora.h5")
    np.testing.assert_allclose(keras.ops.convert_to_numpy(fresh(_LM_INPUTS)), adapted, atol=1e-6)
    model.save(tmp_path / "kept.keras")
    reloaded = keras.saving.load_model(tmp_path / "kept.keras")
    assert reloaded.lora_rank == 2
    np.testing.assert_allclose(keras.ops.convert_to_numpy(reloaded(_LM_INPUTS)), adapted, atol=1e-6)
    with pytest.raises(ValueError, match="Merging adapters into projections kept in GGUF"):
        model.merged_copy()
