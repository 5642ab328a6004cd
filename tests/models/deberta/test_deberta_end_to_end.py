"""A Hugging Face DeBERTa-v3 folder goes through `keras-attn convert`, fine-tunes
(classification, tagging and span QA) with its SentencePiece tokenizer, exports, and is
served by TensorFlow alone (no keras, no keras_attn) with the fine-tuned model's
probabilities, tags and answers; the backbone converts back to a folder `transformers`
loads, tokenizer included."""

import numpy as np
import pytest

from keras_attn.cli import main
from keras_attn.models import DebertaV3Classifier, DebertaV3SpanQA, DebertaV3TokenClassifier
from keras_attn.models.deberta import DebertaV3Tokenizer
from tests.models import end_to_end
from tests.models.deberta.test_deberta_family import _config, perturbed
from tests.models.deberta.test_deberta_tokenizer import model_folder

TEXTS = ["a good film, señor 😀", "a dull plot", ""]


@pytest.mark.slow
def test_convert_finetune_export_and_serve_without_keras(tmp_path, capsys):
    import transformers

    folder = model_folder(tmp_path / "hf", mask=False)
    reference = transformers.DebertaV2Model(_config(vocab_size=121, max_position_embeddings=32))
    perturbed(reference).save_pretrained(folder)
    target = main.main(["convert", str(folder), str(tmp_path / "keras")])
    out = capsys.readouterr().out
    assert "DebertaV3Backbone (deberta-v2): 2 layers" in out and "identical outputs" in out
    assert {p.name for p in target.parent.iterdir()} == {"backbone.keras", "spm.model"}

    task, result, version, x, served = end_to_end.classify_export_and_serve(
        tmp_path, target.parent, TEXTS, "deberta"
    )
    assert isinstance(task.tokenizer, DebertaV3Tokenizer)
    assert isinstance(result.model, DebertaV3Classifier)
    assert (tmp_path / "tuned" / "spm.model").is_file()

    assert (version / "assets" / "spm.model").read_bytes() == (folder / "spm.model").read_bytes()
    assert served["attention"]["tokens"][0][0] == "[CLS]"

    end_to_end.tag_export_and_serve(
        tmp_path,
        target.parent,
        DebertaV3TokenClassifier,
        lambda folder: DebertaV3Tokenizer.from_folder(folder, sequence_length=16),
    )

    end_to_end.answer_export_and_serve(
        tmp_path,
        target.parent,
        DebertaV3SpanQA,
        lambda folder: DebertaV3Tokenizer.from_folder(folder, sequence_length=32),
    )

    # And back out: the converted backbone is a folder transformers loads, tokenizer too.
    main.main(["convert", str(target), str(tmp_path / "hf_again")])
    assert "transformers.AutoModel" in capsys.readouterr().out
    again = transformers.AutoTokenizer.from_pretrained(tmp_path / "hf_again")
    ids = again(TEXTS, truncation=True, max_length=16, padding="max_length")["input_ids"]
    np.testing.assert_array_equal(ids, x["token_ids"])
