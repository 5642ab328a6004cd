"""A Hugging Face RoBERTa folder goes through `keras-attn convert`, fine-tunes
(classification, tagging and span QA) with the family's own tokenizer, exports, and is
served by TensorFlow alone (no keras, no keras_attn) with the fine-tuned model's
probabilities, tags and answers; the backbone converts back to a folder `transformers`
loads. Three tests, one per task, so that the two CI workers share them."""

import json

import pytest

from keras_attn.models import BertClassifier, BertSpanQA, BertTokenClassifier, RobertaBackbone
from keras_attn.models.roberta import RobertaTokenizer
from tests.models import end_to_end
from tests.models.roberta.test_roberta_family import perturbed
from tests.models.roberta.test_roberta_tokenizer import vocabulary_folder

TEXTS = ["a good film, señor 😀", "a dull plot", ""]


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    """A random Hugging Face RoBERTa folder and its `keras-attn convert` output folder
    (each xdist worker that runs a test below makes its own: about a second)."""
    import transformers

    tmp_path = tmp_path_factory.mktemp("roberta")
    folder = vocabulary_folder(tmp_path / "hf")
    config = transformers.RobertaConfig(
        vocab_size=400,
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=34,
    )
    perturbed(transformers.RobertaModel(config)).save_pretrained(folder)
    target, printed = end_to_end.convert(folder, tmp_path / "keras")
    assert "RobertaBackbone (roberta): 2 layers" in printed
    assert "identical outputs" in printed
    return target


@pytest.mark.slow
def test_convert_classify_export_serve_and_convert_back(converted, tmp_path):
    assert {p.name for p in converted.parent.iterdir()} == {
        "backbone.keras",
        "vocab.json",
        "merges.txt",
    }
    task, result, version, x, served = end_to_end.classify_export_and_serve(
        tmp_path, converted.parent, TEXTS, "roberta"
    )
    assert isinstance(task.tokenizer, RobertaTokenizer)
    assert isinstance(result.model, BertClassifier)
    assert isinstance(result.model.backbone, RobertaBackbone)
    assert (tmp_path / "tuned" / "merges.txt").is_file()
    assert not (tmp_path / "tuned" / "vocab.txt").exists()

    assert json.loads((version / "assets" / "vocab.json").read_text())["<mask>"] == 4
    assert served["attention"]["tokens"][0][0] == "<s>"

    # And back out: the converted backbone is a folder transformers loads, tokenizer too.
    end_to_end.assert_converts_back(converted, tmp_path / "hf_again", TEXTS, x["token_ids"])


@pytest.mark.slow
def test_tag_export_and_serve(converted, tmp_path):
    end_to_end.tag_export_and_serve(
        tmp_path,
        converted.parent,
        BertTokenClassifier,
        lambda folder: RobertaTokenizer.from_folder(folder, sequence_length=16),
    )


@pytest.mark.slow
def test_answer_export_and_serve(converted, tmp_path):
    end_to_end.answer_export_and_serve(
        tmp_path,
        converted.parent,
        BertSpanQA,
        lambda folder: RobertaTokenizer.from_folder(folder, sequence_length=32),
    )


def test_a_backbone_folder_without_a_readable_tokenizer_is_one_configuration_error(tmp_path):
    from keras_attn.training.config import ConfigError
    from keras_attn.training.tasks.text_classification import load_backbone

    RobertaBackbone.from_size("tiny", vocabulary_size=50, max_sequence_length=16).save(
        tmp_path / "backbone.keras"
    )
    with pytest.raises(ConfigError, match=r"vocab.json, merges.txt\); .* has no vocab.json"):
        load_backbone(str(tmp_path), sequence_length=16)
    (tmp_path / "vocab.json").write_text('{"a": 0}')
    (tmp_path / "merges.txt").write_text("")
    with pytest.raises(ConfigError, match="model.backbone.*special tokens"):
        load_backbone(str(tmp_path), sequence_length=16)
