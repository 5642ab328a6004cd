"""Pre-training FLOPs: the dense layers' share is 6 FLOPs per kernel weight per token
(forward 2, backward 4), read off the built model's own kernels; ELECTRA counts its
generator."""

import numpy as np

from keras_attn.models import BertBackbone, BertPretrainer, ElectraPretrainer, encoder_flops
from keras_attn.models.bert.electra_generators import electra_generator


def _kernel_weights(layers):
    return sum(
        int(np.prod(w.shape)) for layer in layers for w in layer.weights if "kernel" in w.name
    )


def test_encoder_flops_are_twice_the_kernel_weights_plus_attention():
    for embedding_dim in (None, 16):
        backbone = BertBackbone(
            50, 3, 4, 32, 48, max_sequence_length=20, embedding_dim=embedding_dim
        )
        n = 20
        kernels = _kernel_weights(dict.fromkeys(backbone.transformer_layers))
        kernels *= backbone.num_layers // len(dict.fromkeys(backbone.transformer_layers))
        if embedding_dim:
            kernels += _kernel_weights([backbone.embedding_projection])
        attention = backbone.num_layers * 4 * n * n * backbone.hidden_dim
        assert encoder_flops(backbone, n) == 2 * kernels * n + attention


def test_electra_counts_its_generator_and_both_heads():
    discriminator = BertBackbone.from_size("tiny", vocabulary_size=8000, max_sequence_length=64)
    generator = electra_generator(discriminator, 0.25)
    electra = ElectraPretrainer(generator, discriminator)
    bert = BertPretrainer(
        BertBackbone.from_size("tiny", vocabulary_size=8000, max_sequence_length=64),
        sentence_objective="none",
    )
    n, predictions = 64, 10

    def mlm_head(backbone):
        return 2 * predictions * (backbone.hidden_dim * 128 + 128 * 8000)

    assert bert.training_flops(n, predictions) == 3 * (
        encoder_flops(bert.backbone, n) + mlm_head(bert.backbone)
    )
    rtd_head = 2 * n * (128 * 128 + 128)
    assert electra.training_flops(n, predictions) == 3 * (
        encoder_flops(discriminator, n) + encoder_flops(generator, n) + mlm_head(generator)
        + rtd_head
    )  # fmt: skip
    # A quarter-wide generator costs about a tenth more than BERT's step here.
    assert 1.0 < electra.training_flops(n, predictions) / bert.training_flops(n, predictions) < 1.3
