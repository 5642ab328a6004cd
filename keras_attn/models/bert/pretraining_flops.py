"""Floating-point operations of a pre-training step, for comparisons at equal compute.

Counted as the ELECTRA paper counts them (Clark et al., 2020, Appendix: "FLOPs ...
we count the generator"): the multiply-adds of the dense layers and of attention,
2 FLOPs each, for every token of every sequence; a training step is the forward pass
and a backward pass of twice its cost (3x). Layer norms, softmaxes, activations and
embedding look-ups are left out (a few percent at these sizes, the same share for
every objective).
"""

from keras_attn.api_export import keras_attn_export


@keras_attn_export("keras_attn.models.encoder_flops")
def encoder_flops(backbone, sequence_length):
    """Forward FLOPs of a `BertBackbone` on one sequence of `sequence_length` tokens.

    Per token and layer: the query, key, value and output projections (`8 H^2`), the
    feed-forward layers (`4 H I`) and attention's scores and weighted sum (`4 n H`);
    plus the embedding projection (`2 E H`) where the embeddings are narrower.

    Example:

    >>> from keras_attn.models import BertBackbone, encoder_flops
    >>> backbone = BertBackbone(100, num_layers=2, num_heads=2, hidden_dim=8,
    ...                         intermediate_dim=16, max_sequence_length=4)
    >>> encoder_flops(backbone, 4)  # 4 tokens * 2 layers * (8*64 + 4*8*16 + 4*4*8)
    9216
    """
    hidden, inner, n = backbone.hidden_dim, backbone.intermediate_dim, int(sequence_length)
    per_layer = 8 * hidden * hidden + 4 * hidden * inner + 4 * n * hidden
    width = backbone.token_embedding.output_dim
    projection = 2 * width * hidden if width != hidden else 0
    return n * (backbone.num_layers * per_layer + projection)


def masked_lm_head_flops(backbone, predictions, vocabulary_size):
    """Forward FLOPs of a masked-LM head on `predictions` positions: the transform
    (`2 H E`) and the tied output layer (`2 E V`)."""
    width = backbone.token_embedding.output_dim
    return int(predictions) * (2 * backbone.hidden_dim * width + 2 * width * vocabulary_size)


def training_step_flops(forward):
    """A training step's FLOPs from its forward FLOPs: forward + backward (2x)."""
    return 3 * forward


def electra_training_flops(pretrainer, sequence_length, predictions):
    """An `ElectraPretrainer`'s FLOPs per training example: both encoders on every
    token, the generator's masked-LM head at `predictions` positions and the
    discriminator's head (`2 H^2 + 2 H`) on every token, forward and backward."""
    generator, discriminator = pretrainer.generator, pretrainer.discriminator
    hidden, n = discriminator.hidden_dim, int(sequence_length)
    forward = encoder_flops(generator, n) + encoder_flops(discriminator, n)
    forward += masked_lm_head_flops(generator, predictions, discriminator.vocabulary_size)
    forward += n * (2 * hidden * hidden + 2 * hidden)
    return training_step_flops(forward)
