"""A Hugging Face DeBERTa-v3 folder goes through `keras-attn convert`, fine-tunes with its
SentencePiece tokenizer, exports, and is served by TensorFlow alone (no keras, no
keras_attn) with the fine-tuned model's probabilities; the backbone converts back to a
folder `transformers` loads, tokenizer included."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_attn.cli import main
from keras_attn.cli.export import export_run
from keras_attn.models import DebertaV3Classifier
from keras_attn.models.deberta import DebertaV3Tokenizer
from keras_attn.training import TrainingConfig, load_config, train
from keras_attn.training.tasks import TextClassificationTask
from tests.export.test_saved_model import tf_only
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

    csv = tmp_path / "reviews.csv"
    rows = ["text,label"] + [f"a good film {i},pos" for i in range(12)]
    csv.write_text("\n".join(rows + [f"a dull plot {i},neg" for i in range(12)]) + "\n")
    flags = {
        "model.backbone": str(target.parent),
        "model.sequence_length": 16,
        "data.train": str(csv),
        "data.text_column": "text",
        "data.label_column": "label",
        "training.batch_size": 8,
        "training.steps": 2,
        "training.validation_steps": 1,
        "training.attention_every": 0,
        "training.histogram_every": 0,
        "training.jit_compile": False,
    }
    task = TextClassificationTask()
    run = load_config({**task.sections, "training": TrainingConfig}, overrides=flags)
    result = train(task, run, tmp_path / "tuned", verbose=0)
    assert isinstance(task.tokenizer, DebertaV3Tokenizer)
    assert isinstance(result.model, DebertaV3Classifier)
    assert (tmp_path / "tuned" / "spm.model").is_file()

    version = export_run(tmp_path / "tuned", "deberta", tmp_path / "saved")
    assert (version / "assets" / "spm.model").read_bytes() == (folder / "spm.model").read_bytes()
    model = keras.saving.load_model(tmp_path / "tuned" / "model.keras")
    x = {k: v.numpy() for k, v in task.tokenizer(tf.constant(TEXTS)).items()}
    expected = tf.nn.softmax(model(x), -1).numpy()
    served = tf_only(version, {"serving_default": {"text": TEXTS}, "attention": {"text": TEXTS}})
    np.testing.assert_allclose(served["serving_default"]["probabilities"], expected, atol=1e-5)
    assert served["attention"]["tokens"][0][0] == "[CLS]"

    main.main(["convert", str(target), str(tmp_path / "hf_again")])
    assert "transformers.AutoModel" in capsys.readouterr().out
    again = transformers.AutoTokenizer.from_pretrained(tmp_path / "hf_again")
    ids = again(TEXTS, truncation=True, max_length=16, padding="max_length")["input_ids"]
    np.testing.assert_array_equal(ids, x["token_ids"])
