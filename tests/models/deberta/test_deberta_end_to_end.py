"""A Hugging Face DeBERTa-v3 folder goes through `keras-attn convert`, fine-tunes
(classification, tagging and span QA) with its SentencePiece tokenizer, exports, and is
served by TensorFlow alone (no keras, no keras_attn) with the fine-tuned model's
probabilities, tags and answers; the backbone converts back to a folder `transformers`
loads, tokenizer included. Three tests, one per task, so that the two CI workers share
them."""

import pytest

from keras_attn.models import DebertaV3Classifier, DebertaV3SpanQA, DebertaV3TokenClassifier
from keras_attn.models.deberta import DebertaV3Tokenizer
from tests.models import end_to_end
from tests.models.deberta.test_deberta_family import _config, perturbed
from tests.models.deberta.test_deberta_tokenizer import model_folder

TEXTS = ["a good film, señor 😀", "a dull plot", ""]


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    """A random Hugging Face DeBERTa-v3 folder and its `keras-attn convert` output
    (each xdist worker that runs a test below makes its own: about a second)."""
    import transformers

    tmp_path = tmp_path_factory.mktemp("deberta")
    folder = model_folder(tmp_path / "hf", mask=False)
    reference = transformers.DebertaV2Model(_config(vocab_size=121, max_position_embeddings=32))
    perturbed(reference).save_pretrained(folder)
    target, printed = end_to_end.convert(folder, tmp_path / "keras")
    assert "DebertaV3Backbone (deberta-v2): 2 layers" in printed
    assert "identical outputs" in printed
    assert {p.name for p in target.parent.iterdir()} == {"backbone.keras", "spm.model"}
    return folder, target


@pytest.mark.slow
def test_convert_classify_export_serve_and_convert_back(converted, tmp_path):
    folder, target = converted
    task, result, version, x, served = end_to_end.classify_export_and_serve(
        tmp_path, target.parent, TEXTS, "deberta"
    )
    assert isinstance(task.tokenizer, DebertaV3Tokenizer)
    assert isinstance(result.model, DebertaV3Classifier)
    assert (tmp_path / "tuned" / "spm.model").is_file()

    assert (version / "assets" / "spm.model").read_bytes() == (folder / "spm.model").read_bytes()
    assert served["attention"]["tokens"][0][0] == "[CLS]"

    # And back out: the converted backbone is a folder transformers loads, tokenizer too.
    end_to_end.assert_converts_back(target, tmp_path / "hf_again", TEXTS, x["token_ids"])


@pytest.mark.slow
def test_tag_export_and_serve(converted, tmp_path):
    end_to_end.tag_export_and_serve(
        tmp_path,
        converted[1].parent,
        DebertaV3TokenClassifier,
        lambda folder: DebertaV3Tokenizer.from_folder(folder, sequence_length=16),
    )


@pytest.mark.slow
def test_answer_export_and_serve(converted, tmp_path):
    end_to_end.answer_export_and_serve(
        tmp_path,
        converted[1].parent,
        DebertaV3SpanQA,
        lambda folder: DebertaV3Tokenizer.from_folder(folder, sequence_length=32),
    )
