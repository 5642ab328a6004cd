"""keras-hub's "getting started", with keras_attn's names: raw text in, raw text out.

keras-hub's first lines are a classifier from a preset trained and run on strings, a
causal language model continuing a string, and masked-LM pre-training on strings:

    classifier = keras_hub.models.TextClassifier.from_preset("bert_base_en", num_classes=2)
    classifier.fit(x=train_texts, y=train_labels, batch_size=16)
    classifier.predict(["What an amazing movie!", "A total waste of my time."])
    lm = keras_hub.models.CausalLM.from_preset("gpt2_base_en")
    lm.generate("The quick brown fox", max_length=30)
    masked_lm = keras_hub.models.MaskedLM.from_preset("bert_tiny_en_uncased")
    masked_lm.fit(x=unlabeled_texts, batch_size=16)

Below are the same lines with `keras_attn.models` for `keras_hub.models` and presets that
install offline: the packaged all-MiniLM-L6-v2 for the classifier and the masked LM
(Rotten Tomatoes reviews, the King James Bible), and for the causal LM any preset
`CausalLM.from_preset` reads (`--causal-lm`: a Hugging Face GPT-2 folder, a keras-hub
GPT-2 preset, a `keras-attn lm` run); without one, a small GPT is first trained on the
KJV with `keras-attn lm` (`--lm-steps`), so the continuation reads like scripture more
than English at the default budget.

Run:  python examples/getting_started.py [--causal-lm PRESET] [--lm-steps 300] [--smoke]
"""

import argparse
import os
import pathlib

os.environ.setdefault("KERAS_BACKEND", "tensorflow")

from keras_attn.native_logs import quiet_command_line  # noqa: E402

quiet_command_line()  # TensorFlow's C++ notices off, as for `keras-attn` commands

import numpy as np  # noqa: E402

import keras_attn.models as models  # noqa: E402  (keras_hub.models' place)
from keras_attn.data import kjv_documents, rotten_tomatoes  # noqa: E402


def train_a_language_model(folder, steps, smoke):
    """`keras-attn lm` on the KJV (a few chapters for `--smoke`): the run folder, a
    preset `CausalLM.from_preset` reads (`model.keras` and its `vocab.txt`)."""
    from keras_attn.cli.main import main as keras_attn

    chapters = kjv_documents()[: 30 if smoke else None]
    corpus = folder / "kjv.txt"
    folder.mkdir(parents=True, exist_ok=True)
    corpus.write_text("\n\n".join("\n".join(c) for c in chapters) + "\n", encoding="utf-8")
    small = ["--num-layers", "1", "--hidden-dim", "32", "--intermediate-dim", "64",
             "--vocabulary-size", "500", "--sequence-length", "32",
             "--held-out-documents", "2"] if smoke else []  # fmt: skip
    keras_attn(
        ["lm", "--corpus", str(corpus), "--output", str(folder / "lm"), "--no-resume",
         "--steps", str(steps), "--verbose", "0", "--samples-every", "0",
         "--histogram-every", "0", *small]
    )  # fmt: skip
    return folder / "lm"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--causal-lm", help="a preset CausalLM.from_preset reads")
    parser.add_argument("--lm-steps", type=int, default=300, help="the KJV GPT's steps")
    parser.add_argument("--output", default="runs/getting_started")
    parser.add_argument("--smoke", action="store_true", help="seconds: toy sizes")
    args = parser.parse_args(argv)
    output = pathlib.Path(args.output)
    reviews = rotten_tomatoes(log=False)
    count, length = (16, 32) if args.smoke else (512, 128)
    train_texts, train_labels = reviews.texts[:count], np.array(reviews.labels[:count])

    # keras_hub.models.TextClassifier.from_preset("bert_base_en", num_classes=2)
    classifier = models.TextClassifier.from_preset(
        "all_minilm_l6_v2", num_classes=2, sequence_length=length
    )
    classifier.fit(x=train_texts, y=train_labels, batch_size=16, verbose=0)
    logits = classifier.predict(["What an amazing movie!", "A total waste of my time."], verbose=0)
    print("TextClassifier.predict(strings): logits", np.round(logits, 3).tolist())

    # keras_hub.models.CausalLM.from_preset("gpt2_base_en")
    preset = args.causal_lm or train_a_language_model(
        output, 2 if args.smoke else args.lm_steps, args.smoke
    )
    lm = models.CausalLM.from_preset(preset)
    print("CausalLM.generate(string):", repr(lm.generate("And God said", max_length=30)))

    # keras_hub.models.MaskedLM.from_preset("bert_tiny_en_uncased")
    masked_lm = models.MaskedLM.from_preset("all_minilm_l6_v2", sequence_length=length)
    unlabeled_texts = [verse for chapter in kjv_documents()[:2] for verse in chapter][:count]
    history = masked_lm.fit(x=unlabeled_texts, batch_size=16, verbose=0)
    print(f"MaskedLM.fit(strings): loss {history.history['loss'][-1]:.3f}")


if __name__ == "__main__":
    main()
