"""Loads the `.keras` files a TensorFlow test process saved and writes what they give
on the backend of this process (`KERAS_BACKEND`): forward outputs, greedy and beam
tokens, and on JAX how often the decoder compiled. With `--without-tensorflow`,
`import tensorflow` fails here, as on a machine without it; with `--without-keras-hub`
so does `import keras_hub` (greedy decoding then runs as one-beam search).

    python tests/backends/run_saved_models.py FOLDER [--without-tensorflow] [--without-keras-hub]
"""

import json
import pathlib
import sys

if "--without-tensorflow" in sys.argv:
    for name in ("tensorflow", "tensorflow_text"):
        sys.modules[name] = None  # `import tensorflow` raises ImportError
if "--without-keras-hub" in sys.argv:
    sys.modules["keras_hub"] = None

import keras  # noqa: E402
import numpy as np  # noqa: E402

import keras_attn.models  # noqa: E402, F401  (registers the classes for loading)
from keras_attn.models import GenerationConfig  # noqa: E402


def main(folder):
    folder = pathlib.Path(folder)
    inputs = dict(np.load(folder / "inputs.npz"))
    results, report = {}, {"backend": keras.config.backend()}
    report["tensorflow_loaded"] = sys.modules.get("tensorflow") is not None

    backbone = keras.saving.load_model(folder / "backbone.keras")
    outputs = backbone({k[9:]: v for k, v in inputs.items() if k.startswith("backbone_")})
    for name, value in outputs.items():
        results[f"backbone_{name}"] = keras.ops.convert_to_numpy(value)

    language_model = keras.saving.load_model(folder / "language_model.keras")
    results["language_model_logits"] = keras.ops.convert_to_numpy(
        language_model(inputs["language_model_token_ids"])
    )
    prompt = inputs["language_model_prompt"]
    results["language_model_greedy"] = language_model.generate(prompt, max_length=12)
    results["language_model_beam"] = language_model.generate(
        prompt, max_length=12, strategy="beam", num_beams=3
    )

    seq2seq = keras.saving.load_model(folder / "seq2seq.keras")
    results["seq2seq_logits"] = keras.ops.convert_to_numpy(
        seq2seq(
            {
                "encoder_token_ids": inputs["seq2seq_encoder_token_ids"],
                "decoder_token_ids": inputs["seq2seq_decoder_token_ids"],
            }
        )
    )
    source = inputs["seq2seq_encoder_token_ids"]
    results["seq2seq_greedy"] = seq2seq.generate(source, start_token_id=2, max_length=10)
    results["seq2seq_beam"] = seq2seq.generate(
        source, start_token_id=2, max_length=10, strategy="beam", num_beams=2
    )

    if "--without-keras-hub" in sys.argv:
        try:
            language_model.generate(prompt, max_length=12, strategy="sample")
        except ImportError as error:
            report["sampling_without_keras_hub"] = str(error)
    report["keras_hub_loaded"] = sys.modules.get("keras_hub") is not None
    if keras.config.backend() == "jax":  # compiled once per setting and shape
        greedy = language_model.decode_function(GenerationConfig())
        counts = [greedy.compilations()]
        language_model.generate(prompt[:, :2], max_length=12)  # other prompt, same shape
        counts.append(greedy.compilations())
        language_model.generate(prompt, max_length=14)  # a new shape
        counts.append(greedy.compilations())
        report["greedy_compilations"] = counts
    np.savez(folder / f"{keras.config.backend()}.npz", **results)
    print(json.dumps(report))


if __name__ == "__main__":
    main(sys.argv[1])
