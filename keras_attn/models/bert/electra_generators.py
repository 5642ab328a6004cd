"""ELECTRA's generator: a narrower `BertBackbone` on the discriminator's embeddings."""

from keras_attn.models.bert.bert_backbone import BertBackbone


def sharing_embeddings(generator, discriminator):
    """The generator rebuilt on the discriminator's embeddings, its other weights kept."""
    if generator.token_embedding is discriminator.token_embedding:
        return generator
    width = discriminator.token_embedding.output_dim
    if generator.token_embedding.output_dim != width:
        raise ValueError(
            f"Expected the generator's embedding width to be the discriminator's ({width}); "
            f"give the generator embedding_dim={width}. Received: generator embedding width "
            f"{generator.token_embedding.output_dim}"
        )
    config = {**generator.get_config(), "embedding_dim": None}
    shared = type(generator).from_config({**config, "shared_embeddings": discriminator})
    own = [generator.embedding_projection, generator.final_layer_norm, generator.pooled_dense]
    theirs = [shared.embedding_projection, shared.final_layer_norm, shared.pooled_dense]
    for old, new in zip(
        own + _unique(generator.transformer_layers),
        theirs + _unique(shared.transformer_layers),
        strict=True,
    ):
        if old is not None:
            new.set_weights(old.get_weights())
    return shared


def _unique(layers):
    return list(dict.fromkeys(layers))


def electra_generator(discriminator, fraction):
    """ELECTRA's generator for `discriminator`: as deep, `fraction` as wide (hidden size,
    heads, feed-forward), on the discriminator's embeddings."""
    if not 0 < fraction <= 1:
        raise ValueError(
            f"Expected `fraction` in (0, 1] (the paper: 1/4 to 1/2). Received: {fraction}"
        )
    heads = max(1, round(discriminator.num_heads * fraction))
    head_dim = max(1, round(discriminator.hidden_dim * fraction / heads))
    return BertBackbone(
        discriminator.vocabulary_size,
        num_layers=discriminator.num_layers,
        num_heads=heads,
        hidden_dim=heads * head_dim,
        intermediate_dim=max(1, round(discriminator.intermediate_dim * fraction)),
        max_sequence_length=discriminator.max_sequence_length,
        num_segments=discriminator.num_segments,
        dropout=discriminator.dropout,
        norm_first=discriminator.norm_first,
        score=discriminator.score,
        activation=discriminator.activation,
        layer_norm_epsilon=discriminator.layer_norm_epsilon,
        initializer_range=discriminator.initializer_range,
        name="generator",
        shared_embeddings=discriminator,  # built sharing: ElectraPretrainer need not rebuild it
    )
