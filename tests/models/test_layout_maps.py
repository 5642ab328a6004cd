"""Layout maps read off the models (`keras_attn.models.layout_maps`): every weight of every
registered model class has a rule, a weight without one is named, the splits follow
Megatron's column/row pairs and fall back when a mesh axis does not divide, and the
large configurations keep at most a sixth of their bytes per device on a 1 x 8 mesh.

The layouts' effect (sharded training equal to one device) is checked on 8 host
devices in tests/training/test_model_parallel.py."""

import math

import keras
import numpy as np
import pytest

from keras_attn.models import (
    BertBackbone,
    BertClassifier,
    BertMultipleChoice,
    BertPretrainer,
    DebertaV3Backbone,
    DebertaV3MaskedLM,
    Distiller,
    ElectraPretrainer,
    ElmoBiLM,
    EntityTyping,
    ErnieBackbone,
    ErniePretrainer,
    FeatureBasedClassifier,
    FeatureBasedTagger,
    GemmaLanguageModel,
    GPTFineTuner,
    GPTLanguageModel,
    KagNet,
    LlamaLanguageModel,
    RobertaBackbone,
    TransformerSeq2Seq,
    TransformerXL,
    XLNetBackbone,
    XLNetPretrainer,
    model_structure,
    registry,
)
from keras_attn.models.layout_maps import (
    COLUMN,
    REPLICATED,
    ROW,
    TABLE,
    partition_spec,
    sharding_roles,
)
from tests.model_harness import tiny_bert

pytestmark = pytest.mark.backends("tensorflow", "jax", "torch")

V, SIZE = 48, dict(num_layers=2, num_heads=2, hidden_dim=16, intermediate_dim=32)


def _backbones():
    return {
        "bert": BertBackbone(V, **SIZE, max_sequence_length=8, dropout=0.1),
        "roberta": RobertaBackbone(V, **SIZE, max_sequence_length=12),
        "deberta": DebertaV3Backbone(V, **SIZE, max_sequence_length=16, position_buckets=4),
        "xlnet": XLNetBackbone(V, **SIZE),
        "gpt": GPTLanguageModel(V, **SIZE, max_sequence_length=8),
        "llama": LlamaLanguageModel(V, **SIZE, num_key_value_heads=1),
        "gemma": GemmaLanguageModel(V, **SIZE, head_dim=8, window=3, global_every=2),
        "transformer_xl": TransformerXL(V, **SIZE, segment_length=4, memory_length=4),
        "seq2seq": TransformerSeq2Seq(V, **SIZE, max_sequence_length=8),
        "ernie": ErnieBackbone(
            V, 5, **SIZE, num_knowledge_layers=1, entity_dim=8, entity_num_heads=2
        ),
        "elmo": ElmoBiLM(
            V, num_layers=2, hidden_dim=16, projection_dim=8, character_cnn=True, filters=[(2, 4)]
        ),
        "kagnet": KagNet(
            BertBackbone(V, **SIZE, max_sequence_length=8),
            7,
            4,
            2,
            schema_sizes=(4, 2, 2, 3),
            concept_dim=8,
            relation_dim=4,
            lstm_units=8,
            hidden_dim=8,
        ),
    }


def _every_model():
    """A tiny model of every class the registry knows, the heads included."""
    backbones = _backbones()
    models = list(backbones.values())
    for family in registry.families():
        backbone = backbones[family.name]
        models += [family.head(task, backbone, num_classes=3) for task in sorted(family.heads)]
    bert, xlnet = backbones["bert"], backbones["xlnet"]
    small = BertBackbone(V, 1, 2, 8, 16, max_sequence_length=8, embedding_dim=16)
    models += [
        BertPretrainer(bert, sentence_objective="nsp"),
        BertMultipleChoice(bert, num_choices=2),
        ElectraPretrainer(small, bert, unigram_generator=True, unigram_counts=np.ones(V)),
        XLNetPretrainer(xlnet),
        DebertaV3MaskedLM(backbones["deberta"]),
        Distiller(BertClassifier(bert, 3), BertClassifier(small, 3)),
        FeatureBasedClassifier(bert, 2, lstm_units=4),
        GPTFineTuner(backbones["gpt"], "multiple_choice", extract_token_id=3, num_choices=2),
        FeatureBasedTagger(bert, 2, features="last", lstm_units=4),
        EntityTyping(backbones["ernie"], 3),
        ErniePretrainer(backbones["ernie"]),
    ]
    return models


def test_every_weight_of_every_registered_model_has_a_rule():
    models = _every_model()
    known = {cls for family in registry.families() for cls in family.model_classes()}
    assert known <= {type(model) for model in models}  # a new class needs a case here
    for model in models:
        roles = {id(v): role for v, role, _, _ in sharding_roles(model)}
        missing = [w.path for w in model.weights if id(w) not in roles]
        assert not missing, f"{type(model).__name__}: {missing}"
        # The large kernels are split, the norms and biases are not.
        for variable, role, _, _ in sharding_roles(model):
            name = variable.path.rsplit("/", 1)[-1]
            if name in ("gamma", "beta", "bias"):
                assert role == REPLICATED, variable.path
            whole = ("_cell/", "convolution_")  # recurrent cells and convolutions
            if (
                name == "kernel"
                and len(variable.shape) > 1
                and not any(part in variable.path for part in whole)
            ):
                assert role in (COLUMN, ROW), variable.path  # (LoRA's: lora_kernel_a, _b)
            if any(part in variable.path for part in whole):  # read at every step, or small
                assert role == REPLICATED, variable.path


def test_megatron_pairs_column_then_row():
    roles = {v.path: (role, i, o) for v, role, i, o in sharding_roles(_backbones()["bert"])}
    block = "transformer_layer_0/"
    for name in ("query", "key", "value"):  # (hidden, heads, head_dim): out by heads
        assert roles[f"{block}self_attention/{name}/kernel"] == (COLUMN, [0], [1, 2])
    # (heads, head_dim, hidden): in by heads
    assert roles[f"{block}self_attention/attention_output/kernel"] == (ROW, [0, 1], [2])
    assert roles[f"{block}feedforward_intermediate_dense/kernel"][0] == COLUMN
    assert roles[f"{block}feedforward_output_dense/kernel"][0] == ROW
    assert roles["token_embedding/embeddings"][0] == TABLE
    assert roles[f"{block}self_attention_layer_norm/gamma"][0] == REPLICATED


def test_lora_adapters_and_shared_layers_have_rules():
    backbone = tiny_bert()
    backbone.enable_lora(2)
    roles = {v.path: role for v, role, _, _ in sharding_roles(backbone)}
    lora = [path for path in roles if "lora_kernel" in path]
    assert lora and all(roles[path] == REPLICATED for path in lora)
    for mode in ("all", "attention", "feedforward"):
        shared = tiny_bert(share_layers=mode)
        assert len(sharding_roles(shared)) == len(shared.variables)  # each shared one once


def test_a_weight_of_no_rule_is_named():
    class Mixed(keras.layers.Layer):
        def build(self, shape):
            self.mix = self.add_weight(name="mix", shape=(shape[-1], shape[-1]))
            self.scale = self.add_weight(name="scale", shape=(shape[-1],))  # a vector: whole

        def call(self, x):
            return keras.ops.matmul(x, self.mix) * self.scale

    inputs = keras.Input((4,))
    model = keras.Model(inputs, Mixed(name="mixed")(keras.layers.Dense(4)(inputs)))
    with pytest.raises(ValueError, match=r"'mixed/mix' \(4, 4\) of a Mixed: declare its role"):
        sharding_roles(model)
    Mixed.layout_roles = {"mix": COLUMN}
    roles = {v.path: role for v, role, _, _ in sharding_roles(model)}
    assert roles["mixed/mix"] == COLUMN and roles["mixed/scale"] == REPLICATED


@pytest.mark.parametrize(
    "shape, role, inputs, outputs, sizes, expected",
    [
        # Megatron: a column kernel split by its output, a row kernel by its input
        ((16, 32), COLUMN, [0], [1], [("model", 4), ("batch", 1)], (None, "model")),
        ((32, 16), ROW, [0], [1], [("model", 4), ("batch", 1)], ("model", None)),
        # the data axis takes another axis of the same kernel (fully sharded)
        ((16, 32), COLUMN, [0], [1], [("model", 4), ("batch", 2)], ("batch", "model")),
        # BERT-base's 12 heads over 8 devices: the head size instead
        ((768, 12, 64), COLUMN, [0], [1, 2], [("model", 8), ("batch", 1)], (None, None, "model")),
        ((12, 64, 768), ROW, [0, 1], [2], [("model", 8), ("batch", 1)], (None, "model", None)),
        # GPT-2's 50,257 tokens: the table splits on its hidden axis
        ((50257, 768), TABLE, [], [], [("model", 8), ("batch", 1)], (None, "model")),
        ((30522, 768), TABLE, [], [], [("model", 2), ("batch", 1)], ("model", None)),
        # a classifier's (16, 3): split by its input; nothing divisible: whole
        ((16, 3), COLUMN, [0], [1], [("model", 4), ("batch", 1)], ("model", None)),
        ((6, 3), COLUMN, [0], [1], [("model", 4), ("batch", 1)], (None, None)),
        ((16,), REPLICATED, [], [], [("model", 4), ("batch", 2)], (None,)),
    ],
)
def test_partition_specs(shape, role, inputs, outputs, sizes, expected):
    assert partition_spec(shape, role, inputs, outputs, sizes) == expected


def _mesh(shape):
    """A mesh of named devices: a layout map is built without touching them."""
    devices = [f"cpu:{index}" for index in range(math.prod(shape))]
    return keras.distribution.DeviceMesh(shape, ["batch", "model"], devices)


@pytest.mark.parametrize(
    "name, build",
    [
        ("BERT-base", lambda: BertBackbone.from_size("base", vocabulary_size=30522)),
        ("GPT-2 small", lambda: GPTLanguageModel(50257, 12, 12, 768, 3072, 1024)),
    ],
)
def test_large_models_keep_a_sixth_per_device_on_eight(name, build):
    """Per-device bytes read off the layout map of the real configuration (its
    structure: no weights allocated); benchmarks/model_parallel.py allocates them."""
    structure = model_structure(build)
    layouts = structure.get_layout_map(_mesh((1, 8)))
    total = per_device = 0
    for variable in structure.weights:
        size = math.prod(variable.shape) * 4
        layout = layouts[variable.path]
        split = 8 if layout is not None and "model" in layout.axes else 1
        total, per_device = total + size, per_device + size / split
    print(f"{name}: {per_device / 2**20:.1f} of {total / 2**20:.1f} MiB per device")
    assert per_device <= total / 6, (name, per_device / total)


def test_layout_map_keys_are_exact_paths_and_axis_names_are_checked():
    backbone = tiny_bert()
    layouts = backbone.get_layout_map(_mesh((2, 4)))
    query = "transformer_layer_1/self_attention/query/kernel"
    assert layouts[query].axes == ("batch", None, "model")  # 2 heads: the head size
    assert layouts["token_embedding/embeddings"].axes == ("model", "batch")
    assert layouts["embeddings_layer_norm/gamma"] is None  # replicated: no key
    assert set(layouts) <= {w.path for w in backbone.weights}
    with pytest.raises(ValueError, match=r"`model_parallel_dim_name` to name an axis"):
        backbone.get_layout_map(_mesh((2, 4)), model_parallel_dim_name="tensor")


@pytest.mark.parametrize("cls", [BertBackbone, GPTLanguageModel])
def test_get_layout_map_on_the_class_as_keras_hub_users_call_it(cls):
    """On the class: the map of its usual size's structure, its keys matching every
    block of any depth; for a model of that size, what the model's own map says."""
    mesh = _mesh((2, 4))
    on_class = cls.get_layout_map(mesh)
    size = "base" if cls is BertBackbone else "small"  # GPT-2 small
    structure = model_structure(lambda: cls.from_size(size))
    on_model = structure.get_layout_map(mesh)
    for variable in structure.weights:
        mine, theirs = on_class[variable.path], on_model[variable.path]
        assert (mine and mine.axes) == (theirs and theirs.axes), variable.path
    deeper = "transformer_layer_40/feedforward_output_dense/kernel"  # any depth
    assert on_class[deeper].axes == on_model[deeper.replace("40", "0")].axes
    assert on_class["transformer_layer_4/feedforward_layer_norm/gamma"] is None
    with pytest.raises(ValueError, match="Expected `size` one of"):
        cls.get_layout_map(mesh, size="colossal")
    with pytest.raises(ValueError, match="`size` is for get_layout_map on the class"):
        structure.get_layout_map(mesh, size="base")
    with pytest.raises(ValueError, match="BertClassifier has no sizes of its own"):
        BertClassifier.get_layout_map(mesh)


def test_a_structure_takes_no_memory_and_leaves_the_random_state():
    def build():
        return BertBackbone(V, **SIZE, max_sequence_length=8, dropout=0.1)

    keras.utils.set_random_seed(7)
    expected = build().get_weights()
    keras.utils.set_random_seed(7)
    structure = model_structure(build)
    assert all(v._value is None for v in structure.weights)  # nothing allocated
    again = build().get_weights()
    assert all(np.array_equal(a, b) for a, b in zip(expected, again, strict=True))
