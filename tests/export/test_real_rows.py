"""`RealRows`: with a `ServingPlan` (the plan of a served copy) an encoder block runs its
projections, norms and feed-forward net on the real tokens' rows alone; its outputs
equal the padded block's at every real token, zeros at padding positions; a stack
gathers its input once; without the plan nothing changes."""

import contextlib

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_attn.export.serving_plan import FUSED_NORM_ROWS, ServingPlan
from keras_attn.layers import TransformerEncoderBlock, row_products

LENGTHS = np.array([[7], [3], [5], [1]])
MASK = np.arange(7)[None] < LENGTHS

BLOCKS = {
    "post-LN, GELU": dict(activation="gelu"),
    "pre-LN": dict(norm_first=True),
    "GQA, RoPE, qk-norm": dict(num_key_value_heads=2, rotary_max_wavelength=10000, qk_norm=True),
    "T5 bias": dict(position_bias="t5"),
    "Gemma-shaped": dict(
        gated_feedforward=True,
        activation="silu",
        normalization="rms_norm",
        norm_first=True,
        post_norms=True,
        use_bias=False,
    ),
    "additive score": dict(score="additive"),
}


@contextlib.contextmanager
def planned(plan, *layers):
    """Inside it, `layers` (and their sub-layers) compute with `plan`, as a served copy's
    layers do; after it, with Keras's own ops again."""
    for layer in layers:
        plan.attach(layer)
    try:
        yield
    finally:
        for layer in layers:
            for sublayer in layer._flatten_layers():
                sublayer.__dict__.pop("compute_plan", None)


def served(function, *layers, plan=None):
    """`function` of `layers` traced as an export traces it (their plan a `ServingPlan`)."""
    plan = ServingPlan() if plan is None else plan

    @tf.function
    def traced(*args):
        with planned(plan, *layers):
            return function(*args)

    return traced


@pytest.mark.parametrize("options", list(BLOCKS.values()), ids=list(BLOCKS))
def test_a_served_block_equals_the_block_at_real_tokens(options):
    keras.utils.set_random_seed(0)
    block = TransformerEncoderBlock(num_heads=4, intermediate_dim=48, **options)
    x = np.random.default_rng(0).normal(size=(4, 7, 32)).astype("float32")
    expected = block(x, padding_mask=MASK).numpy()
    traced = served(lambda x, mask: block(x, padding_mask=mask), block)
    out = traced(x, MASK).numpy()
    np.testing.assert_allclose(out[MASK], expected[MASK], atol=2e-6)
    assert not out[~MASK].any()
    graph_ops = {op.type for op in traced.get_concrete_function(x, MASK).graph.get_operations()}
    assert {"Where", "Cumsum", "GatherV2"} <= graph_ops


def test_an_attention_mask_is_kept():
    keras.utils.set_random_seed(1)
    block = TransformerEncoderBlock(num_heads=2, intermediate_dim=16)
    x = np.random.default_rng(1).normal(size=(4, 7, 8)).astype("float32")
    causal = np.tril(np.ones((7, 7), bool))[None].repeat(4, axis=0)
    expected = block(x, padding_mask=MASK, attention_mask=causal).numpy()
    traced = served(lambda x, m, a: block(x, padding_mask=m, attention_mask=a), block)
    np.testing.assert_allclose(traced(x, MASK, causal).numpy()[MASK], expected[MASK], atol=2e-6)


def test_a_stack_gathers_its_input_once():
    """Each block's scatter feeds the next block's gather: the rows pass on as they are,
    one gather of the stack's input and one of each block's attention output (the
    other gathers are scatters: of the rows with a zero row after them)."""
    keras.utils.set_random_seed(2)
    blocks = [TransformerEncoderBlock(num_heads=2, intermediate_dim=16) for _ in range(3)]
    x = np.random.default_rng(2).normal(size=(4, 7, 8)).astype("float32")

    def stack(x, mask):
        for block in blocks:
            x = block(x, padding_mask=mask)
        return x

    expected = stack(x, MASK).numpy()
    traced = served(stack, *blocks)
    np.testing.assert_allclose(traced(x, MASK).numpy()[MASK], expected[MASK], atol=3e-6)
    graph = traced.get_concrete_function(x, MASK).graph
    kinds = [op.type for op in graph.get_operations()]
    gathers = [
        op
        for op in graph.get_operations()
        if op.type == "GatherV2" and op.inputs[0].op.type != "Pad"
    ]
    assert len(gathers) == 1 + len(blocks)
    assert kinds.count("Where") == 1


def test_no_padding_and_a_request_of_padding_alone():
    keras.utils.set_random_seed(3)
    block = TransformerEncoderBlock(num_heads=2, intermediate_dim=16)
    x = np.random.default_rng(3).normal(size=(2, 5, 8)).astype("float32")
    traced = served(lambda x, mask: block(x, padding_mask=mask), block)
    full = np.ones((2, 5), bool)
    np.testing.assert_allclose(traced(x, full).numpy(), block(x, padding_mask=full), atol=2e-6)
    empty = np.zeros((2, 5), bool)
    assert not traced(x, empty).numpy().any()


def test_only_served_graphs_with_a_padding_mask_take_rows():
    block = TransformerEncoderBlock(num_heads=2, intermediate_dim=16)
    x = np.ones((2, 5, 8), "float32")
    for function in (
        tf.function(lambda x, mask: block(x, padding_mask=mask)),  # not for TF Serving
        served(lambda x, mask: block(x), block),  # no mask
        served(lambda x, mask: block(x, padding_mask=mask, return_attention_scores=True), block),
    ):
        graph = function.get_concrete_function(x, np.ones((2, 5), bool)).graph
        assert "Cumsum" not in {op.type for op in graph.get_operations()}
    assert ServingPlan().real_rows(None) is None


def test_layers_quantized_otherwise_are_called_on_the_rows():
    """int4 kernels are not read as rows (`row_products.row_kernels`): those layers are
    called on the rows as one sequence."""
    keras.utils.set_random_seed(4)
    block = TransformerEncoderBlock(num_heads=2, intermediate_dim=16)
    x = np.random.default_rng(4).normal(size=(4, 7, 8)).astype("float32")
    block(x, padding_mask=MASK)
    for layer in block._flatten_layers():
        if isinstance(layer, (keras.layers.Dense, keras.layers.EinsumDense)):
            layer.quantize("int4")
    assert row_products.row_kernels([block.self_attention.query_dense]) is None
    expected = block(x, padding_mask=MASK).numpy()
    traced = served(lambda x, mask: block(x, padding_mask=mask), block)
    np.testing.assert_allclose(traced(x, MASK).numpy()[MASK], expected[MASK], atol=2e-6)
    graph = traced.get_concrete_function(x, MASK).graph
    assert "Cumsum" in {op.type for op in graph.get_operations()}


# Lengths of 8 requests: 292 real rows of 320 positions, more than `FUSED_NORM_ROWS`.
MANY = np.arange(40)[None] < np.array([[40], [38], [36], [34], [40], [32], [37], [35]])
# The block's compute dtype, and a product put in place of one layer's as oneDNN's int8
# export puts them (`ServingPlan(products, onednn=True)`), or as another replacement would
# (`onednn=False`), or none.
NORM_CASES = {
    "bfloat16": ("bfloat16", None),
    "float32, int8 export": ("float32", True),
    "float32, products not oneDNN's": ("float32", False),
    "float32": ("float32", None),
    "float64": ("float64", None),
}


@pytest.mark.parametrize("case", list(NORM_CASES.values()), ids=list(NORM_CASES))
@pytest.mark.parametrize("norm_first", [False, True], ids=["post-LN", "pre-LN"])
def test_many_rows_take_the_fused_layer_norm_and_few_keep_keras(case, norm_first):
    """`ServingPlan.normalize`: from `FUSED_NORM_ROWS` real rows on, the block's layer
    norms are written as Keras 2's fused form (a `FusedBatchNormV3` over the rows, which
    Grappler makes one `_MklLayerNorm` where oneDNN is on; tests/export/test_precision.py
    checks that), fewer rows keep Keras's own; both equal the block at real tokens. Only
    in exports for oneDNN's processors (bfloat16, float32 among oneDNN's int8 products):
    a float32 or float64 block keeps Keras's form, and so does a float32 one among
    products that are not oneDNN's."""
    dtype, onednn_products = case
    keras.utils.set_random_seed(5)
    block = TransformerEncoderBlock(
        num_heads=4, intermediate_dim=64, norm_first=norm_first, dtype=dtype
    )
    rng = np.random.default_rng(5)
    block.build((None, None, 32))
    for norm in (block.self_attention_layer_norm, block.feedforward_layer_norm):
        norm.gamma.assign(rng.uniform(0.5, 2, 32))
        norm.beta.assign(rng.normal(size=32))
    dense = block.feedforward_output_dense
    products = {id(dense): (dense, 1, lambda rows: tf.matmul(rows, dense.kernel) + dense.bias)}

    plan = ServingPlan(None if onednn_products is None else products, bool(onednn_products))
    traced = served(lambda x, mask: block(x, padding_mask=mask), block, plan=plan)

    # bfloat16 rounds to 8 significant bits: a value may land an ulp or two apart.
    tolerance = dict(atol=0.05, rtol=0.02) if dtype == "bfloat16" else dict(atol=2e-5)
    inputs_dtype = "float64" if dtype == "float64" else "float32"
    for mask in (MANY, MANY[:2]):
        assert (mask.sum() >= FUSED_NORM_ROWS) == (mask is MANY)
        x = 3 * rng.normal(size=(*mask.shape, 32)).astype(inputs_dtype)
        expected = keras.ops.convert_to_numpy(block(x, padding_mask=mask)).astype("float32")
        out = keras.ops.convert_to_numpy(traced(x, mask)).astype("float32")
        np.testing.assert_allclose(out[mask], expected[mask], **tolerance)
        assert not out[~mask].any()
    library = traced.get_concrete_function(x, mask).graph.as_graph_def().library  # any size
    branch_ops = [node.op for function in library.function for node in function.node_def]
    fused = dtype == "bfloat16" or onednn_products is True
    assert branch_ops.count("FusedBatchNormV3") == (2 if fused else 0)


def test_a_copy_run_eagerly_keeps_nothing_between_calls():
    """Traced, a plan keeps each mask's rows (one gather per stack); run eagerly (a serving
    copy called in Python) it keeps nothing, so calls do not pile up tensors, and the
    answers are the block's."""
    keras.utils.set_random_seed(6)
    block = TransformerEncoderBlock(num_heads=2, intermediate_dim=16)
    x = np.random.default_rng(6).normal(size=(4, 7, 8)).astype("float32")
    expected = block(x, padding_mask=MASK).numpy()
    plan = ServingPlan()
    with planned(plan, block):
        for _ in range(3):
            out = block(x, padding_mask=MASK).numpy()
            np.testing.assert_allclose(out[MASK], expected[MASK], atol=2e-6)
            assert not out[~MASK].any()
    assert plan._rows == {} and plan.scattered == {}
