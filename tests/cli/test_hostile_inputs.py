"""A sweep of what a new user gets wrong, command by command: each attempt ends in
exit status 2 with one `error:` line naming the flag, file or value and no traceback,
and an existing output file is left byte for byte as it was."""

import shutil

import pytest

from keras_attn.cli import main as cli
from keras_attn.data import WordPieceTokenizer
from keras_attn.export import export_saved_model
from keras_attn.models import BertBackbone, BertClassifier
from tests.training.runs import VOCABULARY, backbone_folder, write_corpus, write_reviews

# One worker runs this module: its module fixture is made once (`--dist loadgroup`).
pytestmark = pytest.mark.xdist_group("test_hostile_inputs")

PRECIOUS = b"line,text,labels\n1,kept,pos\n"

# (id, the command line ({name} is a file of the fixture), what the error line says).
FINETUNE = "finetune --backbone {backbone} --train {reviews} --text-column review "
FINETUNE += "--label-column sentiment --sequence-length 16 --steps 2 --output {dir}/run "
PREDICT = "predict {export} --output {precious} "
CASES = [
    # training flags: checked before any model is built
    (
        "sequence_length_1",
        FINETUNE + "--sequence-length 1",
        r"model.sequence_length.*\[4, inf\), got 1",
    ),
    ("dropout_2", FINETUNE + "--dropout 2", r"model.dropout.*\[0, 1\), got 2.0"),
    ("dropout_not_a_number", FINETUNE + "--dropout abc", r"model.dropout.*expected a float"),
    ("learning_rate_negative", FINETUNE + "--learning-rate -1", r"training.learning_rate"),
    ("batch_size_0", FINETUNE + "--batch-size 0", r"training.batch_size"),
    ("steps_negative", FINETUNE + "--steps -5", r"training.steps"),
    ("validation_fraction", FINETUNE + "--validation-fraction 1.5", r"validation_fraction"),
    ("pooling_unknown", FINETUNE + "--pooling bogus", r"pooling.*bogus"),
    ("precision_unknown", FINETUNE + "--precision float8", r"precision.*float8"),
    ("strategy_unknown", FINETUNE + "--strategy bogus", r"strategy.*bogus"),
    ("unknown_flag", FINETUNE + "--bogus 1", r"unrecognized arguments: --bogus 1"),
    ("flag_without_value", FINETUNE + "--steps", r"--steps: expected one argument"),
    ("backend_unknown", FINETUNE + "--backend mxnet", r"--backend.*mxnet"),
    # training files and folders
    ("train_missing", FINETUNE + "--train {dir}/missing.csv", r"missing.csv"),
    ("train_a_folder", FINETUNE + "--train {dir}", r"is a folder"),
    ("train_empty", FINETUNE + "--train {empty}", r"empty.csv"),
    ("train_binary", FINETUNE + "--train {binary}", r"binary.csv"),
    ("text_column_absent", FINETUNE + "--text-column nope", r"nope"),
    ("config_missing", FINETUNE + "--config {dir}/missing.yaml", r"missing.yaml"),
    ("config_broken", FINETUNE + "--config {broken_yaml}", r"broken.yaml"),
    ("config_unknown_key", FINETUNE + "--config {unknown_yaml}", r"colour"),
    ("backbone_missing", FINETUNE + "--backbone {dir}/nowhere", r"nowhere"),
    ("backbone_empty_folder", FINETUNE + "--backbone {empty_dir}", r"empty_dir"),
    ("output_is_a_file", FINETUNE + "--output {precious}", r"--output"),
    # a backbone folder whose tokenizer does not fit it (reliability round 4)
    (
        "backbone_vocabulary_past_its_embedding",  # XLA would have clamped the ids
        FINETUNE + "--backbone {big_vocabulary_backbone} --jit-compile true",
        r"vocab.txt: 37 pieces, but the model.s embedding has 17 rows",
    ),
    (
        "backbone_spm_model_damaged",
        FINETUNE + "--backbone {damaged_spm_backbone}",
        r"cannot read its tokenizer \(spm.model\)",
    ),
    ("pretrain_corpus_missing", "pretrain --corpus {dir}/none.txt --output {dir}/p", r"none.txt"),
    ("pretrain_corpus_empty", "pretrain --corpus {empty_txt} --output {dir}/p", r"empty.txt"),
    ("pretrain_objective", "pretrain --objective bogus --output {dir}/p", r"objective.*bogus"),
    ("lm_architecture", "lm --architecture bogus --output {dir}/l", r"architecture.*bogus"),
    (
        "lm_heads_not_dividing",
        "lm --hidden-dim 30 --num-heads 4 --output {dir}/l",
        r"model.hidden_dim.*multiple of model.num_heads \(4\), got 30",
    ),
    (
        "lm_key_value_heads_not_dividing",
        "lm --num-heads 4 --num-key-value-heads 3 --output {dir}/l",
        r"model.num_key_value_heads.*divisor of model.num_heads \(4\), got 3",
    ),
    (
        "lm_rotary_odd_head_size",
        "lm --hidden-dim 36 --num-heads 4 --position-embedding rotary --output {dir}/l",
        r"model.position_embedding.*hidden_dim / num_heads = 9",
    ),
    ("lm_lora_rank_zero", "lm --lora-rank 0 --output {dir}/l", r"lora_rank"),
    (
        "seq2seq_heads_not_dividing",
        "seq2seq --hidden-dim 30 --num-heads 4 --output {dir}/s",
        r"model.hidden_dim",
    ),
    ("distill_teacher_missing", "distill --teacher {dir}/t --output {dir}/d", r"{dir}/t"),
    # predict: a model, its inputs, its output file
    ("predict_model_missing", "predict {dir}/no_model --text good", r"no_model"),
    ("predict_not_an_export", "predict {empty_dir} --text good", r"empty_dir"),
    ("predict_nothing_to_read", "predict {export}", r"--text"),
    ("predict_input_it_takes_not", "predict {export} --question q", r"question"),
    ("predict_input_missing", PREDICT + "--input {dir}/none.csv", r"--input .*none.csv"),
    ("predict_input_a_folder", PREDICT + "--input {dir}", r"--input"),
    ("predict_input_empty", PREDICT + "--input {empty}", r"empty.csv"),
    ("predict_column_absent", PREDICT + "--input {reviews} --text-column nope", r"nope"),
    ("predict_batch_size_0", PREDICT + "--input {reviews} --batch-size 0", r"--batch-size 0"),
    (
        "predict_output_folder_missing",
        "predict {export} --input {reviews} --output {dir}/x/o.csv",
        r"does not exist",
    ),
    (
        "predict_output_kind",
        "predict {export} --input {reviews} --output {dir}/o.txt",
        r"\.csv, \.tsv or \.jsonl",
    ),
    (
        "predict_output_is_input",
        "predict {export} --input {precious} --output {precious}",
        r"overwrite",
    ),
    ("predict_format_unknown", PREDICT + "--input {reviews} --format xml", r"--format.*xml"),
    # export of a run
    ("export_run_missing", "export {dir}/no_run --base {dir}/saved", r"no_run"),
    ("export_not_a_run", "export {empty_dir} --base {dir}/saved", r"empty_dir"),
    (
        "export_truncated_model",
        "export {truncated_run} --base {dir}/saved",
        r"model.keras is not a .keras archive",
    ),
    ("export_strategy_unknown", "export {truncated_run} --strategy x", r"--strategy.*'x'"),
    ("export_version_0", "export {truncated_run} --base {dir}/saved --version 0", r"--version"),
    ("export_beams_0", "export {truncated_run} --base {dir}/saved --num-beams 0", r"--num-beams"),
    ("export_max_length_0", "export {truncated_run} --max-length 0", r"--max-length"),
    (
        "export_base_a_file",
        "export {truncated_run} --base {precious} --format onnx",
        r"precious.csv is a file, where the export needs a folder",
    ),
    (
        "export_name_a_file",
        "export {truncated_run} --base {dir} --name precious.csv --format litert",
        r"precious.csv is a file",
    ),
    ("export_name_300", "export {truncated_run} --name " + "n" * 300, r"at most 128 char"),
    # serving-config, attention, convert
    ("serving_config_missing", "serving-config {dir}/none", r"none"),
    ("serving_config_no_versions", "serving-config {empty_dir}", r"empty_dir"),
    ("serving_config_bad_policy", "serving-config {export_base} --versions bogus", r"bogus"),
    ("serving_config_bad_label", "serving-config {export_base} --label nope", r"nope"),
    (
        "serving_config_batch_0",
        "serving-config {export_base} --batching --max-batch-size 0",
        r"max.batch.size",
    ),
    ("attention_model_missing", "attention --saved-model {dir}/none --text good", r"none"),
    (
        "attention_layer_out_of_range",
        "attention --saved-model {export} --text good --layers 9",
        r"--layers",
    ),
    (
        "attention_layers_not_numbers",
        "attention --saved-model {export} --text good --layers a",
        r"--layers",
    ),
    (
        "attention_output_under_a_file",
        "attention --saved-model {export} --text good --output {precious}/a.png",
        r"--output .*cannot make its folder",
    ),
    ("convert_missing", "convert {dir}/none {dir}/out", r"none"),
    ("convert_garbage_config", "convert {garbage_checkpoint} {dir}/out", r"config.json"),
    ("convert_output_a_file", "convert {backbone} {precious}", r"precious.csv is a file"),
    # the demo, the main job, the command itself
    ("demo_steps_0", "demo --steps 0", r"--steps: expected 1 or more, got 0"),
    ("demo_heads_not_dividing", "demo --hidden-dim 30 --num-heads 4", r"--hidden-dim 30"),
    ("demo_learning_rate_0", "demo --learning-rate 0", r"--learning-rate"),
    (
        "main_steps_negative",
        "main --pretrain-steps -1 --output {dir}/m",
        r"--pretrain-steps: expected 1 or more, got -1",
    ),
    ("main_output_is_a_file", "main --output {precious}", r"precious.csv"),
    ("command_unknown", "bogus", r"invalid choice: 'bogus'"),
    ("command_missing", "", r"COMMAND"),
]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    base = tmp_path_factory.mktemp("hostile")
    model = BertClassifier(
        BertBackbone.from_size("tiny", vocabulary_size=len(VOCABULARY)), num_classes=2
    )
    export = export_saved_model(
        model,
        WordPieceTokenizer(VOCABULARY, sequence_length=16),
        base / "saved" / "sentiment" / "1",
        labels=["neg", "pos"],
        warmup=False,
    )
    (base / "empty_dir").mkdir()
    (base / "empty.csv").write_bytes(b"")
    (base / "empty.txt").write_bytes(b"")
    (base / "binary.csv").write_bytes(bytes(range(256)) * 4)
    (base / "broken.yaml").write_text("training: [unclosed\n")
    (base / "unknown.yaml").write_text("model:\n  colour: blue\n")
    run = base / "truncated_run"
    run.mkdir()
    (run / "config.yaml").write_text("model: {}\ndata: {}\n")
    (run / "vocab.txt").write_text("\n".join(VOCABULARY) + "\n")
    (run / "model.keras").write_bytes(b"PK\x03\x04 cut short")
    garbage = base / "garbage_checkpoint"
    garbage.mkdir()
    (garbage / "config.json").write_text("{not json")
    write_corpus(base / "corpus.txt", documents=4)
    shutil.copytree(export, base / "damaged_base" / "1")
    (base / "damaged_base" / "1" / "saved_model.pb").write_bytes(b"cut short")
    big = backbone_folder(base / "big_vocabulary_backbone")  # 20 more pieces than rows
    (big / "vocab.txt").write_text("\n".join(VOCABULARY + [f"w{i}" for i in range(20)]) + "\n")
    from keras_attn.models import DebertaV3Backbone

    spm = base / "damaged_spm_backbone"
    spm.mkdir()
    DebertaV3Backbone.from_size("tiny", vocabulary_size=40).save(spm / "backbone.keras")
    (spm / "spm.model").write_bytes(bytes(range(256)) * 8)
    return {
        "dir": base,
        "big_vocabulary_backbone": big,
        "damaged_spm_backbone": spm,
        "export": export,
        "export_base": export.parent,
        "backbone": backbone_folder(base / "backbone"),
        "reviews": write_reviews(base / "reviews.csv", count=16),
        "precious": base / "precious.csv",
        "empty_dir": base / "empty_dir",
        "empty": base / "empty.csv",
        "empty_txt": base / "empty.txt",
        "binary": base / "binary.csv",
        "broken_yaml": base / "broken.yaml",
        "unknown_yaml": base / "unknown.yaml",
        "truncated_run": run,
        "garbage_checkpoint": garbage,
        "damaged_base": base / "damaged_base",
    }


def attempt(files, template, capsys, monkeypatch):
    """Runs the command line in this process, from the fixture's folder (a default
    output path lands there, not in the repository); `(exit status, stderr)`."""
    monkeypatch.chdir(files["dir"])
    files["precious"].write_bytes(PRECIOUS)
    argv = template.format(**files).split()
    with pytest.raises(SystemExit) as stopped:
        cli.main(argv)
    return stopped.value.code, capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.parametrize("template, match", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_hostile_attempt_ends_in_one_error_line(files, capsys, monkeypatch, template, match):
    import re

    written = sorted(files["dir"].rglob("*.config"))
    status, stderr = attempt(files, template, capsys, monkeypatch)
    errors = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert status == 2 and len(errors) == 1 and "Traceback" not in stderr, stderr[-3000:]
    assert re.search(match.format(**files), errors[0]), errors[0]
    assert files["precious"].read_bytes() == PRECIOUS  # nothing a failed run touched
    assert sorted(files["dir"].rglob("*.config")) == written  # nor a config file written
