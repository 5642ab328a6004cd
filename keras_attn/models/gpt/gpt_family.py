"""The GPT family's registry entry: `GPTLanguageModel`, GPT-2's checkpoints and
byte-pair vocabulary."""

import pathlib

from keras_attn.models import registry
from keras_attn.models.gpt.gpt_finetuning import GPTFineTuner
from keras_attn.models.gpt.gpt_language_model import GPTLanguageModel

BYTE_PAIR_FILES = ("vocab.json", "merges.txt")


def _byte_pair(folder):
    """GPT-2's tokenizer from the `vocab.json` and `merges.txt` beside a `.keras` file."""
    if not all((pathlib.Path(folder) / name).is_file() for name in BYTE_PAIR_FILES):
        return None
    from keras_attn.data import gpt2_tokenizer

    return gpt2_tokenizer(folder)


GPT = registry.register(
    registry.Family(
        name="gpt",
        backbone_cls=GPTLanguageModel,
        model_types=("gpt2",),
        twin=registry.HuggingFaceTwin(
            keras_file="model.keras",
            tokenizer_files=BYTE_PAIR_FILES,
            auto_class="AutoModelForCausalLM",
            read_tokenizer=_byte_pair,
            probe=registry.token_probe,
        ),
        signatures={GPTLanguageModel: "language_model"},
        classes=(GPTFineTuner,),
    )
)
