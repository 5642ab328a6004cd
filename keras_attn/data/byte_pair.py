"""GPT-2's byte-level BPE: keras-hub's tokenizer on a Hugging Face folder's files, and back.

The tokenizer is keras-hub's `GPT2Tokenizer` (TensorFlow ops: it runs in tf.data and
in exported graphs), made from the `vocab.json` and `merges.txt` that GPT-2 folders
hold; `save_byte_pair_vocabulary` writes those files (and the `tokenizer_config.json`
`transformers.AutoTokenizer` reads) from such a tokenizer.
"""

import json
import pathlib

from keras_attn.api_export import keras_attn_export
from keras_attn.errors import UserInputError

END_TOKEN = "<|endoftext|>"


@keras_attn_export("keras_attn.data.gpt2_tokenizer", serializable=False)
def gpt2_tokenizer(folder, sequence_length=None):
    """GPT-2's byte-level BPE from a folder's `vocab.json` and `merges.txt`.

    Returns keras-hub's `GPT2Tokenizer`, set to always run its TensorFlow ops (the
    same path in eager code, `tf.data` and exported graphs), token for token what
    `transformers`' `GPT2Tokenizer` gives.

    Args:
        folder: a Hugging Face GPT-2 folder (or any with those two files).
        sequence_length: pad or cut every row to this many ids (`None`: ragged rows).

    Returns:
        A `keras_hub.tokenizers.GPT2Tokenizer`.

    Raises:
        FileNotFoundError: naming the missing file.
        ValueError: a vocabulary without GPT-2's `<|endoftext|>`.

    Example:

    >>> import json, pathlib, tempfile
    >>> from keras_attn.data import gpt2_tokenizer
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> vocab = {"<|endoftext|>": 0, "a": 1, "b": 2, "Ġ": 3, "Ġa": 4, "ab": 5}
    >>> _ = (folder / "vocab.json").write_text(json.dumps(vocab))
    >>> _ = (folder / "merges.txt").write_text("#version: 0.2\\nĠ a\\na b\\n")
    >>> tokenizer = gpt2_tokenizer(folder)
    >>> tokenizer(["ab a"])  # eagerly, lists; in tf.data or tf.function, tensors
    [[5, 4]]
    >>> tokenizer.detokenize([[5, 4]])
    ['ab a']
    """
    import keras_hub

    folder = pathlib.Path(folder)
    files = [folder / "vocab.json", folder / "merges.txt"]
    for file in files:
        if not file.is_file():
            raise FileNotFoundError(
                f"Expected GPT-2's vocab.json and merges.txt in {folder}. Missing: {file.name}"
            )
    try:
        vocabulary = json.loads(files[0].read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise UserInputError(f"{files[0]}: not a JSON vocabulary ({error})") from None
    if END_TOKEN not in vocabulary:
        raise UserInputError(f"{files[0]}: GPT-2's vocabulary needs {END_TOKEN}")
    merges = [
        line
        for line in files[1].read_text(encoding="utf-8").splitlines()
        if line and not line.startswith("#version")
    ]
    return keras_hub.tokenizers.GPT2Tokenizer(
        vocabulary=vocabulary,
        merges=merges,
        sequence_length=sequence_length,
        _allow_python_workflow=False,
    )


def save_byte_pair_vocabulary(tokenizer, folder, max_length):
    """Writes `tokenizer`'s `vocab.json`, `merges.txt` and a `tokenizer_config.json`
    (`transformers`' GPT2Tokenizer); returns the `config.json` keys of its special ids."""
    if not hasattr(tokenizer, "merges") or not isinstance(tokenizer.vocabulary, dict):
        raise TypeError(
            "Expected a byte-pair tokenizer (keras-hub's GPT2Tokenizer, e.g. from "
            f"keras_attn.data.gpt2_tokenizer). Received: {type(tokenizer).__name__}"
        )
    if END_TOKEN not in tokenizer.vocabulary:
        raise ValueError(f"Expected {END_TOKEN} in the tokenizer's vocabulary (GPT-2's end token)")
    folder = pathlib.Path(folder)
    (folder / "vocab.json").write_text(
        json.dumps(dict(tokenizer.vocabulary), ensure_ascii=False), encoding="utf-8"
    )
    merges = [m for m in tokenizer.merges if not str(m).startswith("#version")]
    (folder / "merges.txt").write_text(
        "#version: 0.2\n" + "".join(f"{m}\n" for m in merges), encoding="utf-8"
    )
    (folder / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "tokenizer_class": "GPT2Tokenizer",
                "model_max_length": max_length,
                "add_prefix_space": bool(getattr(tokenizer, "add_prefix_space", False)),
                "bos_token": END_TOKEN,
                "eos_token": END_TOKEN,
                "unk_token": END_TOKEN,
            },
            indent=2,
        )
        + "\n",
        encoding="utf-8",
    )
    end = int(tokenizer.vocabulary[END_TOKEN])
    return {"bos_token_id": end, "eos_token_id": end}
