"""A hostile sweep of the files a user hands us and the task API around them: GGUF
headers and metadata, chat templates, keras-hub presets, Hugging Face configurations,
WordNet's folder, entity tables, labels, size flags and the JAX coordinator; each case
a neighbour of one the tests name (those live beside each surface).

    python -m tests.hostile_sweep_files [--only KIND]

Each case is judged as in `tests.hostile_sweep` (`refused` with one line naming what it
was given, or `worked` where working is right), and also by its cost: a case that took
more than `SECONDS` or grew this process's peak memory by more than `GROWTH_BYTES` is
`BAD` however it ended. It prints one line per case and a count per kind; it exits 1 if
any case is bad. About two minutes on two cores; not collected by pytest.
"""

import json
import math
import shutil
import struct
import sys

import numpy as np

from tests.hostile_sweep import _cli, _quiet, run
from tests.models.llama.gguf_files import gguf_header, gguf_string

CASES = []
SECONDS = 10
GROWTH_BYTES = 2 << 30


def case(kind, expect="refused", names=""):
    def register(function):
        CASES.append((kind, function.__name__, expect, names, function))
        return function

    return register


class World:
    """What the cases share, made once: GGUF files, a keras-hub task preset, a copy of
    WordNet's folder, a tiny classifier with its preprocessor."""

    def __init__(self, base):
        import keras
        import keras_hub

        from keras_attn.data import WordPieceTokenizer
        from keras_attn.knowledge.wordnet import wordnet_folder
        from keras_attn.models import BertBackbone, BertClassifier
        from keras_attn.models.preprocessors import TextClassifierPreprocessor
        from tests.models.llama.gguf_files import (
            byte_level_bpe_metadata,
            sentencepiece_metadata,
            write_llama_gguf,
        )

        keras.utils.set_random_seed(0)
        self.base = base
        base.mkdir(parents=True)
        self.bpe, _ = byte_level_bpe_metadata()
        self.spm = sentencepiece_metadata()
        self.gguf = base / "model.gguf"
        write_llama_gguf(self.gguf, vocabulary=len(self.bpe["token_list"]), tokenizer=self.bpe)
        words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "good", "bad", "film"]
        words += [f"w{i}" for i in range(103 - len(words))]
        hub_tokenizer = keras_hub.models.BertTokenizer(vocabulary=words, lowercase=True)
        preprocessor = keras_hub.models.BertTextClassifierPreprocessor(
            hub_tokenizer, sequence_length=16
        )
        backbone = keras_hub.models.BertBackbone(
            vocabulary_size=len(words), num_layers=2, num_heads=2, hidden_dim=16,
            intermediate_dim=32, max_sequence_length=64,
        )  # fmt: skip
        self.preset = base / "preset"
        keras_hub.models.BertTextClassifier(backbone, 2, preprocessor=preprocessor).save_to_preset(
            str(self.preset)
        )
        self.wordnet = base / "wordnet-3.0"
        shutil.copytree(wordnet_folder(), self.wordnet)
        tokenizer = WordPieceTokenizer(words, sequence_length=16)
        self.classifier = BertClassifier(
            BertBackbone.from_size("tiny", vocabulary_size=len(words), max_sequence_length=16),
            num_classes=2,
            preprocessor=TextClassifierPreprocessor(tokenizer),
        )
        self.classifier.compile(optimizer="adam")
        self.texts = ["a good film", "a bad film", "good", "bad"]


# ---- GGUF headers: every count against the bytes left ----


ARCH = ("general.architecture", 8, gguf_string("llama"))


def _from_gguf(path, data=None):
    from keras_attn.models import from_gguf

    if data is not None:
        path.write_bytes(data)
    from_gguf(path)


@case("gguf headers", names="items of big")
def gguf_float64_array_of_a_trillion(world, tmp):
    _from_gguf(tmp / "m.gguf", gguf_header(ARCH, ("big", 9, struct.pack("<IQ", 12, 10**12))))


@case("gguf headers", names="strings of tokenizer.ggml.tokens")
def gguf_string_array_of_a_billion(world, tmp):
    raw = struct.pack("<IQ", 8, 10**9) + gguf_string("a") * 4
    _from_gguf(tmp / "m.gguf", gguf_header(ARCH, ("tokenizer.ggml.tokens", 9, raw)))


@case("gguf headers", names="run past the end")
def gguf_a_string_in_an_array_of_2_63_bytes(world, tmp):
    raw = struct.pack("<IQ", 8, 2) + gguf_string("a") + struct.pack("<Q", 1 << 63) + b"xx"
    _from_gguf(tmp / "m.gguf", gguf_header(ARCH, ("tokenizer.ggml.tokens", 9, raw)))


@case("gguf headers", names="bytes of a key")
def gguf_a_key_of_2_40_bytes(world, tmp):
    _from_gguf(tmp / "m.gguf", b"GGUF" + struct.pack("<IQQQ", 3, 0, 1, 1 << 40) + b"k" * 40)


@case("gguf headers", names="tensors at byte")
def gguf_no_key_and_2_60_tensors(world, tmp):
    _from_gguf(tmp / "m.gguf", b"GGUF" + struct.pack("<IQQ", 3, 1 << 60, 0) + b"\0" * 64)


@case("gguf headers", names="lie past the end")
def gguf_dimensions_whose_product_overflows_64_bits(world, tmp):
    info = gguf_string("t") + struct.pack("<I", 4) + struct.pack("<QQQQ", *[1 << 32] * 4)
    info += struct.pack("<IQ", 0, 0)
    _from_gguf(tmp / "m.gguf", gguf_header(ARCH, tensors=1) + info + b"\0" * 64)


@case("gguf headers", names="not whole blocks of 32")
def gguf_a_q4_0_row_not_whole_blocks(world, tmp):
    info = gguf_string("t") + struct.pack("<I", 2) + struct.pack("<QQ", 33, 2)
    info += struct.pack("<IQ", 2, 0)  # Q4_0
    _from_gguf(tmp / "m.gguf", gguf_header(ARCH, tensors=1) + info + b"\0" * 128)


@case("gguf headers", names="appears twice")
def gguf_a_key_twice(world, tmp):
    key = ("llama.block_count", 4, struct.pack("<I", 2))
    _from_gguf(tmp / "m.gguf", gguf_header(ARCH, key, key))


@case("gguf headers", names="GGUF version")
def gguf_version_2_31(world, tmp):
    _from_gguf(tmp / "m.gguf", b"GGUF" + struct.pack("<I", 0x7FFFFFFF) + b"\0" * 40)


@case("gguf headers", names="general.alignment")
def gguf_alignment_of_three(world, tmp):
    _from_gguf(tmp / "m.gguf", gguf_header(ARCH, ("general.alignment", 4, struct.pack("<I", 3))))


@case("gguf headers", names="too short")
def gguf_the_magic_alone(world, tmp):
    _from_gguf(tmp / "m.gguf", b"GGUF")


@case("gguf headers", names="is not UTF-8")
def gguf_a_key_that_is_not_utf8(world, tmp):
    _from_gguf(tmp / "m.gguf", gguf_header(ARCH, ("k\xff", 4, struct.pack("<I", 1))).replace(
        "k\xff".encode(), b"k\xff"
    ))  # fmt: skip


# ---- GGUF metadata: types, signs, finiteness ----


def _metadata(world, tmp, **metadata):
    from tests.models.llama.gguf_files import write_llama_gguf

    write_llama_gguf(tmp / "m.gguf", metadata=metadata)
    _from_gguf(tmp / "m.gguf")


@case("gguf metadata", names="general.architecture")
def gguf_architecture_as_a_number(world, tmp):
    _metadata(world, tmp, **{"general.architecture": 7})


@case("gguf metadata", names="llama.rope.freq_base")
def gguf_negative_rope_base(world, tmp):
    _metadata(world, tmp, **{"llama.rope.freq_base": -10000.0})


@case("gguf metadata", names="llama.rope.scaling.factor")
def gguf_nan_rope_scaling_factor(world, tmp):
    _metadata(world, tmp, **{"llama.rope.scaling.factor": math.nan})


@case("gguf metadata", names="layer_norm_rms_epsilon")
def gguf_infinite_epsilon(world, tmp):
    _metadata(world, tmp, **{"llama.attention.layer_norm_rms_epsilon": math.inf})


@case("gguf metadata", names="llama.context_length")
def gguf_context_length_zero(world, tmp):
    _metadata(world, tmp, **{"llama.context_length": 0})


@case("gguf metadata", names="llama.embedding_length")
def gguf_embedding_length_as_a_float(world, tmp):
    _metadata(world, tmp, **{"llama.embedding_length": 32.0})


@case("gguf metadata", names="gemma3.rope.freq_base")
def gguf_gemma_nan_rope_base(world, tmp):
    _metadata(world, tmp, **{"general.architecture": "gemma3", "gemma3.rope.freq_base": math.nan})


def _tokenizer(world, tmp, spm=False, **changes):
    from tests.models.llama.gguf_files import write_llama_gguf

    metadata = dict(world.spm if spm else world.bpe, **changes)
    metadata = {k: v for k, v in metadata.items() if v is not None}
    write_llama_gguf(tmp / "m.gguf", vocabulary=len(metadata["token_list"]), tokenizer=metadata)
    _from_gguf(tmp / "m.gguf")


@case("gguf metadata", names="tokenizer.ggml.token_type")
def gguf_token_types_one_short(world, tmp):
    _tokenizer(world, tmp, token_types=world.bpe["token_types"][:-1])


@case("gguf metadata", names="tokenizer.ggml.bos_token_id")
def gguf_start_token_past_the_vocabulary(world, tmp):
    _tokenizer(world, tmp, bos_token_id=len(world.bpe["token_list"]))


@case("gguf metadata", names="merges[3]=''")
def gguf_an_empty_merge_rule(world, tmp):
    merges = list(world.bpe["token_merges"])
    merges[3] = ""
    _tokenizer(world, tmp, token_merges=merges)


@case("gguf metadata", names="merges[2]='t  h'")
def gguf_a_merge_rule_with_two_spaces(world, tmp):
    merges = list(world.bpe["token_merges"])
    merges[2] = "t  h"
    _tokenizer(world, tmp, token_merges=merges)


@case("gguf metadata", names="<0x41x>")
def gguf_a_byte_piece_of_another_form(world, tmp):
    tokens, types = list(world.spm["token_list"]), list(world.spm["token_types"])
    index = types.index(6)
    tokens[index] = "<0x41x>"
    _tokenizer(world, tmp, spm=True, token_list=tokens)


@case("gguf metadata", names="SentencePiece")
def gguf_sentencepiece_without_unk(world, tmp):
    tokens = ["<x>" if t == "<unk>" else t for t in world.spm["token_list"]]
    _tokenizer(world, tmp, spm=True, token_list=tokens, unk_token_id=None)


@case("gguf metadata", names="not JSON")
def hf_folder_with_a_nan_epsilon(world, tmp):
    from keras_attn.models import LlamaLanguageModel

    (tmp / "m").mkdir()
    (tmp / "m" / "config.json").write_text('{"model_type": "llama", "rms_norm_eps": NaN}')
    LlamaLanguageModel.from_pretrained(tmp / "m")


@case("gguf metadata", names="1e999 is not JSON")
def hf_folder_with_an_infinite_rope_base(world, tmp):
    from keras_attn.models import LlamaLanguageModel

    (tmp / "m").mkdir()
    (tmp / "m" / "config.json").write_text('{"model_type": "llama", "rope_theta": 1e999}')
    LlamaLanguageModel.from_pretrained(tmp / "m")


# ---- Chat templates: every budget ----


def _render(template, messages=None):
    from keras_attn.data.chat_templates import render_chat_template

    render_chat_template(template, messages or [{"role": "user", "content": "hi"}])


@case("templates", names="too large")
def template_a_string_just_past_the_bound(world, tmp):
    _render("{{ 'ab' * 3000000 }}")


@case("templates", names="Range too big")
def template_a_range_of_a_billion(world, tmp):
    _render("{% for i in range(10**9) %}{% endfor %}")


@case("templates", names="too large")
def template_the_messages_repeated(world, tmp):
    _render("{{ messages * 10**8 }}")


@case("templates", names="more than 65536 bits")
def template_ten_to_the_hundred_thousand(world, tmp):
    _render("{{ 10 ** 100000 }}")


@case("templates", names="chat template failed")
def template_lipsum_of_a_hundred_million(world, tmp):
    _render("{{ lipsum(n=10**8) }}")


@case("templates", names="chat template failed")
def template_indent_of_a_billion(world, tmp):
    _render("{{ 'x\ny'|indent(10**9) }}")


@case("templates", names="too large")
def template_a_joined_range_repeated(world, tmp):
    _render("{{ range(100000)|join(',') * 100 }}")


@case("templates", names="includes or imports no other")
def template_extends(world, tmp):
    _render("{% extends 'base.jinja' %}")


@case("templates", names="SecurityError")
def template_a_global_functions_globals(world, tmp):
    _render("{{ cycler.__init__.__globals__ }}")


@case("templates", names="too large")
def template_fifty_megabytes_of_literal_text(world, tmp):
    _render("x" * (50 << 20))


@case("templates", names="messages")
def template_messages_with_bytes(world, tmp):
    _render("{{ messages }}", [{"role": "user", "content": b"\xff"}])


@case("templates", names="recursed too deep")
def template_a_recursive_for_loop(world, tmp):
    _render(
        "{% for m in [1] recursive %}{{ loop([1]) }}{% endfor %}",
    )


@case("templates", "worked")
def template_an_ordinary_chat(world, tmp):
    _render(
        "{% for m in messages %}<|{{ m.role }}|>{{ m.content | trim }}{% endfor %}"
        "{% if add_generation_prompt %}<|assistant|>{% endif %}"
    )


# ---- keras-hub presets: one rule for config.json, task.json and its backbone ----


def _preset(world, tmp, file, edit):
    from keras_attn.models import TextClassifier

    folder = tmp / "preset"
    shutil.copytree(world.preset, folder)
    if callable(edit):
        config = json.loads((folder / file).read_text())
        edit(config)
        (folder / file).write_text(json.dumps(config))
    else:
        (folder / file).write_bytes(edit)
    with _quiet():
        TextClassifier.from_preset(folder, num_classes=2)


@case("presets", names="from 'os'")
def preset_a_module_outside_keras_hub(world, tmp):
    _preset(world, tmp, "config.json", lambda c: c.update(module="os"))


@case("presets", names="task keras-hub lacks")
def preset_a_task_that_is_a_backbone(world, tmp):
    def edit(config):
        config.update(class_name="BertBackbone", registered_name="keras_hub>BertBackbone")

    _preset(world, tmp, "task.json", edit)


@case("presets", names="num_classes='2'")
def preset_num_classes_as_a_string(world, tmp):
    _preset(world, tmp, "task.json", lambda c: c["config"].update(num_classes="2"))


@case("presets", names="num_classes=0")
def preset_num_classes_zero(world, tmp):
    _preset(world, tmp, "task.json", lambda c: c["config"].update(num_classes=0))


@case("presets", names="num_heads=1000000000")
def preset_a_billion_heads_in_the_task_backbone(world, tmp):
    _preset(
        world, tmp, "task.json",
        lambda c: c["config"]["backbone"]["config"].update(num_heads=10**9),
    )  # fmt: skip


@case("presets", names="config.json claims 16,000,006,432 weights")
def preset_a_billion_positions(world, tmp):
    _preset(world, tmp, "config.json", lambda c: c["config"].update(max_sequence_length=10**9))


@case("presets", names="task.weights.h5")
def preset_a_truncated_head(world, tmp):
    data = (world.preset / "task.weights.h5").read_bytes()
    _preset(world, tmp, "task.weights.h5", data[: len(data) // 3])


@case("presets", names="sequence_length=1000000000")
def preset_a_billion_token_sequence(world, tmp):
    _preset(world, tmp, "preprocessor.json", lambda c: c["config"].update(sequence_length=10**9))


@case("presets", names="config.json")
def preset_config_json_not_json(world, tmp):
    _preset(world, tmp, "config.json", b"{not json")


# ---- The task API: examples and labels before the graph ----


@case("task API", names="at least one example")
def fit_empty_arrays(world, tmp):
    world.classifier.fit(x=np.array([], dtype=str), y=np.array([], dtype=int), verbose=0)


@case("task API", names="at least one example")
def predict_on_batch_empty(world, tmp):
    world.classifier.predict_on_batch([])


@case("task API", names="class ids")
def fit_one_hot_labels(world, tmp):
    world.classifier.fit(world.texts, np.eye(2)[[0, 1, 0, 1]] * 3, verbose=0)


@case("task API", names="integer class ids")
def fit_labels_with_none(world, tmp):
    world.classifier.fit(world.texts, [0, None, 1, 0], verbose=0)


@case("task API", names="of one length")
def fit_more_labels_than_texts(world, tmp):
    world.classifier.fit(world.texts, [0, 1, 0, 1, 1], verbose=0)


@case("task API", names="Received: inf")
def evaluate_an_infinite_label(world, tmp):
    world.classifier.evaluate(world.texts, [0, 1, math.inf, 0], verbose=0)


@case("task API", "worked")
def fit_boolean_labels(world, tmp):
    world.classifier.fit(world.texts, [True, False, True, False], verbose=0)


# ---- WordNet's files and entity tables ----


def _wordnet(world, tmp, name, change):
    from keras_attn.knowledge import WordNet
    from tests.helpers import with_one_file_changed

    WordNet(with_one_file_changed(world.wordnet, tmp / "wordnet-3.0", name, change))


@case("knowledge files", names="data.verb: No such file")
def wordnet_without_data_verb(world, tmp):
    _wordnet(world, tmp, "data.verb", None)


@case("knowledge files", names="index.sense, line 1")
def wordnet_index_sense_garbage(world, tmp):
    _wordnet(world, tmp, "index.sense", lambda d: b"garbage\n" + d)


@case("knowledge files", names="no synsets")
def wordnet_every_data_file_empty(world, tmp):
    from keras_attn.knowledge import WordNet

    folder = tmp / "wordnet-3.0"
    folder.mkdir()
    for path in world.wordnet.iterdir():
        empty = path.name.startswith("data.")
        (folder / path.name).write_bytes(b"" if empty else path.read_bytes())
    WordNet(folder)


@case("knowledge files", names="data.adv, line")
def wordnet_a_synset_line_edited_in_place(world, tmp):
    _wordnet(world, tmp, "data.adv", lambda d: d.replace(b" | ", b" || ", 1)[:-1] + b"x\n")


@case("knowledge files", names="not the file its run wrote")
def entities_with_a_garbage_digest(world, tmp):
    from keras_attn.data import GraphLinker

    (tmp / "entities.txt").write_text("02084071-n\n02121620-n\n")
    (tmp / "entities.sha256").write_text("0" * 64)
    GraphLinker.from_entities(tmp / "entities.txt", 2)


@case("knowledge files", names="not the file its run wrote")
def entities_cut_after_its_digest(world, tmp):
    from keras_attn.data import GraphLinker
    from keras_attn.knowledge import EntityLinker, WordNet

    ids = {"02084071-n": 1, "02121620-n": 2}
    GraphLinker(EntityLinker(WordNet.load(), synsets=ids), ids).save_assets(tmp)
    (tmp / "entities.txt").write_text("02084071-n\n")
    GraphLinker.from_entities(tmp / "entities.txt", 2)


@case("knowledge files", "worked")
def entities_as_the_run_wrote_them(world, tmp):
    from keras_attn.data import GraphLinker
    from keras_attn.knowledge import EntityLinker, WordNet

    ids = {"02084071-n": 1, "02121620-n": 2}
    GraphLinker(EntityLinker(WordNet.load(), synsets=ids), ids).save_assets(tmp)
    GraphLinker.from_entities(tmp / "entities.txt", 2)


# ---- Served generation: ids checked, text UTF-8 ----


def _served_lm(world):
    """A tiny GPT exported once with greedy decoding in the graph (loaded without Keras
    as TF Serving loads it)."""
    if not hasattr(world, "served_lm"):
        import keras
        import tensorflow as tf

        from keras_attn.data import WordPieceTokenizer
        from keras_attn.export import export_saved_model
        from keras_attn.models import GenerationConfig, GPTLanguageModel

        keras.utils.set_random_seed(0)
        words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "lion", "é", "##s"]
        model = GPTLanguageModel(len(words), num_layers=1, num_heads=2, hidden_dim=16,
                                 intermediate_dim=32, max_sequence_length=16)  # fmt: skip
        path = export_saved_model(
            model,
            WordPieceTokenizer(words, sequence_length=16),
            world.base / "lm" / "1",
            generation=GenerationConfig(max_length=8),
            warmup=False,
        )
        world.served_lm = tf.saved_model.load(str(path)).signatures
    return world.served_lm


def _serve_ids(world, ids):
    import tensorflow as tf

    signatures = _served_lm(world)
    try:
        signatures["serve_token_ids"](
            token_ids=tf.constant([ids], tf.int32), padding_mask=tf.ones([1, len(ids)], tf.int32)
        )
    except tf.errors.InvalidArgumentError as error:
        lines = [line for line in error.message.splitlines() if "Expected token_ids" in line]
        raise ValueError(lines[0].strip() if lines else error.message[:200]) from None


@case("served generation", names="Expected token_ids in [0, 9)")
def serve_the_id_past_the_vocabulary(world, tmp):
    _serve_ids(world, [5, 9])


@case("served generation", names="Expected token_ids in [0, 9)")
def serve_the_largest_int32(world, tmp):
    _serve_ids(world, [5, 2**31 - 1])


@case("served generation", "worked")
def serve_bytes_that_are_not_utf8(world, tmp):
    import tensorflow as tf

    outputs = _served_lm(world)["serving_default"](prompt=tf.constant([b"the \xff\xfe lion"]))
    for text in outputs["text"].numpy():
        text.decode("utf-8")  # strict


# ---- Size flags and the coordinator ----


@case("size flags", names="training.lora_rank")
def finetune_a_lora_rank_of_a_million(world, tmp):
    from tests.training.runs import backbone_folder, write_reviews

    _cli("finetune", "--backbone", backbone_folder(tmp / "b"), "--train",
         write_reviews(tmp / "r.csv"), "--text-column", "review", "--label-column",
         "sentiment", "--sequence-length", "16", "--lora-rank", "1000000", "--steps", "1",
         "--output", tmp / "run")  # fmt: skip


@case("size flags", names="training.lora_rank`: expected a value in [1, inf), got 0")
def lm_base_lora_rank_zero(world, tmp):
    from tests.training.runs import write_corpus

    _cli("lm", "--base", world.gguf, "--corpus", write_corpus(tmp / "c.txt"),
         "--lora-rank", "0", "--output", tmp / "run")  # fmt: skip


@case("size flags", names="max_length")
def generate_a_billion_tokens(world, tmp):
    from keras_attn.models import from_gguf

    from_gguf(world.gguf).generate("the", max_length=10**9)


@case("size flags", "worked")  # at most that many: the model's positions bound the reply
def chat_a_billion_new_tokens(world, tmp):
    from keras_attn.models import from_gguf

    from_gguf(world.gguf).chat([{"role": "user", "content": "hi"}], max_new_tokens=10**9)


@case("size flags", names="not an IPv4 address")
def coordinator_three_numbers(world, tmp):
    from keras_attn.cli.train import _check_coordinator

    _check_coordinator("1.2.3", 4000, 0)  # what `--coordinator 1.2.3:4000` is checked by


@case("size flags", names="cannot listen there")
def coordinator_a_port_taken(world, tmp):
    import socket

    from keras_attn.cli.train import _check_coordinator

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        _check_coordinator("127.0.0.1", taken.getsockname()[1], 0)


@case("size flags", "worked")
def coordinator_ipv6_loopback(world, tmp):
    from keras_attn.cli.train import _check_coordinator

    _check_coordinator("[::1]", 47613, 0)


@case("size flags", names="expected 1 to 64")
def export_sixty_five_beams(world, tmp):
    _cli("export", tmp / "nothing", "--strategy", "beam", "--num-beams", "65")


def main(argv=None):
    return run(CASES, World, __doc__, argv, SECONDS, GROWTH_BYTES)


if __name__ == "__main__":
    sys.exit(main())
