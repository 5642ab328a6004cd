"""A `config.json` whose sizes the weights do not hold is refused from the weight file's
header, before anything is built: `keras-attn convert` on each family's folder, in a
process whose address space is capped at 4 GiB, ends every case in one `error:` line
within seconds (before the check, `vocab_size` 3·10⁷ climbed to 4.8 GB and
`num_hidden_layers` 10⁶ built layers for minutes)."""

import json
import resource

import pytest

from keras_attn.checkpoints import CheckpointError
from keras_attn.checkpoints.sizes import SHARED_LAYER_REPEATS, check_sizes
from tests.helpers import script_answer
from tests.training.runs import environment

# family -> (its size keys: hidden, feed-forward, positions, layers)
KEYS = {
    "bert": ("hidden_size", "intermediate_size", "max_position_embeddings", "num_hidden_layers"),
    "roberta": ("hidden_size", "intermediate_size", "max_position_embeddings", "num_hidden_layers"),
    "deberta": ("hidden_size", "intermediate_size", "max_position_embeddings", "num_hidden_layers"),
    "gpt2": ("n_embd", "n_inner", "n_positions", "n_layer"),
    "xlnet": ("d_model", "d_inner", "d_head", "n_layer"),
}
HUGE = 10**9


def _cases():
    for family, (hidden, inner, positions, layers) in KEYS.items():
        yield family, "vocab_size", 30_000_000
        yield family, "vocab_size", 10**12
        yield family, hidden, HUGE
        yield family, inner, HUGE
        yield family, positions, HUGE
        yield family, layers, 10**6
        yield family, "vocab_size", 100  # another small size: still no axis of the weights


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    from keras_attn.models import (
        BertBackbone,
        DebertaV3Backbone,
        GPTLanguageModel,
        RobertaBackbone,
        XLNetBackbone,
    )

    base = tmp_path_factory.mktemp("families")
    classes = {
        "bert": BertBackbone,
        "roberta": RobertaBackbone,
        "deberta": DebertaV3Backbone,
        "gpt2": GPTLanguageModel,
        "xlnet": XLNetBackbone,
    }
    for name, cls in classes.items():
        cls.from_size("tiny", vocabulary_size=60).save_pretrained(base / name)
    return base


# Runs each case through `keras-attn convert FOLDER OUT` as typed, in one process whose
# address space is capped; prints, per case, the error line (or "ok") and its seconds.
# The first case runs once more before the timed ones: what the command imports on its
# first call (the families, safetensors; 18 s on a loaded 2-core machine) is not the
# check's time.
SCRIPT = """
import json, pathlib, shutil, sys, time
from keras_attn.cli import main as cli
from keras_attn.cli.user_errors import CommandError
base, cases = pathlib.Path(sys.argv[1]), json.loads(sys.argv[2])
answers = []
for i, (family, key, value) in [(-1, cases[0]), *enumerate(cases)]:
    folder = base / f"case{i}"
    shutil.copytree(base / family, folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, key: value}))
    started = time.perf_counter()
    try:
        cli.main(["convert", str(folder), str(base / f"out{i}"), "--no-check"])
        answer = "ok"
    except CommandError as error:
        answer = str(error)
    answers.append([answer, time.perf_counter() - started])
print(json.dumps(answers[1:]))
"""


def _capped():
    limit = 4 << 30
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


@pytest.mark.slow
def test_convert_refuses_sizes_the_weights_do_not_hold_under_a_memory_cap(folders):
    cases = list(_cases())
    answers = script_answer(
        SCRIPT, folders, json.dumps(cases), env=environment(), preexec_fn=_capped, timeout=600
    )
    for (family, key, value), (answer, seconds) in zip(cases, answers, strict=True):
        assert answer.startswith("error: config.json: "), (family, key, answer)
        assert f"{key} {value}" in answer and "model.safetensors" in answer, answer
        assert "\n" not in answer
        assert seconds < 10, (family, key, seconds)


def test_check_sizes_bounds_each_kind_of_key():
    shapes = {
        "embeddings.word_embeddings.weight": (4168, 32),
        "encoder.layer.0.intermediate.dense.weight": (64, 32),
        "encoder.layer.1.intermediate.dense.weight": (64, 32),
        "embeddings.position_embeddings.weight": (128, 32),
    }
    fits = {"vocab_size": 4168, "hidden_size": 32, "intermediate_size": 64}
    check_sizes({**fits, "num_hidden_layers": 2, "max_position_embeddings": 128}, shapes, "c", "w")
    check_sizes(
        {**fits, "hidden_act": "gelu", "mem_len": None, "type_vocab_size": 0}, shapes, "c", "w"
    )
    refused = [
        ({"intermediate_size": 65}, "intermediate_size 65 is no axis"),
        ({"max_position_embeddings": 70_000}, "larger than any axis .* 4168; positions: at"),
        ({"num_hidden_layers": 3}, "num_hidden_layers 3, where the weights in w hold 2 layers"),
        ({"num_attention_heads": 10**6}, "num_attention_heads 1000000 is larger"),
        ({"num_hidden_groups": 1, "num_hidden_layers": SHARED_LAYER_REPEATS + 1}, "shared"),
    ]
    for overrides, message in refused:
        with pytest.raises(CheckpointError, match=message):
            check_sizes({**fits, **overrides}, shapes, "c", "w")
    # Positions a family keeps as no weight (DeBERTa-v3's 512 beside a tiny model's axes).
    check_sizes(
        {**fits, "max_position_embeddings": 5000, "position_buckets": 256}, shapes, "c", "w"
    )
    # ALBERT's repeats of its one shared group, within the bound.
    check_sizes({**fits, "num_hidden_groups": 1, "num_hidden_layers": 24}, shapes, "c", "w")


# A `.lora.h5` whose rank says 10⁶, its datasets declared that large (chunked, stored
# empty: the file stays small), loaded in a process capped at 4 GiB.
LORA_SCRIPT = """
import json, sys, time
import h5py
from keras_attn.models import BertBackbone
path, rank = sys.argv[1], 10**6
model = BertBackbone.from_size("tiny", vocabulary_size=60)
model.enable_lora(4)
model.save_lora_weights(path)
with h5py.File(path, "r+") as f:
    signature = json.loads(f.attrs["signature"])
    signature = [[n, k, [*a[:-1], rank], [rank, b[-1]]] for n, k, a, b in signature]
    f.attrs["rank"], f.attrs["signature"] = rank, json.dumps(signature)
    for index, (_, _, a, b) in enumerate(signature):
        for name, shape in (("lora_kernel_a", a), ("lora_kernel_b", b)):
            del f[f"{index:04d}/{name}"]
            f[f"{index:04d}"].create_dataset(name, shape=shape, dtype="float32", chunks=True)
fresh = BertBackbone.from_size("tiny", vocabulary_size=60)
started = time.perf_counter()
try:
    fresh.load_lora_weights(path)
    answer = "loaded"
except ValueError as error:
    answer = str(error)
print(json.dumps([answer, time.perf_counter() - started, fresh.lora_rank]))
"""


@pytest.mark.slow
def test_a_lora_file_claiming_a_huge_rank_is_refused_under_a_memory_cap(tmp_path):
    path = tmp_path / "huge.lora.h5"
    answer, seconds, rank = script_answer(LORA_SCRIPT, path, env=environment(), preexec_fn=_capped)
    assert "says rank 1000000" in answer and "at most" in answer, answer
    assert seconds < 5 and rank is None  # refused at once; no LoRA enabled
    assert path.stat().st_size < 1_000_000  # the claim, not the data, was large
