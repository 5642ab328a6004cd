"""The model-family registry: every family registered once, each model class finds its
family (the nearest registered base), `from_pretrained` picks the family a folder's
`model_type` names and equals that family's own loader, heads and errors named."""

import keras
import numpy as np
import pytest

from keras_attn.errors import UserInputError
from keras_attn.models import (
    BertClassifier,
    BertSpanQA,
    BertTokenClassifier,
    ElectraPretrainer,
    GPTLanguageModel,
    XLNetBackbone,
    XLNetClassifier,
    from_pretrained,
    registry,
)
from tests.helpers import max_abs_diff
from tests.model_harness import tiny_bert, tiny_seq2seq, tiny_transformer_xl, tiny_xlnet

TINY = dict(num_layers=1, num_heads=2, hidden_dim=16, intermediate_dim=32)


def test_every_family_is_registered_with_its_classes():
    names = {family.name for family in registry.families()}
    assert names >= {"bert", "gpt", "transformer_xl", "xlnet", "seq2seq"}
    bert = tiny_bert()
    assert registry.family_of(bert) is registry.family("bert")
    assert registry.family_of(BertSpanQA(bert)).name == "bert"
    xlnet = tiny_xlnet()
    assert registry.family_of(XLNetClassifier(xlnet, num_classes=2)).name == "xlnet"
    assert registry.family_of(tiny_transformer_xl()).name == "transformer_xl"
    seq2seq = tiny_seq2seq()
    assert registry.family_of(seq2seq).name == "seq2seq"
    assert registry.family_of(keras.Sequential()) is None
    assert registry.pretraining("electra").model_cls is ElectraPretrainer
    assert registry.pretraining("xlnet").sentence_pairs == "none"
    with pytest.raises(UserInputError, match=r"Expected an objective in \[.*'xlnet'"):
        registry.pretraining("t5")
    with pytest.raises(ValueError, match=r"Expected a model family in \[.*'bert'"):
        registry.family("t5")
    with pytest.raises(ValueError, match="registered twice"):
        registry.register(registry.Family(name="bert", backbone_cls=XLNetBackbone))


def test_a_family_folder_registers_itself_and_its_public_names():
    import keras_attn.models as models

    # RoBERTa is imported by no other module: its folder is found, imported, registered.
    assert "roberta" in registry.discover()
    roberta = registry.family("roberta")
    assert models.RobertaBackbone is roberta.backbone_cls
    assert "RobertaBackbone" in models.__all__ and "RobertaBackbone" in dir(models)
    with pytest.raises(AttributeError, match="no attribute 'DebertaV9'"):
        models.DebertaV9  # noqa: B018
    backbone = models.RobertaBackbone(50, **TINY, max_sequence_length=16)
    classifier = roberta.head("classification", backbone, 2, 0.1, "cls")
    # A head of BERT's on RoBERTa's backbone is served with RoBERTa's tokenizer.
    assert registry.family_of(classifier).name == "bert"
    assert registry.tokenizer_files(classifier).files == ("vocab.json", "merges.txt")
    bert = tiny_bert()
    assert registry.tokenizer_files(BertClassifier(bert, 2)).files == ("vocab.txt",)
    assert registry.tokenizer_files(bert).missing(".") == ["vocab.txt"]


def test_lookup_finds_the_nearest_registered_base():
    class Mine(BertClassifier):
        pass

    bert = tiny_bert()
    table = {keras.Model: "model", BertClassifier: "classifier"}
    assert registry.lookup(Mine(bert, num_classes=2), table) == "classifier"
    assert registry.lookup(bert, table) == "model"
    assert registry.lookup(object(), table, default="none") == "none"


def test_heads_are_the_family_s_and_unknown_tasks_are_named():
    bert = registry.family("bert")
    backbone = tiny_bert()
    assert type(bert.head("classification", backbone, 3, 0.1, "mean")) is BertClassifier
    assert type(bert.head("tagging", backbone, 3)) is BertTokenClassifier
    assert type(bert.head("span_qa", backbone)) is BertSpanQA
    xlnet = registry.family("xlnet")
    classifier = xlnet.head("classification", tiny_xlnet(), 2, 0.1, "cls")
    assert type(classifier) is XLNetClassifier and classifier.pooling == "first"
    with pytest.raises(UserInputError, match=r"Expected a task in \['classification'\]"):
        xlnet.head("tagging", tiny_xlnet(), 2)


@pytest.mark.parametrize("family", ["gpt", "xlnet", "bert"])
def test_from_pretrained_reads_the_family_of_the_model_type(tmp_path, family):
    keras.utils.set_random_seed(0)
    if family == "gpt":
        model = GPTLanguageModel(
            50, **TINY, max_sequence_length=16, norm_first=True, scale_embeddings=False
        )
    else:
        model = registry.family(family).backbone_cls(50, **TINY)
    model.save_pretrained(tmp_path)
    again = from_pretrained(tmp_path)
    assert type(again) is type(model)
    probe = registry.family(family).twin.probe(model)
    expected, got = model(probe), again(probe)
    if isinstance(expected, dict):
        expected, got = expected["sequence_output"], got["sequence_output"]
    assert max_abs_diff(expected, got) == 0.0


def test_a_folder_of_no_known_model_type_is_named(tmp_path):
    (tmp_path / "config.json").write_text('{"model_type": "mamba"}')
    with pytest.raises(UserInputError, match=r"Expected model_type in \[.*'gpt2'.*mamba"):
        from_pretrained(tmp_path)
    assert registry.checkpoint_model_type(tmp_path / "missing") is None
    (tmp_path / "config.json").write_text("not json")
    assert registry.checkpoint_model_type(tmp_path) is None
    assert np.all(registry.encoder_probe(tiny_bert())["padding_mask"][0] == 1)


def test_a_folder_may_keep_the_stand_in_tokenizer(tmp_path):
    """DeBERTa's `spm.model`, else the WordPiece `vocab.txt` of a backbone pre-trained
    here; with neither, the family's own files are the ones named missing."""
    files = registry.family("deberta").tokenizer
    assert files.in_folder(tmp_path) is files and files.missing(tmp_path) == ["spm.model"]
    (tmp_path / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nword\n")
    assert files.in_folder(tmp_path) is registry.WORDPIECE
    assert files.in_folder(tmp_path).read(tmp_path).vocabulary_size == 6
    assert files.read(tmp_path) is None  # `convert` writes no tokenizer from it
    (tmp_path / "spm.model").write_bytes(b"")
    assert files.in_folder(tmp_path) is files
    bert = registry.family("bert").tokenizer  # a WordPiece vocabulary, else ALBERT's model
    assert bert.in_folder(tmp_path).files == ("vocab.txt",)
    (tmp_path / "vocab.txt").unlink()
    (tmp_path / "spiece.model").write_bytes(b"")
    assert bert.in_folder(tmp_path).files == ("spiece.model",)
