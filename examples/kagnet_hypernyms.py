"""KagNet in miniature (issue 60): "a X is a kind of ___", five choices. Do the paths
between X and a choice in WordNet help, and is it the relations on them that help?

X is a noun synset the KJV or the Rotten Tomatoes snippets mention (`EntityLinker`); the
answer a hypernym exactly 2 or 3 hops up that they mention too; the four distractors
share the answer's lexicographer file and depth (within one) and are not ancestors of X
(`hypernym_questions`), and by default only those a path of at most 3 hops joins to X,
as one joins the answer (`--distractors any` drops that: in the smoke run the answer had
a path in every question and a distractor in 7%, so that a path exists gave the answer
away and the shuffled control could not tell the relations' part). Two splits:
`answers` (a fifth of the answers held out: no test answer is ever a training answer)
and `hops` (trained on 2-hop questions, tested on 3-hop ones).

Arms, at the same budget (steps, batch, one WordPiece vocabulary, a 2-block BERT from
scratch reading each choice's statement "a X is a kind of Y"):
- `text`: BERT alone (`BertMultipleChoice`);
- `paths`: KagNet (BERT's statement, the schema graph's paths over WordNet's relations
  and inverses, TransE's frozen concept vectors);
- `shuffled`: KagNet with the relation labels of every path hop shuffled across the
  data (the paths' shape and concepts kept, what the relations say removed);
- `choice`: BERT reading the choice alone (the answers' own bias).
Reported per seed (the split, initialisation and order change) and as mean ± standard
deviation: test accuracy (chance: 20%).

Run:  python examples/kagnet_hypernyms.py [--entity-vectors runs/transe_wordnet/entity_vectors.npz]
      [--seeds 0 1 2] [--steps 1500] [--distractors joined|any] [--smoke]
"""

import argparse
import json
import os
import pathlib
import sys
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")

from keras_attn.native_logs import quiet_command_line  # noqa: E402

quiet_command_line()  # TensorFlow's C++ notices off, as for `keras-attn` commands

import keras  # noqa: E402
import numpy as np  # noqa: E402

from keras_attn.cache_dir import default_cache_dir  # noqa: E402
from keras_attn.data import WordPieceTokenizer, train_wordpiece_vocabulary  # noqa: E402
from keras_attn.knowledge import (  # noqa: E402
    ConceptGraph,
    EntityLinker,
    WordNet,
    hypernym_questions,
    schema_arrays,
    schema_graph,
    split_by_answer,
)
from keras_attn.models import BertBackbone, BertMultipleChoice, KagNet  # noqa: E402
from keras_attn.training import TimeBudget  # noqa: E402

ARMS = ("text", "paths", "shuffled", "choice")
SPLITS = ("answers", "hops")
SCHEMA = (32, 1, 12, 3)  # nodes, pairs, paths, hops
WIDTH = dict(num_layers=2, num_heads=2, hidden_dim=128, intermediate_dim=512)


def questions_and_graph(args, concept_id):
    """WordNet, its noun graph, the corpora's texts, the synsets they mention and the
    questions asked of them."""
    from ernie_typing import corpora  # on the path: main put the examples folder there

    wordnet = WordNet.load()
    linker = EntityLinker(wordnet, synsets=concept_id)
    texts = [t for part in corpora(args.smoke).values() for t in part]
    mentioned = sorted({m.synset for t in texts for m in linker(t)})
    graph = ConceptGraph(wordnet.noun_facts())
    joined = graph if args.distractors == "joined" else None
    questions = hypernym_questions(wordnet, mentioned, num_choices=5, seed=0, graph=joined)
    return wordnet, graph, texts, mentioned, questions


def arrays(questions, wordnet, graph, tokenizer, concept_id):
    """Each question's five statements, tokenized, and five schema graphs."""
    statements = [q.statement(wordnet, i) for q in questions for i in range(5)]
    choices = [wordnet.lemmas[q.choices[i]][0].replace("_", " ")
               for q in questions for i in range(5)]  # fmt: skip
    out = {}
    for name, texts in (("statement", statements), ("choice", choices)):
        packed = tokenizer(texts) if texts else {}
        for key, value in packed.items():
            out[f"{name}/{key}"] = np.asarray(value).reshape(len(questions), 5, -1)
    schemas = [schema_graph(graph, [q.concept], [c], SCHEMA[3], SCHEMA[2])
               for q in questions for c in q.choices]  # fmt: skip
    for key, value in schema_arrays(schemas, concept_id, *SCHEMA).items():
        out[key] = value.reshape(len(questions), 5, *value.shape[1:])
    out["labels"] = np.array([q.answer for q in questions], "int32")
    return out


def shuffled_relations(relations, seed):
    """The relation ids of every hop shuffled among all hops (padding stays)."""
    out = relations.copy()
    hops = out > 0
    out[hops] = np.random.default_rng(seed).permutation(out[hops])
    return out


def run_arm(arm, train, test, args, seed, vocabulary_size, vectors, num_relations):
    keras.utils.set_random_seed(seed)
    backbone = BertBackbone(vocabulary_size, max_sequence_length=args.sequence_length,
                            **WIDTH)  # fmt: skip
    text = "choice" if arm == "choice" else "statement"
    names = ("token_ids", "segment_ids", "padding_mask")
    graph_names = ("graph_nodes", "graph_adjacency", "pair_nodes", "path_nodes", "path_relations")

    def inputs(data):
        x = {name: data[f"{text}/{name}"] for name in names}
        if arm in ("paths", "shuffled"):
            x.update({name: data[name] for name in graph_names})
            if arm == "shuffled":
                x["path_relations"] = shuffled_relations(data["path_relations"], seed)
        return x

    if arm in ("paths", "shuffled"):
        model = KagNet(backbone, len(vectors), num_relations, 5, schema_sizes=SCHEMA,
                       concept_dim=vectors.shape[1])  # fmt: skip
        model.set_concept_vectors(vectors)
    else:
        model = BertMultipleChoice(backbone, 5)
    model.compile(optimizer=keras.optimizers.AdamW(args.learning_rate, weight_decay=0.01))
    order = np.random.default_rng(seed).choice(len(train["labels"]), args.steps * args.batch_size)
    x = {name: value[order] for name, value in inputs(train).items()}
    budget = TimeBudget(None, args.learning_rate, total_steps=args.steps)
    start = time.time()
    model.fit(x, train["labels"][order], batch_size=args.batch_size, epochs=1, shuffle=False,
              callbacks=[budget], verbose=0)  # fmt: skip
    seconds = time.time() - start
    predicted = np.argmax(model.predict(inputs(test), batch_size=128, verbose=0), axis=-1)
    return float(np.mean(predicted == test["labels"])), seconds


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--entity-vectors", help="transe_wordnet.py's entity_vectors.npz")
    parser.add_argument("--transe-minutes", type=float, default=10)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--arms", nargs="+", choices=ARMS, default=list(ARMS))
    parser.add_argument("--splits", nargs="+", choices=SPLITS, default=list(SPLITS))
    parser.add_argument(
        "--distractors", choices=("joined", "any"), default="joined",
        help="joined: only distractors a path joins to X, as the answer is (default); any: "
        "the issue's literal design, where that a path exists gives the answer away",
    )  # fmt: skip
    parser.add_argument("--steps", type=int, default=1500)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--learning-rate", type=float, default=5e-4)
    parser.add_argument("--sequence-length", type=int, default=24)
    parser.add_argument("--vocabulary-size", type=int, default=8000)
    parser.add_argument("--output", default="runs/kagnet_hypernyms")
    parser.add_argument("--smoke", action="store_true", help="seconds: little text, few steps")
    args = parser.parse_args(argv)
    if args.smoke:
        args.steps, args.seeds = 3, args.seeds[:1]
    output = pathlib.Path(args.output)
    output.mkdir(parents=True, exist_ok=True)
    start = time.time()

    sys.path.insert(0, str(pathlib.Path(__file__).parent))  # the sibling example
    from ernie_typing import entity_vectors

    synsets, vectors = entity_vectors(args, output)
    concept_id = {s: i + 1 for i, s in enumerate(synsets)}
    wordnet, graph, texts, mentioned, questions = questions_and_graph(args, concept_id)
    hops = {h: sum(q.hops == h for q in questions) for h in (2, 3)}
    print(f"{len(questions):,} questions from {len(mentioned):,} mentioned synsets {hops} "
          f"in {time.time() - start:.0f} s")  # fmt: skip

    import tensorflow as tf

    vocabulary = train_wordpiece_vocabulary(
        tf.data.Dataset.from_tensor_slices(texts), args.vocabulary_size,
        cache_dir=default_cache_dir(),
    )  # fmt: skip
    tokenizer = WordPieceTokenizer(vocabulary, sequence_length=args.sequence_length)

    runs, paths_found = [], None
    for seed in args.seeds:
        for split in args.splits:
            if split == "answers":
                train_q, test_q = split_by_answer(questions, 0.2, seed=seed)
            else:
                train_q = [q for q in questions if q.hops == 2]
                test_q = [q for q in questions if q.hops == 3]
            train, test = (arrays(q, wordnet, graph, tokenizer, concept_id)
                           for q in (train_q, test_q))  # fmt: skip
            if paths_found is None:  # how often a choice has any path to X at all
                has = (test["path_relations"][..., 0] > 0).any(axis=(2, 3))  # (n, choices)
                answer = has[np.arange(len(has)), test["labels"]]
                paths_found = {
                    "answer_has_a_path": round(float(np.mean(answer)), 4),
                    "distractor_has_a_path": round(float(np.mean((has.sum(1) - answer) / 4)), 4),
                }
            for arm in args.arms:
                accuracy, seconds = run_arm(arm, train, test, args, seed, len(vocabulary),
                                            vectors, graph.num_relations)  # fmt: skip
                run = {"seed": seed, "split": split, "arm": arm, "train": len(train_q),
                       "test": len(test_q), "accuracy": round(accuracy, 4),
                       "seconds": round(seconds, 1)}  # fmt: skip
                runs.append(run)
                print(json.dumps(run))

    summary = {}
    for split in args.splits:
        for arm in args.arms:
            scores = [r["accuracy"] for r in runs if (r["split"], r["arm"]) == (split, arm)]
            summary[f"{split}/{arm}"] = [round(float(np.mean(scores)), 4),
                                         round(float(np.std(scores)), 4)]  # fmt: skip
    results = {
        "questions": len(questions), "mentioned_synsets": len(mentioned), "hops": hops,
        "distractors": args.distractors,
        "paths_in_test (first split)": paths_found, "steps": args.steps,
        "batch_size": args.batch_size, "learning_rate": args.learning_rate,
        "schema_sizes": SCHEMA, "entity_vectors": str(args.entity_vectors), "runs": runs,
        "summary (mean, std)": summary, "minutes": round((time.time() - start) / 60, 1),
    }  # fmt: skip
    print(json.dumps(summary, indent=1))
    (output / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    (output / "WORDNET_LICENSE").write_text(wordnet.license, encoding="utf-8")
    return results


if __name__ == "__main__":
    main()
