"""ERNIE in miniature (issue 60): does a knowledge graph's entity vector help type a
noun in context that fine-tuning never saw?

Mentions, in the KJV's verses and the Rotten Tomatoes snippets, of WordNet noun lemmas
whose senses all share one lexicographer file (so the label, one of 26 supersenses such
as `noun.animal`, is right whichever sense is meant), linked by `EntityLinker`. Split by
lemma (`split_by_lemma`): a fifth of the lemmas are `unseen` (never in fine-tuning, their
facts still in the graph, as Wikidata's were for ERNIE), and a tenth of the other texts
are `seen` (lemmas trained on, sentences not). Lexnames are never facts of the graph.

Arms, at the same budget (steps, batch, width, depth 3, from scratch, one WordPiece
vocabulary learned from the same texts):
- `text`: BERT (3 blocks) reading `[ENT] mention [ENT]`, the marker's output typed;
- `ernie_transe`: ERNIE (1 T-Encoder block, 2 fusion blocks), every linked mention's
  TransE vector (frozen) at its first word piece;
- `ernie_random`: the same links with random frozen unit vectors (no knowledge);
- `ernie_none`: the same network with no entity at all (what its shape alone gives);
- `graph_linear`, `graph_knn`: logistic regression and 5 nearest neighbours (cosine)
  on the typed mention's TransE vector alone;
- `majority`: the training split's most frequent class (`noun.person`), always.
Reported per seed (the split, the initialisation and the order all change) and as mean ±
standard deviation: accuracy and macro-F1 on `unseen` and `seen`.

The TransE vectors come from `examples/transe_wordnet.py` (`--entity-vectors` its
`entity_vectors.npz`; without it, TransE is trained here first for `--transe-minutes`).

Run:  python examples/ernie_typing.py [--entity-vectors runs/transe_wordnet/entity_vectors.npz]
      [--seeds 0 1 2] [--steps 2000] [--pretrain-steps 0] [--smoke]
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
from keras_attn.data import (  # noqa: E402
    WordPieceTokenizer,
    kjv_documents,
    rotten_tomatoes,
    train_wordpiece_vocabulary,
)
from keras_attn.knowledge import (  # noqa: E402
    EntityLinker,
    WordNet,
    linking_coverage,
    read_entity_vectors,
    single_class_lemmas,
    split_by_lemma,
    typing_examples,
)
from keras_attn.models import (  # noqa: E402
    BertBackbone,
    BertPretrainer,
    EntityTyping,
    ErnieBackbone,
    ErniePretrainer,
    dea_inputs,
    ernie_inputs,
)
from keras_attn.training import TimeBudget  # noqa: E402

ARMS = ("text", "ernie_transe", "ernie_random", "ernie_none", "graph_linear", "graph_knn",
        "majority")  # fmt: skip
WIDTH = dict(num_heads=2, hidden_dim=128, intermediate_dim=512)


def corpora(smoke):
    """`{name: texts}`: the KJV's verses and the Rotten Tomatoes snippets."""
    verses = [verse for chapter in kjv_documents() for verse in chapter]
    snippets = list(rotten_tomatoes(log=False).texts)
    if smoke:
        verses, snippets = verses[:600], snippets[:300]
    return {"kjv": verses, "rotten_tomatoes": snippets}


def entity_vectors(args, output):
    """`(synsets, vectors)`: `--entity-vectors`' file, checked before it is trusted, or
    TransE trained here first for `--transe-minutes` (the knowledge examples share it)."""
    if args.entity_vectors is None:
        sys.path.insert(0, str(pathlib.Path(__file__).parent))  # the sibling example
        import transe_wordnet

        minutes = ["--smoke"] if args.smoke else ["--minutes", str(args.transe_minutes)]
        transe_wordnet.main([*minutes, "--output", str(output / "transe")])
        args.entity_vectors = output / "transe" / "entity_vectors.npz"
    return read_entity_vectors(args.entity_vectors)


def scores(truth, predicted):
    from sklearn.metrics import f1_score

    truth, predicted = np.asarray(truth), np.asarray(predicted)
    f1 = f1_score(truth, predicted, average="macro", labels=np.unique(truth))
    return {
        "accuracy": round(float(np.mean(truth == predicted)), 4),
        "macro_f1": round(float(f1), 4),
    }


def pretraining_batches(corpus, tokenizer, num_entities, args, seed):
    """`(x, y, sample_weight)` for `args.pretrain_steps` batches of the corpora's
    sentences: BERT's masking (`MaskedLMMasker`) and dEA's (`dea_inputs`)."""
    from keras_attn.data import MaskedLMMasker

    rng = np.random.default_rng(seed)
    rows = rng.choice(len(corpus["token_ids"]), args.pretrain_steps * args.batch_size)
    masker = MaskedLMMasker(tokenizer.vocabulary_size, tokenizer.mask_id,
                            tokenizer.special_token_ids + [tokenizer.vocabulary_size - 1],
                            max_predictions_per_seq=10)  # fmt: skip
    masked = {k: v.numpy() for k, v in masker(corpus["token_ids"][rows], [seed, 1]).items()}
    dea = dea_inputs(corpus["entity_ids"][rows], num_entities, max_candidates=16, seed=seed)
    x = {
        "token_ids": masked["token_ids"],
        "segment_ids": corpus["segment_ids"][rows],
        "padding_mask": corpus["padding_mask"][rows],
        "masked_positions": masked["masked_positions"],
        "entity_ids": dea["entity_ids"],
        "entity_candidates": dea["entity_candidates"],
    }
    y = {"mlm_logits": masked["masked_ids"], "dea_logits": dea["dea_labels"]}
    weights = {"mlm_logits": masked["masked_weights"], "dea_logits": dea["dea_weights"]}
    return x, y, weights


def pretrain(backbone, batches, args):
    """BERT's masked LM (text) or ERNIE's masked LM and dEA, for `args.pretrain_steps`."""
    x, y, weights = batches
    if isinstance(backbone, ErnieBackbone):
        model = ErniePretrainer(backbone, sentence_objective="none")
    else:
        model = BertPretrainer(backbone, sentence_objective="none")
        x = {k: v for k, v in x.items() if k in model.input}
        y, weights = ({"mlm_logits": part["mlm_logits"]} for part in (y, weights))
    model.compile(optimizer=keras.optimizers.AdamW(args.learning_rate, weight_decay=0.01))
    budget = TimeBudget(None, args.learning_rate, total_steps=args.pretrain_steps)
    history = model.fit(x, y, sample_weight=weights, batch_size=args.batch_size, epochs=1,
                        shuffle=False, callbacks=[budget], verbose=0)  # fmt: skip
    return {k: round(float(v[-1]), 4) for k, v in history.history.items()}


def neural_arm(arm, data, vocabulary_size, num_classes, vectors, args, seed, corpus=None):
    """Trains one of the network arms for `args.steps` (after `args.pretrain_steps` of
    pre-training on `corpus`); its predictions per part."""
    keras.utils.set_random_seed(seed)
    common = dict(vocabulary_size=vocabulary_size, max_sequence_length=args.sequence_length,
                  dropout=0.1, **WIDTH)  # fmt: skip
    if arm == "text":
        backbone = BertBackbone(num_layers=3, **common)
    else:
        backbone = ErnieBackbone(num_entities=len(vectors), num_layers=1,
                                 num_knowledge_layers=2, entity_dim=vectors.shape[1],
                                 entity_num_heads=2, **common)  # fmt: skip
        if arm == "ernie_random":
            rng = np.random.default_rng(seed)
            noise = rng.normal(size=vectors.shape).astype("float32")
            backbone.set_entity_vectors(noise / np.linalg.norm(noise, axis=1, keepdims=True))
        else:
            backbone.set_entity_vectors(vectors)
    start, pretrained = time.time(), None
    if args.pretrain_steps:
        batches = pretraining_batches(corpus, data["tokenizer"], len(vectors), args, seed)
        if arm == "ernie_none":  # masked LM alone: no entity in, none to predict
            batches[0]["entity_ids"] = np.zeros_like(batches[0]["entity_ids"])
            batches[2]["dea_logits"] = np.zeros_like(batches[2]["dea_logits"])
        pretrained = pretrain(backbone, batches, args)
    model = EntityTyping(backbone, num_classes)
    model.compile(optimizer=keras.optimizers.AdamW(args.learning_rate, weight_decay=0.01))
    names = list(backbone.input) + ["marker_positions"]

    def inputs(part):
        x = {name: data[part][name] for name in names}
        if arm == "ernie_none":  # the same network with no entity anywhere
            x["entity_ids"] = np.zeros_like(x["entity_ids"])
        return x

    rng = np.random.default_rng(seed)
    order = rng.choice(len(data["train"]["labels"]), args.steps * args.batch_size)
    train = {name: value[order] for name, value in inputs("train").items()}
    budget = TimeBudget(None, args.learning_rate, total_steps=args.steps)
    model.fit(train, data["train"]["labels"][order], batch_size=args.batch_size, epochs=1,
              shuffle=False, callbacks=[budget], verbose=0)  # fmt: skip
    seconds = time.time() - start
    predicted = {
        part: np.argmax(model.predict(inputs(part), batch_size=256, verbose=0), axis=-1)
        for part in ("unseen", "seen")
    }
    return predicted, seconds, pretrained


def graph_arm(arm, data, vectors):
    """A classifier on the typed mention's TransE vector alone."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.neighbors import KNeighborsClassifier

    def features(part):
        return vectors[data[part]["entities"] - 1]

    if arm == "graph_linear":
        classifier = LogisticRegression(max_iter=2000)
    else:
        classifier = KNeighborsClassifier(5, metric="cosine")
    start = time.time()
    classifier.fit(features("train"), data["train"]["labels"])
    predicted = {part: classifier.predict(features(part)) for part in ("unseen", "seen")}
    return predicted, time.time() - start


def pack(examples, tokenizer, mentions, entity_id, label_id):
    texts = [e.text for e in examples]
    arrays = ernie_inputs(tokenizer, texts, [mentions[t] for t in texts], entity_id,
                          targets=[(e.start, e.end) for e in examples])  # fmt: skip
    arrays["labels"] = np.array([label_id[e.label] for e in examples], "int32")
    arrays["entities"] = np.array([entity_id[e.synset] for e in examples], "int32")
    return arrays


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--entity-vectors", help="transe_wordnet.py's entity_vectors.npz")
    parser.add_argument("--transe-minutes", type=float, default=10)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--arms", nargs="+", choices=ARMS, default=list(ARMS))
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument(
        "--pretrain-steps", type=int, default=0,
        help="pre-train first on the corpora's sentences: masked LM (text), masked LM and "
        "dEA (ERNIE), as ERNIE's paper does; 0: fine-tuning alone (default)",
    )  # fmt: skip
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--learning-rate", type=float, default=5e-4)
    parser.add_argument("--sequence-length", type=int, default=64)
    parser.add_argument("--vocabulary-size", type=int, default=8000)
    parser.add_argument("--output", default="runs/ernie_typing")
    parser.add_argument("--smoke", action="store_true", help="seconds: little text, few steps")
    args = parser.parse_args(argv)
    if args.smoke:
        args.steps, args.seeds = 3, args.seeds[:1]
    output = pathlib.Path(args.output)
    output.mkdir(parents=True, exist_ok=True)
    start = time.time()

    synsets, vectors = entity_vectors(args, output)
    entity_id = {s: i + 1 for i, s in enumerate(synsets)}

    wordnet = WordNet.load()
    linker = EntityLinker(wordnet, synsets=entity_id)
    texts = corpora(args.smoke)
    mentions = {t: linker(t) for part in texts.values() for t in part}
    coverage = {name: linking_coverage(part, mentions.__getitem__) for name, part in texts.items()}
    all_texts = [t for part in texts.values() for t in part]
    examples = typing_examples(all_texts, mentions.__getitem__, single_class_lemmas(wordnet))
    labels = sorted({e.label for e in examples})
    label_id = {name: i for i, name in enumerate(labels)}
    lemmas = len({e.lemma for e in examples})
    print(f"linked in {time.time() - start:.0f} s: {len(examples):,} mentions of {lemmas:,} "
          f"lemmas, {len(labels)} classes; {coverage}")  # fmt: skip

    import tensorflow as tf

    vocabulary = train_wordpiece_vocabulary(
        tf.data.Dataset.from_tensor_slices(all_texts), args.vocabulary_size,
        cache_dir=default_cache_dir(),
    ) + ["[ENT]"]  # fmt: skip
    tokenizer = WordPieceTokenizer(vocabulary, sequence_length=args.sequence_length)

    corpus = None
    if args.pretrain_steps:  # every sentence, each linked mention's entity at its first piece
        corpus = ernie_inputs(tokenizer, all_texts, [mentions[t] for t in all_texts], entity_id)
    runs = []
    for seed in args.seeds:
        parts = split_by_lemma(examples, 0.2, 0.1, seed=seed)
        data = {name: pack(part, tokenizer, mentions, entity_id, label_id)
                for name, part in parts.items()}  # fmt: skip
        data["tokenizer"] = tokenizer
        for arm in args.arms:
            pretrained = None
            if arm == "majority":  # the training split's most frequent class, always
                common = np.bincount(data["train"]["labels"]).argmax()
                predicted = {part: np.full_like(data[part]["labels"], common)
                             for part in ("unseen", "seen")}  # fmt: skip
                seconds = 0.0
            elif arm.startswith("graph"):
                predicted, seconds = graph_arm(arm, data, vectors)
            else:
                predicted, seconds, pretrained = neural_arm(
                    arm, data, len(vocabulary), len(labels), vectors, args, seed, corpus
                )
            run = {"seed": seed, "arm": arm, "seconds": round(seconds, 1)}
            if pretrained:
                run["pretraining"] = pretrained
            for part in ("unseen", "seen"):
                run[part] = scores(data[part]["labels"], predicted[part])
            runs.append(run)
            print(json.dumps(run))

    summary = {}
    for arm in args.arms:
        mine = [r for r in runs if r["arm"] == arm]
        summary[arm] = {
            f"{part}_{metric}": [
                round(float(np.mean([r[part][metric] for r in mine])), 4),
                round(float(np.std([r[part][metric] for r in mine])), 4),
            ]
            for part in ("unseen", "seen")
            for metric in ("accuracy", "macro_f1")
        }
    results = {
        "examples": len(examples), "lemmas": len({e.lemma for e in examples}),
        "classes": labels, "split_sizes": {k: len(v) for k, v in parts.items()},
        "coverage": coverage, "steps": args.steps, "batch_size": args.batch_size,
        "learning_rate": args.learning_rate, "sequence_length": args.sequence_length,
        "pretrain_steps": args.pretrain_steps,
        "entity_vectors": str(args.entity_vectors), "runs": runs,
        "summary (mean, std)": summary, "minutes": round((time.time() - start) / 60, 1),
    }  # fmt: skip
    print(json.dumps(results["summary (mean, std)"], indent=1))
    (output / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    (output / "WORDNET_LICENSE").write_text(wordnet.license, encoding="utf-8")
    return results


if __name__ == "__main__":
    main()
