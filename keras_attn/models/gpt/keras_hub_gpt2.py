"""GPT-2 between keras-hub and us: `GPT2Backbone` / `GPT2CausalLM` and their
`GPT2Tokenizer`, as the GPT family's `registry.KerasHubTwin`.

keras-hub's GPT-2 is our `GPTLanguageModel` with GPT-2's settings (pre-LN, learned
positions, the tanh GELU, LayerNorm epsilon 1e-5, no embedding scaling, full attention
heads) and the same variables (its final `layer_norm` is our `final_layer_norm`); both
read logits through the transposed token embedding. Our GPT-2 tokenizer is keras-hub's
own class, run on its TensorFlow ops. keras-hub pads GPT-2 with id 0 and masks the
padding; ours pads with `<|endoftext|>` and counts lengths, so a preset's model takes
that id as its `pad_token_id` (the loss leaves it out, as it does for checkpoints).
"""

from keras_attn.checkpoints.keras_hub_weights import (
    block_parameters,
    check_settings,
    copy_weights,
    hub_sizes,
)
from keras_attn.models.gpt.gpt_language_model import GPTLanguageModel

SETTINGS = {
    "norm_first": True,
    "score": "scaled_dot",
    "position_embedding": "learned",
    "layer_norm_epsilon": 1e-5,
    "activation": "gelu_approximate",
    "scale_embeddings": False,
    "num_key_value_heads": None,
}


def _rename(path):
    """keras-hub's path in our names: its final `layer_norm` is our `final_layer_norm`."""
    return "final_" + path if path.startswith("layer_norm/") else path


def to_ours(hub):
    """keras-hub's `GPT2Backbone` -> our `GPTLanguageModel`, weights copied."""
    from keras_attn.layers import gelu_approximate

    config = hub.get_config()
    ours = GPTLanguageModel(
        **hub_sizes(config),
        norm_first=True,
        activation=gelu_approximate,
        scale_embeddings=False,
    )
    copy_weights(hub, ours, _rename)
    return ours


def to_hub(model):
    """Our `GPTLanguageModel` (GPT-2's settings) -> keras-hub's `GPT2Backbone`."""
    import keras_hub

    if not isinstance(model, GPTLanguageModel):
        raise ValueError(f"Expected a GPTLanguageModel. Received: {type(model).__name__}")
    check_settings(model, SETTINGS, "GPT2Backbone")
    hub = keras_hub.models.GPT2Backbone(
        vocabulary_size=model.vocabulary_size,
        num_layers=model.num_layers,
        num_heads=model.num_heads,
        hidden_dim=model.hidden_dim,
        intermediate_dim=model.intermediate_dim,
        max_sequence_length=model.max_sequence_length,
        dropout=model.dropout,
    )
    copy_weights(model, hub, _rename)
    return hub


def tokenizer_to_ours(hub_tokenizer, sequence_length=None, lowercase=None, truncate=None):
    """keras-hub's `GPT2Tokenizer` -> ours (the same class, always on its TensorFlow
    ops; unpacked: the preprocessor packs)."""
    import keras_hub

    return keras_hub.tokenizers.GPT2Tokenizer(
        vocabulary=dict(hub_tokenizer.vocabulary),
        merges=list(hub_tokenizer.merges),
        _allow_python_workflow=False,
    )


def tokenizer_to_hub(tokenizer):
    """Our GPT-2 tokenizer -> keras-hub's (a plain `GPT2Tokenizer` of its files)."""
    import keras_hub

    return keras_hub.models.GPT2Tokenizer(
        vocabulary=dict(tokenizer.vocabulary), merges=list(tokenizer.merges)
    )


def causal_lm_to_hub(model, hub_backbone, hub_tokenizer, sequence_length):
    """Our language model with its preprocessor -> keras-hub's `GPT2CausalLM` with a
    `GPT2CausalLMPreprocessor` of the same length and start and end tokens."""
    import keras_hub

    preprocessor = keras_hub.models.GPT2CausalLMPreprocessor(
        hub_tokenizer,
        sequence_length=sequence_length,
        add_start_token=model.preprocessor.add_start_token,
        add_end_token=model.preprocessor.add_end_token,
    )
    return keras_hub.models.GPT2CausalLM(hub_backbone, preprocessor=preprocessor)


def adopt_tokenizer(model, tokenizer):
    """The model pads (and its loss skips) `<|endoftext|>`, as GPT-2 checkpoints do."""
    model.pad_token_id = int(tokenizer.end_token_id)
    return model


def parameters(config):
    """The weights a keras-hub `GPT2Backbone` config claims."""
    size = {k: int(config[k]) for k in ("vocabulary_size", "num_layers", "hidden_dim",
                                        "intermediate_dim", "max_sequence_length")}  # fmt: skip
    h, i = size["hidden_dim"], size["intermediate_dim"]
    embeddings = (size["vocabulary_size"] + size["max_sequence_length"]) * h
    return embeddings + size["num_layers"] * block_parameters(h, i) + 2 * h
