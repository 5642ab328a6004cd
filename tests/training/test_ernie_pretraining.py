"""`keras-attn pretrain --objective ernie`: the corpus linked to WordNet in the data
pipeline, ERNIE learns masked LM, next sentence and dEA, the run resumes, the backbone
keeps its TransE vectors frozen and `entities.txt` (what the typing export reads) and
WordNet's licence are written beside it; a missing, crafted or foreign vectors file is
refused by name."""

import keras
import numpy as np
import pytest

from keras_attn.errors import UserInputError
from keras_attn.knowledge import WordNet
from keras_attn.models import ErnieBackbone, ErniePretrainer
from keras_attn.training.config import ConfigError
from keras_attn.training.tasks import BertPretrainingTask
from tests.training.runs import PRETRAIN_FLAGS, train_task, write_corpus

pytestmark = pytest.mark.xdist_group("wordnet")
FLAGS = {**PRETRAIN_FLAGS, "model.objective": "ernie"}


def _run(output, flags):
    return train_task(BertPretrainingTask(), output, flags)


def _vectors(path):
    wordnet = WordNet.load()
    synsets = sorted(s for s, pos in wordnet.pos.items() if pos == "n")
    vectors = np.random.default_rng(0).normal(size=(len(synsets), 8)).astype("float32")
    np.savez(path, synsets=np.array(synsets), vectors=vectors)
    return synsets, vectors


@pytest.mark.slow  # links the corpus, pre-trains twice
@pytest.mark.eager  # a few steps each run; traced steps: tests/training/test_trainer.py
def test_ernie_pretrains_with_linked_entities_and_resumes(tmp_path):
    synsets, vectors = _vectors(tmp_path / "vectors.npz")
    corpus = write_corpus(tmp_path / "corpus.txt", documents=16)
    flags = {
        **FLAGS,
        "data.corpus": str(corpus),
        "model.entity_vectors": str(tmp_path / "vectors.npz"),
    }
    _run(tmp_path / "run", {**flags, "training.steps": 2})
    _, result = _run(tmp_path / "run", flags)
    assert (result.steps, result.resumed_from) == (4, 2)
    assert {"dea_logits_accuracy", "mlm_logits_accuracy", "nsp_logits_accuracy"} <= set(
        result.history
    )
    assert np.isfinite(result.history["loss"]).all()
    assert isinstance(keras.saving.load_model(tmp_path / "run" / "model.keras"), ErniePretrainer)
    backbone = keras.saving.load_model(tmp_path / "run" / "backbone.keras")
    assert isinstance(backbone, ErnieBackbone) and not backbone.entity_embedding.trainable
    table = keras.ops.convert_to_numpy(backbone.entity_embedding.embeddings)
    assert np.array_equal(table[1:], vectors)  # frozen: as loaded
    written = (tmp_path / "run" / "entities.txt").read_text().split()
    assert written == synsets
    assert (tmp_path / "run" / "WORDNET_LICENSE").read_text().startswith("WordNet Release 3.0")


@pytest.mark.slow  # 20 s: five runs that stop at their settings
def test_the_vectors_file_is_required_checked_and_named(tmp_path):
    corpus = write_corpus(tmp_path / "corpus.txt", documents=8)
    flags = {**FLAGS, "data.corpus": str(corpus)}
    with pytest.raises(ConfigError, match="model.entity_vectors"):
        _run(tmp_path / "a", flags)
    with pytest.raises(ConfigError, match="only with it"):
        _run(tmp_path / "b", {**flags, "model.objective": "nsp", "model.entity_vectors": "x.npz"})
    missing = {**flags, "model.entity_vectors": str(tmp_path / "none.npz")}
    with pytest.raises(UserInputError, match="model.entity_vectors: .*cannot read"):
        _run(tmp_path / "c", missing)
    # A crafted file: its header claims far more than it holds.
    np.savez(tmp_path / "crafted.npz", synsets=np.array(["02084071-n"]), vectors=np.zeros((1, 4)))
    import zipfile

    with zipfile.ZipFile(tmp_path / "crafted.npz") as archive:
        members = {n: archive.read(n) for n in archive.namelist()}
    members["vectors.npy"] = members["vectors.npy"].replace(b"(1, 4)", b"(9999999, 4)")
    with zipfile.ZipFile(tmp_path / "crafted.npz", "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    crafted = {**flags, "model.entity_vectors": str(tmp_path / "crafted.npz")}
    with pytest.raises(UserInputError, match="claims 319,999,968 bytes"):
        _run(tmp_path / "d", crafted)
    # Synsets WordNet does not know: nothing to link.
    np.savez(tmp_path / "foreign.npz", synsets=np.array(["Q42"]), vectors=np.zeros((1, 4)))
    foreign = {**flags, "model.entity_vectors": str(tmp_path / "foreign.npz")}
    with pytest.raises(UserInputError, match="WordNet 3.0 synset ids.*Q42"):
        _run(tmp_path / "e", foreign)
    assert not any((tmp_path / name).exists() and any((tmp_path / name).glob("*.keras"))
                   for name in "abcde")  # fmt: skip
