"""The encoder-decoder Transformer's registry entry."""

from keras_attn.models import registry
from keras_attn.models.seq2seq.transformer_seq2seq import TransformerSeq2Seq

SEQ2SEQ = registry.register(
    registry.Family(
        name="seq2seq",
        backbone_cls=TransformerSeq2Seq,
        signatures={TransformerSeq2Seq: "seq2seq"},
    )
)
