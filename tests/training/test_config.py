"""Configurations: presets load, and bad ones fail before training, naming the key or file."""

import re

import pytest

from keras_attn.training import TrainingConfig, build_optimizer, load_config
from keras_attn.training.config import CONFIG_DIR
from keras_attn.training.tasks import TASKS
from tests.training.runs import keras_attn_command, pretrain_args, write_corpus


@pytest.mark.parametrize("preset", sorted(p.stem for p in CONFIG_DIR.glob("*.yaml")))
def test_every_preset_loads_for_its_task(preset):
    task = TASKS[
        {"pretrain": "pretrain", "classifier": "finetune", "lm": "lm", "seq2seq": "seq2seq"}[
            preset.rsplit("_", 1)[1]
        ]
    ]
    run = load_config({**task.sections, "training": TrainingConfig}, preset)
    assert run.training.steps > 0 and run.source.name == f"{preset}.yaml"


@pytest.mark.parametrize(
    "yaml_text, key",
    [
        ("training:\n  batch_sise: 8\n", "training.batch_sise"),
        ("training:\n  batch_size: eight\n", "training.batch_size"),
        ("training:\n  jit_compile: 1\n", "training.jit_compile"),
        ("training:\n  precision: float8\n", "training.precision"),
        ("training:\n  warmup: 1.5\n", "training.warmup"),
        ("optimiser:\n  lr: 1\n", "optimiser"),
    ],
)
def test_bad_values_name_their_key(tmp_path, yaml_text, key):
    path = tmp_path / "run.yaml"
    path.write_text(yaml_text)
    with pytest.raises(ValueError, match=f"`{key}`"):
        load_config({"training": TrainingConfig}, path)


def test_flags_override_the_file_and_are_parsed(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("training:\n  steps: 10\n  clipnorm: 2\n")
    run = load_config(
        {"training": TrainingConfig}, path, {"training.steps": "20", "training.clipnorm": "null"}
    )
    assert (run.training.steps, run.training.clipnorm) == (20, None)


def test_exponent_floats_are_floats_in_files_and_flags(tmp_path):
    # PyYAML reads `1e-3` as a string (YAML 1.1 wants `1.0e-3`); people write 1e-3.
    path = tmp_path / "run.yaml"
    path.write_text("training:\n  learning_rate: 1e-3\n")
    assert load_config({"training": TrainingConfig}, path).training.learning_rate == 1e-3
    run = load_config({"training": TrainingConfig}, path, {"training.learning_rate": "5e-4"})
    assert run.training.learning_rate == 5e-4
    with pytest.raises(ValueError, match="`training.learning_rate`"):
        load_config({"training": TrainingConfig}, path, {"training.learning_rate": "fast"})


def test_missing_config_file_is_named():
    with pytest.raises(ValueError, match="no_such.yaml"):
        load_config({"training": TrainingConfig}, "no_such.yaml")


def test_optimizer_excludes_layer_norm_and_biases_from_weight_decay():
    import keras

    optimizer = build_optimizer(TrainingConfig(steps=10, weight_decay=0.1))
    dense, norm = keras.layers.Dense(2), keras.layers.LayerNormalization()
    dense.build((None, 2)), norm.build((None, 2))
    decayed = {v.path: optimizer._use_weight_decay(v) for v in dense.weights + norm.weights}
    assert decayed == {
        "dense/kernel": True,
        "dense/bias": False,
        "layer_normalization/gamma": False,
        "layer_normalization/beta": False,
    }


@pytest.mark.slow
@pytest.mark.parametrize(
    "flags, message",
    [
        (["--corpus", "no/such/corpus.txt"], "data.corpus"),
        (["--batch-size", "seven"], "training.batch_size"),
        (["--config", "no_such_preset"], "no_such_preset"),
    ],
)
def test_cli_refuses_bad_configs_before_training(tmp_path, flags, message):
    corpus = write_corpus(tmp_path / "corpus.txt")
    args = pretrain_args(corpus, tmp_path / "run") + flags
    process = keras_attn_command(args)
    output, _ = process.communicate(timeout=120)
    assert process.returncode != 0 and message in output, output[-2000:]
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_cli_help_explains_every_option():
    for command, task in TASKS.items():
        process = keras_attn_command([command, "--help"])
        output, _ = process.communicate(timeout=120)
        assert process.returncode == 0
        import dataclasses

        for section in list(task.sections.values()) + [TrainingConfig]:
            for field in dataclasses.fields(section):
                assert f"--{field.name.replace('_', '-')}" in output


def test_help_puts_the_common_options_first_and_groups_the_rest():
    from keras_attn.cli.train import build_parser

    for command in TASKS:
        help_text = build_parser(command)[0].format_help()
        assert help_text.startswith(f"usage: keras-attn {command} [--config")
        assert len(help_text.splitlines()[0]) <= 100  # one usage line, not a page of flags
        groups = [line for line in help_text.splitlines() if line and not line[0].isspace()]
        assert groups.index("the common options:") < groups.index(
            "training: steps, optimizer and schedule:"
        )
        common = help_text.split("the common options:")[1].split("\n\n")[0]
        for flag in ("--config", "--output", "--steps", "--batch-size", "--learning-rate"):
            assert f"  {flag} " in common, (command, flag)
        assert help_text.count("  --steps ") == 1  # each option once
    finetune = build_parser("finetune")[0].format_help()
    common = finetune.split("the common options:")[1].split("\n\n")[0]
    assert all(f"  {flag} " in common for flag in ("--train", "--text-column", "--lora-rank"))


def _bounded_options():
    """(command, `section.key`, a value just outside its bounds) for every bounded option."""
    import dataclasses

    from keras_attn.training.config import _field_type, parse_bounds
    from keras_attn.training.task_configs import SECTIONS

    found = {}
    for command, sections in SECTIONS.items():
        for section, cls in {**sections, "training": TrainingConfig}.items():
            for field in dataclasses.fields(cls):
                bounds = field.metadata.get("bounds")
                if bounds:
                    low, low_in, _, _ = parse_bounds(bounds)
                    integer = _field_type(field.type)[0] is int
                    value = (low - (1 if integer else 0.5)) if low_in else low
                    value = int(value) if integer else value
                    found.setdefault(f"{section}.{field.name}", (command, value))
    return [(command, key, value) for key, (command, value) in sorted(found.items())]


BOUNDED = _bounded_options()


def test_the_numbers_the_models_need_are_bounded():
    keys = {key for _, key, _ in BOUNDED}
    for key in ("model.sequence_length", "model.dropout", "model.num_heads", "training.warmup"):
        assert key in keys
    assert len(BOUNDED) >= 40


@pytest.mark.slow
@pytest.mark.parametrize("command, key, value", BOUNDED, ids=[k for _, k, _ in BOUNDED])
def test_every_bounded_option_names_its_key_and_interval(tmp_path, capsys, command, key, value):
    """Through the command line, as typed: exit 2, one `error:` line, nothing made."""
    from keras_attn.cli import main as cli
    from keras_attn.cli.train import build_parser

    parser, _, destinations = build_parser(command)
    (flag,) = [a.option_strings[0] for a in parser._actions if destinations.get(a.dest) == key]
    too_high = {"model.dropout": 1.0, "training.warmup": 1.0}.get(key)
    for given in [value] + ([too_high] if too_high is not None else []):
        with pytest.raises(SystemExit) as exit_info:
            cli.main([command, "--output", str(tmp_path / "run"), flag, str(given)])
        lines = capsys.readouterr().err.strip().splitlines()
        assert exit_info.value.code == 2 and len(lines) == 1, lines
        assert re.match(rf"error: .*`{key}`: expected a value in [\[(].*got", lines[0]), lines
        assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    "command, flags",
    [
        ("finetune", ["--sequence-length", "1"]),
        ("finetune", ["--dropout", "2"]),
        ("lm", ["--num-heads", "0"]),
        ("seq2seq", ["--max-length", "1"]),
        ("distill", ["--temperature", "0"]),
    ],
)
def test_a_flag_out_of_range_is_one_error_line(tmp_path, capsys, command, flags):
    from keras_attn.cli import main as cli

    with pytest.raises(SystemExit) as exit_info:
        cli.main([command, "--output", str(tmp_path / "run"), *flags])
    assert exit_info.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "expected a value in" in lines[0]
    assert not (tmp_path / "run").exists()


def test_the_flags_choices_are_what_the_models_take():
    """The choices named in task_configs (so `--help` needs no model code) against the
    model code itself."""
    from keras_attn.layers.scoring import lookup
    from keras_attn.models import BERT_SIZES, registry
    from keras_attn.models.decoder_embedding import GPT_POSITION_EMBEDDINGS
    from keras_attn.training import task_configs

    assert set(task_configs.SCORE_NAMES) == set(lookup.SCORES)
    assert set(task_configs.BERT_PRESET_NAMES) <= set(BERT_SIZES)
    assert set(task_configs.GPT_POSITION_EMBEDDINGS) == set(GPT_POSITION_EMBEDDINGS)
    assert sorted(task_configs.PRETRAIN_OBJECTIVES) == registry.objectives()
    from keras_attn.models.bert.layer_sharing import SHARING_MODES

    assert task_configs.SHARING_MODES == SHARING_MODES


def test_pretraining_takes_albert_s_sharing_and_embedding_width():
    from keras_attn.models import registry
    from keras_attn.training.task_configs import PretrainModelConfig

    class Tokenizer:
        vocabulary_size = 50

    settings = PretrainModelConfig(objective="sop", share_layers="attention", embedding_dim=16)
    registry.discover()
    _, backbone = registry.pretraining("sop").build(settings, Tokenizer(), seed=1)
    assert backbone.share_layers == "attention" and backbone.embedding_dim == 16
    for objective in ("xlnet", "deberta"):
        with pytest.raises(ValueError, match=f"model.share_layers.*objective {objective}"):
            PretrainModelConfig(objective=objective, share_layers="all")
        with pytest.raises(ValueError, match="model.embedding_dim"):
            PretrainModelConfig(objective=objective, embedding_dim=16)
