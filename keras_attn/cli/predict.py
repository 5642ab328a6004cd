"""`keras-attn predict SAVED_MODEL --text ...`: run an exported model on raw text.

Loads the SavedModel with TensorFlow alone (as TF Serving would) and calls its
`serving_default` signature. SAVED_MODEL is a version folder or a model folder
(its highest version is used).
"""

import argparse
import json
import pathlib


def build_parser():
    parser = argparse.ArgumentParser(prog="keras-attn predict", description=__doc__.split("\n")[0])
    parser.add_argument("saved_model", type=pathlib.Path, help="saved_models/<name>[/<version>]")
    parser.add_argument("--text", action="append", required=True, help="a text (repeat for a batch)")
    parser.add_argument("--text-pair", action="append", help="the second text of each pair, for pair models")
    parser.add_argument("--json", action="store_true", help="print the outputs as JSON")
    return parser


def resolve_version(path):
    """A version folder as is; a model folder -> its highest integer version."""
    path = pathlib.Path(path)
    if (path / "saved_model.pb").is_file():
        return path
    versions = sorted((int(p.name) for p in path.iterdir() if p.name.isdigit()), reverse=True) if path.is_dir() else []
    if not versions:
        raise SystemExit(f"error: {path} is neither a SavedModel nor a folder of numbered versions")
    return path / str(versions[0])


def predict(saved_model, texts, text_pairs=None):
    """`{output name: numpy array}` of `serving_default` on `texts` (and `text_pairs`)."""
    import tensorflow as tf

    signature = tf.saved_model.load(str(resolve_version(saved_model))).signatures["serving_default"]
    inputs = {"text": tf.constant(texts)}
    if "text_pair" in signature.structured_input_signature[1]:
        if not text_pairs or len(text_pairs) != len(texts):
            raise SystemExit("error: this model takes pairs: give one --text-pair per --text")
        inputs["text_pair"] = tf.constant(text_pairs)
    return {name: value.numpy() for name, value in signature(**inputs).items()}


def main(argv=None):
    args = build_parser().parse_args(argv)
    outputs = predict(args.saved_model, args.text, args.text_pair)
    if args.json:
        print(json.dumps({k: v.tolist() if v.dtype != object else [s.decode() for s in v.ravel()]
                          for k, v in outputs.items()}, indent=2))
        return outputs
    for i, text in enumerate(args.text):
        if "labels" in outputs:
            label = outputs["labels"][i].decode()
            print(f"{label:>10}  p={outputs['probabilities'][i].max():.3f}  {text}")
        else:
            print(f"{text}: " + ", ".join(f"{k} {tuple(v[i].shape)}" for k, v in outputs.items()))
    return outputs
