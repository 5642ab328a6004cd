"""TransE (Bordes et al., 2013) on WordNet 3.0's noun graph: the entity vectors ERNIE
and KagNet start from, and how well they predict held-out facts.

The graph is every fact between noun synsets, each inverse pair in one direction
(`WordNet.noun_facts`: 112,793 facts over 82,115 synsets, 8 relations). Held out: facts
whose two ends both occur in the training facts. TransE (L2 by default, margin 1,
unit-norm entities, corrupted heads or tails; Adam by default, the paper's plain SGD
with `--optimizer sgd`) trains for a time or step budget; then
every held-out fact's tail (given head and relation) and head (given relation and tail)
is ranked among all 82,115 synsets, the other known facts filtered out (Bordes et al.'s
"filtered" setting), against a baseline that ranks entities by how often they fill that
slot of that relation in training.

The margin must fit the distance: with L1 in 50 dimensions, unit vectors lie about 8
apart, a random corruption already clears a margin of 1, the loss falls to zero and
learning stops (3 minutes, 500 held out: hits@10 1.3%, under the baseline's 8.1%);
margin 5 with L1 gave 19.1%, margin 1 with L2 23.0% (the default).

Writes `entity_vectors.npz` (the vectors by synset id, for ERNIE), `results.json`, and
WordNet's licence beside them (its notice goes with anything derived from it).

Run:  python examples/transe_wordnet.py [--minutes 10 | --steps N] [--dim 50]
      [--held-out 2000] [--seed 0] [--smoke]
"""

import argparse
import json
import os
import pathlib
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")

from keras_attn.native_logs import quiet_command_line  # noqa: E402

quiet_command_line()  # TensorFlow's C++ notices off, as for `keras-attn` commands

import keras  # noqa: E402
import numpy as np  # noqa: E402

from keras_attn.knowledge import (  # noqa: E402
    TransE,
    WordNet,
    corrupted_batches,
    filtered_ranks,
)
from keras_attn.training import BudgetFlags, TimeBudget  # noqa: E402


def split_facts(facts, held_out, seed):
    """`(train, test)` index arrays: `held_out` facts whose ends both stay in training."""
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(facts))
    degree = np.bincount(facts[:, [0, 2]].ravel(), minlength=facts.max() + 1)
    test = []
    for index in order:
        head, _, tail = facts[index]
        if len(test) < held_out and degree[head] > 1 and degree[tail] > 1:
            degree[head] -= 1
            degree[tail] -= 1
            test.append(index)
    train = np.setdiff1d(np.arange(len(facts)), test)
    return train, np.array(test)


def frequency_scores(train, num_entities, num_relations):
    """`score_all` of the baseline: how often each entity fills the slot in training."""
    tail_counts = np.zeros((num_relations, num_entities))
    head_counts = np.zeros((num_relations, num_entities))
    np.add.at(tail_counts, (train[:, 1], train[:, 2]), 1)
    np.add.at(head_counts, (train[:, 1], train[:, 0]), 1)

    def score_all(heads, relations, tails, side):
        return (tail_counts if side == "tail" else head_counts)[relations]

    return score_all


def summary(ranks):
    return {
        "mrr": round(float(np.mean(1.0 / ranks)), 4),
        "hits@1": round(float(np.mean(ranks <= 1)), 4),
        "hits@10": round(float(np.mean(ranks <= 10)), 4),
        "mean_rank": round(float(np.mean(ranks)), 1),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    budget_flags = BudgetFlags(parser, default_minutes=10)
    parser.add_argument("--dim", type=int, default=50)
    parser.add_argument("--norm", type=int, choices=(1, 2), default=2)
    parser.add_argument("--margin", type=float, default=1.0)
    parser.add_argument(
        "--optimizer", choices=("sgd", "adam"), default="adam", help="the paper's SGD, or Adam"
    )
    parser.add_argument("--learning-rate", type=float, default=3e-3)
    parser.add_argument("--batch-size", type=int, default=512)
    parser.add_argument("--held-out", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", default="runs/transe_wordnet")
    parser.add_argument("--smoke", action="store_true", help="seconds: a few steps")
    args = parser.parse_args(argv)
    seconds = budget_flags.seconds(args)
    output = pathlib.Path(args.output)
    output.mkdir(parents=True, exist_ok=True)
    start = time.time()

    wordnet = WordNet.load()
    named = wordnet.noun_facts()
    synsets = sorted({s for h, _, t in named for s in (h, t)})
    relations = sorted({r for _, r, _ in named})
    entity_id = {s: i for i, s in enumerate(synsets)}
    relation_id = {r: i for i, r in enumerate(relations)}
    facts = np.array([(entity_id[h], relation_id[r], entity_id[t]) for h, r, t in named], "int32")
    held_out = 50 if args.smoke else args.held_out
    train_index, test_index = split_facts(facts, held_out, args.seed)
    train, test = facts[train_index], facts[test_index]
    print(f"{len(facts):,} facts, {len(synsets):,} synsets, {len(relations)} relations; "
          f"{len(train):,} to train, {len(test):,} held out")  # fmt: skip

    keras.utils.set_random_seed(args.seed)
    model = TransE(
        len(synsets), len(relations), embedding_dim=args.dim, norm=args.norm,
        margin=args.margin, seed=args.seed,
    )  # fmt: skip
    optimizer = {"sgd": keras.optimizers.SGD, "adam": keras.optimizers.Adam}[args.optimizer]
    model.compile(optimizer=optimizer(args.learning_rate))
    steps = 3 if args.smoke else args.steps or 10**9
    per_epoch = min(steps, max(len(train) // args.batch_size, 1))
    budget = TimeBudget(seconds, args.learning_rate, total_steps=steps)
    batches = corrupted_batches(train, len(synsets), args.batch_size, seed=args.seed)
    model.fit(
        batches, steps_per_epoch=per_epoch, epochs=-(-steps // per_epoch), callbacks=[budget],
        shuffle=False, verbose=2 if not args.smoke else 0,
    )  # fmt: skip
    trained = time.time() - start

    known = set(map(tuple, facts.tolist()))
    results = {
        "facts": len(facts), "train": len(train), "held_out": len(test), "dim": args.dim,
        "norm": args.norm, "margin": args.margin, "optimizer": args.optimizer,
        "learning_rate": args.learning_rate,
        "steps": budget.steps, "train_minutes": round(trained / 60, 2), "seed": args.seed,
        "transe": summary(filtered_ranks(model.score_all, test, known, len(synsets), 8)),
        "frequency": summary(
            filtered_ranks(frequency_scores(train, len(synsets), len(relations)), test, known,
                           len(synsets), 64)
        ),
    }  # fmt: skip
    print(json.dumps(results, indent=2))
    vectors = keras.ops.convert_to_numpy(model.entity_embedding.embeddings)
    np.savez(
        output / "entity_vectors.npz",
        synsets=np.array(synsets),
        vectors=vectors,
        relations=np.array(relations),
        relation_vectors=keras.ops.convert_to_numpy(model.relation_embedding.embeddings),
    )
    (output / "WORDNET_LICENSE").write_text(wordnet.license, encoding="utf-8")
    (output / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    return results


if __name__ == "__main__":
    main()
