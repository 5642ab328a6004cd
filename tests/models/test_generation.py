"""generate(): cache against full re-runs, beam search properties, sampling, bad arguments."""

import keras
import numpy as np
import pytest

from keras_attn.models import GenerationConfig, GPTLanguageModel, TransformerSeq2Seq

VOCABULARY, END = 40, 3


@pytest.fixture(scope="module")
def gpt():
    keras.utils.set_random_seed(1)
    model = GPTLanguageModel(
        VOCABULARY,
        num_layers=2,
        num_heads=2,
        hidden_dim=32,
        intermediate_dim=64,
        max_sequence_length=24,
        dropout=0.1,
    )
    return model


@pytest.fixture(scope="module")
def seq2seq():
    keras.utils.set_random_seed(2)
    model = TransformerSeq2Seq(
        VOCABULARY,
        num_layers=2,
        num_heads=2,
        hidden_dim=32,
        intermediate_dim=64,
        max_sequence_length=20,
        norm_first=True,
        score="additive",
    )
    return model


PROMPTS = [[5, 6, 7], [8], [9, 10, 11, 12, 13], [14, 15]]
SOURCES = np.array([[5, 6, 7, 8, 0, 0], [9, 10, 0, 0, 0, 0], [11, 12, 13, 14, 15, 16]], "int32")


def _both(gpt, seq2seq, **kwargs):
    """generate() on each model with the same settings."""
    return (
        gpt.generate(PROMPTS, 16, **kwargs),
        seq2seq.generate(SOURCES, 14, start_token_id=1, **kwargs),
    )


@pytest.mark.parametrize("strategy", ["greedy", "beam"])
@pytest.mark.parametrize("end_token_id, use_xla", [(None, True), (END, False)])
@pytest.mark.slow
def test_cache_gives_the_same_tokens_as_full_reruns(gpt, seq2seq, strategy, end_token_id, use_xla):
    """With and without XLA: each strategy once each way (compiling is the cost)."""
    cached = _both(
        gpt,
        seq2seq,
        strategy=strategy,
        num_beams=3,
        end_token_id=end_token_id,
        jit_compile=use_xla,
    )
    full = _both(
        gpt,
        seq2seq,
        strategy=strategy,
        num_beams=3,
        end_token_id=end_token_id,
        use_cache=False,
        jit_compile=use_xla,
    )
    for a, b in zip(cached, full, strict=True):
        np.testing.assert_array_equal(a, b)


def test_prompt_is_kept_and_greedy_follows_the_argmax(gpt):
    tokens = gpt.generate(PROMPTS, 12)
    for row, prompt in zip(tokens, PROMPTS, strict=True):
        assert row[: len(prompt)].tolist() == prompt
    # Re-check every generated token against the argmax of a full forward pass.
    logits = np.asarray(gpt(tokens))
    for row, prompt, row_logits in zip(tokens, PROMPTS, logits, strict=True):
        for t in range(len(prompt), 12):
            assert row[t] == np.argmax(row_logits[t - 1])


@pytest.mark.slow  # 9.6 s (greedy and beams have faster tests of their own)
@pytest.mark.parametrize("end_token_id", [None, END])
def test_one_beam_is_greedy(gpt, seq2seq, end_token_id):
    greedy = _both(gpt, seq2seq, end_token_id=end_token_id)
    beam = _both(gpt, seq2seq, strategy="beam", num_beams=1, end_token_id=end_token_id)
    for a, b in zip(greedy, beam, strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.slow
def test_wider_beams_never_score_below_greedy(gpt, seq2seq):
    rng = np.random.default_rng(0)
    prompts = rng.integers(4, VOCABULARY, (32, 3)).tolist()
    sources = rng.integers(4, VOCABULARY, (32, 6)).astype("int32")
    plain = dict(jit_compile=False, return_log_probs=True)  # many settings: skip compiling each
    for end_token_id in (None, END):
        _, greedy = gpt.generate(prompts, 12, end_token_id=end_token_id, **plain)
        _, greedy_s2s = seq2seq.generate(sources, 10, 1, end_token_id=end_token_id, **plain)
        for beams in (2, 4, 8):
            _, beam = gpt.generate(
                prompts, 12, strategy="beam", num_beams=beams, end_token_id=end_token_id, **plain
            )
            _, beam_s2s = seq2seq.generate(
                sources, 10, 1, strategy="beam", num_beams=beams, end_token_id=end_token_id, **plain
            )
            assert np.all(beam >= greedy - 1e-4), (beams, beam - greedy)
            assert np.all(beam_s2s >= greedy_s2s - 1e-4), (beams, beam_s2s - greedy_s2s)


def test_beam_search_keeps_its_own_score_right(gpt):
    """The log-probability the search accumulated equals a teacher-forced re-score."""
    config = GenerationConfig(max_length=16, strategy="beam", num_beams=4, end_token_id=END)
    tokens, searched, lengths = gpt._generate(
        PROMPTS, config, None, use_cache=True, jit_compile=True
    )
    rescored = np.asarray(gpt._sequence_log_probs(tokens, lengths))
    np.testing.assert_allclose(searched, rescored, atol=1e-3)


def test_length_penalty_prefers_longer_finished_beams(gpt):
    short = gpt.generate(PROMPTS, 16, strategy="beam", num_beams=6, end_token_id=END)
    long = gpt.generate(
        PROMPTS, 16, strategy="beam", num_beams=6, end_token_id=END, length_penalty=2.0
    )
    assert (long != 0).sum() >= (short != 0).sum()


def test_end_token_pads_the_rest(gpt):
    tokens = gpt.generate(PROMPTS, 16, strategy="sample", seed=3, end_token_id=END)
    for row, prompt in zip(tokens, PROMPTS, strict=True):
        generated = row[len(prompt) :].tolist()
        if END in generated:
            assert set(generated[generated.index(END) + 1 :]) <= {0}


@pytest.mark.slow
def test_sampling_is_reproducible_and_configurable(gpt):
    first = gpt.generate(PROMPTS, 16, strategy="sample", top_p=0.9, seed=11)
    again = gpt.generate(PROMPTS, 16, strategy="sample", top_p=0.9, seed=11)
    other = gpt.generate(PROMPTS, 16, strategy="sample", top_p=0.9, seed=12)
    np.testing.assert_array_equal(first, again)
    assert not np.array_equal(first, other)
    # top_k=1 (and a tiny temperature) leave only the argmax: greedy.
    greedy = gpt.generate(PROMPTS, 16)
    np.testing.assert_array_equal(
        gpt.generate(PROMPTS, 16, strategy="sample", top_k=1, seed=0), greedy
    )
    np.testing.assert_array_equal(
        gpt.generate(PROMPTS, 16, strategy="sample", temperature=1e-4, seed=0), greedy
    )


def test_second_call_does_not_retrace(gpt):
    gpt.generate(PROMPTS, 16, strategy="sample", top_k=5, seed=1)
    function = gpt.decode_function(
        GenerationConfig(strategy="sample", top_k=5)
    )  # the one generate() ran
    traces = function.experimental_get_tracing_count()
    gpt.generate(PROMPTS[::-1], 16, strategy="sample", top_k=5, seed=2)
    assert function.experimental_get_tracing_count() == traces


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(strategy="beam", num_beams=0), "num_beams"),
        (dict(strategy="sample", top_p=0.0), "top_p"),
        (dict(strategy="sample", top_p=1.5), "top_p"),
        (dict(strategy="sample", top_k=0), "top_k"),
        (dict(temperature=0), "temperature"),
        (dict(strategy="nucleus"), "strategy"),
        (dict(length_penalty=-1.0), "length_penalty"),
        (dict(max_length=5), "max_length"),
        (dict(max_length=25), "max_length"),
        (dict(prompt=[[5] * 30]), "prompt"),
        (dict(prompt=[[5, 0, 6]]), "right-padded"),
        (dict(prompt=[[]]), "at least one token"),
        # ids outside the vocabulary: XLA would clamp them to the last row, silently
        (dict(prompt=[[5, 10**6, 7]]), r"ids in \[0, 40\).*1000000 at row 0, position 1"),
        (dict(prompt=[[5, -3, 7]]), r"ids in \[0, 40\).*-3 at row 0, position 1"),
        (dict(prompt=np.array([[5, 40]])), r"Received: 40"),
        (dict(prompt=[[5, 10**12]]), r"Received: 1000000000000"),  # no int32 wrap-around
        (dict(prompt=[[5, 2.5]]), "integer token ids"),
        (dict(end_token_id=40), r"end_token_id.*\[0, 40\)"),
        # a beam per row of the batch, each with its own cache: bounded
        (dict(strategy="beam", num_beams=1_000_000), r"num_beams` to be an integer >= 1 and <= 64"),
        (dict(strategy="beam", num_beams=41), r"num_beams` <= 40 \(the model's vocabulary"),
    ],
)
def test_bad_generation_arguments(gpt, kwargs, match):
    arguments = dict(prompt=PROMPTS, max_length=16)
    arguments.update(kwargs)
    with pytest.raises(ValueError, match=match):
        gpt.generate(**arguments)


def test_bad_seq2seq_generation_arguments(seq2seq):
    with pytest.raises(ValueError, match="encoder_token_ids"):
        seq2seq.generate(np.ones((1, 30), "int32"), 10, start_token_id=1)
    with pytest.raises(ValueError, match="start_token_id"):
        seq2seq.generate(SOURCES, 10)
    with pytest.raises(ValueError, match="max_length"):
        seq2seq.generate(SOURCES, 21, start_token_id=1)
    with pytest.raises(ValueError, match=r"`encoder_token_ids` ids in \[0, 40\)"):
        seq2seq.generate([[4, 99]], 10, start_token_id=1)
    with pytest.raises(ValueError, match=r"`prompt` ids in \[0, 40\).*Received: 40"):
        seq2seq.generate(SOURCES, 10, start_token_id=40)


@pytest.mark.parametrize("strategy", ["greedy", "beam"])
def test_portable_decode_function_is_core_tensorflow_with_the_same_tokens(gpt, strategy):
    import tensorflow as tf

    from keras_attn.models.generation_mixin import pad_prompt

    config = GenerationConfig(max_length=16, strategy=strategy, num_beams=3, end_token_id=END)
    decode = gpt.decode_function(config, jit_compile=False, portable=True)
    ids, lengths = pad_prompt(PROMPTS, gpt.pad_token_id)
    padded = np.zeros((len(PROMPTS), 16), "int32")
    padded[:, : ids.shape[1]] = ids
    tokens, _ = decode(tf.constant(padded), tf.constant(lengths.astype("int32")))
    np.testing.assert_array_equal(tokens.numpy(), gpt.generate(PROMPTS, config=config))
    graph = decode.get_concrete_function(
        tf.constant(padded), tf.constant(lengths.astype("int32"))
    ).graph
    definition = graph.as_graph_def()
    op_types = {node.op for node in definition.node}
    op_types |= {node.op for function in definition.library.function for node in function.node_def}
    assert "TensorScatterUpdate" in op_types and not [op for op in op_types if op.startswith("Xla")]
    with pytest.raises(ValueError, match="jit_compile=False"):
        gpt.decode_function(config, portable=True)
    # Sampling too (`portable_sampling`): stateless draws, the seed in the graph.
    sample = config.replace(strategy="sample", top_k=3, temperature=2.0, seed=5)
    sampled = gpt.decode_function(sample, jit_compile=False, portable=True)
    arguments = (tf.constant(padded), tf.constant(lengths.astype("int32")))
    first, again = (sampled(*arguments)[0].numpy() for _ in range(2))
    np.testing.assert_array_equal(first, again)
    np.testing.assert_array_equal(first[:, : ids.shape[1]] * (ids > 0), ids)
    definition = sampled.get_concrete_function(*arguments).graph.as_graph_def()
    op_types = {node.op for node in definition.node}
    op_types |= {node.op for function in definition.library.function for node in function.node_def}
    assert "StatelessMultinomial" in op_types and not [o for o in op_types if o.startswith("Xla")]


def test_generation_config_overrides_and_refuses_unknown_settings(gpt):
    config = GenerationConfig(strategy="beam", num_beams=2)
    np.testing.assert_array_equal(
        gpt.generate(PROMPTS, 12, config=config),
        gpt.generate(PROMPTS, 12, strategy="beam", num_beams=2),
    )
    with pytest.raises(TypeError, match="beams"):
        gpt.generate(PROMPTS, 12, beams=2)
    with pytest.raises(TypeError, match="GenerationConfig"):
        gpt.generate(PROMPTS, 12, config={"strategy": "beam"})
