"""ELMo's registry entry: `ElmoBiLM`, whose layers the feature-based heads read."""

from keras_attn.models import registry
from keras_attn.models.elmo.elmo_bilm import ElmoBiLM


def _build_language_model(settings, tokenizer):
    """`keras-attn lm --architecture elmo`: the forward and backward LSTM language models
    (`num_layers` x `hidden_dim` cells), over ELMo's character CNN if asked."""
    from keras_attn.models.elmo.elmo_bilm import character_table

    vocabulary = tokenizer.vocabulary
    return ElmoBiLM(
        len(vocabulary),
        num_layers=settings.num_layers,
        hidden_dim=settings.hidden_dim,
        projection_dim=settings.projection_dim,
        dropout=settings.dropout,
        character_cnn=settings.character_cnn,
        pad_token_id=tokenizer.pad_id,
        character_table=character_table(vocabulary) if settings.character_cnn else None,
    )


def _both_directions(windows, pad_id):
    """Each position's next token (forward LM) and previous token (backward LM)."""
    import tensorflow as tf

    inputs = windows[:, :-1]
    previous = tf.pad(inputs[:, :-1], [[0, 0], [1, 0]], constant_values=pad_id)
    x = {"token_ids": inputs, "padding_mask": tf.cast(inputs != pad_id, tf.int32)}
    return x, {"forward_logits": windows[:, 1:], "backward_logits": previous}


ELMO = registry.register(
    registry.Family(
        name="elmo",
        backbone_cls=ElmoBiLM,
        language_models=(
            # A biLM does not generate; its layers are the feature-based heads' backbone.
            registry.LanguageModel(
                "elmo",
                _build_language_model,
                targets=_both_directions,
                generates=False,
                features=True,
            ),
        ),
    )
)
