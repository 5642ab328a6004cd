"""ERNIE's typing model served from raw text: the mention given in characters, entity
linking in the graph; the served probabilities equal the model's on the inputs the
Python path (`EntityLinker`, `ernie_inputs`) packs, long texts and Unicode included."""

import numpy as np
import pytest
import tensorflow as tf

from keras_attn.data import WordPieceTokenizer
from keras_attn.export import export_saved_model
from keras_attn.knowledge import EntityLinker, WordNet
from keras_attn.models import BertBackbone, EntityTyping, ErnieBackbone, ernie_inputs

pytestmark = pytest.mark.xdist_group("wordnet")
ENTITIES = ["01855672-n", "07614500-n", "02439033-n", "09433442-n", "02084071-n"]
WORDS = ("the geese ate ice cream by seashore a giraffe and dog dogs ran far away "
         "café crème over hills to see").split()  # fmt: skip
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *dict.fromkeys(WORDS), ".", "'", "s",
         "[ENT]"]  # fmt: skip
TEXTS = [
    "The geese ate ice cream by the seashore.",
    "A giraffe and the dog's dogs ran far away.",
    "café crème " + "over hills to see " * 12 + "a giraffe ran far away over hills",
    "The geese ate ice cream by the seashore.",
]
TARGETS = [(4, 9), (2, 9), None, (14, 23)]  # the third: its giraffe, far into the text
TARGETS[2] = (TEXTS[2].index("giraffe"), TEXTS[2].index("giraffe") + 7)


@pytest.mark.slow  # 15 s: an export with WordNet's linking table
def test_served_types_equal_the_python_path(tmp_path):
    tokenizer = WordPieceTokenizer(VOCAB, sequence_length=16)
    entity_ids = {s: i + 1 for i, s in enumerate(ENTITIES)}
    backbone = ErnieBackbone(len(VOCAB), len(ENTITIES), num_layers=1, num_knowledge_layers=2,
                             num_heads=2, hidden_dim=16, intermediate_dim=32, entity_dim=8,
                             entity_num_heads=2, max_sequence_length=16)  # fmt: skip
    backbone.set_entity_vectors(np.random.default_rng(0).normal(size=(5, 8)))
    model = EntityTyping(backbone, num_classes=3)
    path = export_saved_model(model, tokenizer, tmp_path / "typing" / "1",
                              labels=["a", "b", "c"], entities=ENTITIES)  # fmt: skip
    assert (path / "assets" / "WORDNET_LICENSE").read_text().startswith("WordNet Release 3.0")
    served = tf.saved_model.load(str(path)).signatures["serving_default"](
        text=tf.constant(TEXTS),
        mention_start=tf.constant([t[0] for t in TARGETS]),
        mention_end=tf.constant([t[1] for t in TARGETS]),
    )
    linker = EntityLinker(WordNet.load(), synsets=entity_ids)
    x = ernie_inputs(tokenizer, TEXTS, [linker(t) for t in TEXTS], entity_ids, TARGETS)
    assert x["entity_ids"].any() and x["marker_positions"][2] == 8  # linked; centred
    expected = model.predict(x, verbose=0)
    probabilities = tf.nn.softmax(expected).numpy()
    assert np.abs(served["probabilities"].numpy() - probabilities).max() < 1e-5
    assert served["labels"].numpy().tolist() == [
        [b"a", b"b", b"c"][i] for i in probabilities.argmax(-1)
    ]
    # A mention no piece covers has no type.
    empty = tf.saved_model.load(str(path)).signatures["serving_default"](
        text=tf.constant(["   ", "a giraffe", "a giraffe", "", "a giraffe", "a giraffe"]),
        mention_start=tf.constant([0, 50, 9, 0, -5, 2]),
        mention_end=tf.constant([2, 60, 2, 1, 9, 10]),
    )  # fmt: skip
    # Blank, past the end, reversed, empty text, before the start, past the end: no type.
    assert empty["label_ids"].numpy().tolist() == [-1] * 6
    blank = tf.saved_model.load(str(path)).signatures["serving_default"](
        text=tf.constant(["", ""]), mention_start=tf.constant([0, 0]),
        mention_end=tf.constant([1, 1]),
    )  # fmt: skip
    assert blank["label_ids"].numpy().tolist() == [-1, -1]  # no piece in the whole batch
    none = tf.saved_model.load(str(path)).signatures["serving_default"](
        text=tf.constant([], tf.string), mention_start=tf.constant([], tf.int32),
        mention_end=tf.constant([], tf.int32),
    )  # fmt: skip
    assert none["probabilities"].shape == (0, 3)  # an empty batch gives empty outputs


@pytest.mark.slow  # 10 s: an export
def test_entities_are_checked_and_a_text_only_model_needs_none(tmp_path):
    tokenizer = WordPieceTokenizer(VOCAB, sequence_length=16)
    backbone = ErnieBackbone(len(VOCAB), len(ENTITIES), num_layers=1, num_knowledge_layers=1,
                             num_heads=2, hidden_dim=16, intermediate_dim=32, entity_dim=8,
                             entity_num_heads=2, max_sequence_length=16)  # fmt: skip
    model = EntityTyping(backbone, num_classes=2)
    with pytest.raises(ValueError, match="Expected `entities`"):
        export_saved_model(model, tokenizer, tmp_path / "a" / "1")
    with pytest.raises(ValueError, match="Expected 5 synsets in entities"):
        export_saved_model(model, tokenizer, tmp_path / "b" / "1", entities=ENTITIES[:4])
    assert not (tmp_path / "a").exists() or not any((tmp_path / "a").iterdir())
    text_only = EntityTyping(BertBackbone(len(VOCAB), 1, 2, 16, 32, max_sequence_length=16), 2)
    path = export_saved_model(text_only, tokenizer, tmp_path / "c" / "1")
    out = tf.saved_model.load(str(path)).signatures["serving_default"](
        text=tf.constant(["a giraffe ran"]), mention_start=tf.constant([2]),
        mention_end=tf.constant([9]),
    )  # fmt: skip
    assert (
        out["probabilities"].shape == (1, 2) and not (path / "assets" / "WORDNET_LICENSE").exists()
    )
