"""Show, Attend and Tell in miniature: soft and hard visual attention caption digit canvases.

Xu et al. (2015) caption images with an LSTM that looks at a different part of the
image for every word: "a CNN extracts a set of feature vectors which we refer to as
annotation vectors ... L vectors, each of which is a D-dimensional representation
corresponding to a part of the image" (section 3.1.1), and at step t an attention
model weighs them by the decoder's previous state. Two attention models:

    soft   z_t = sum_i alpha_ti a_i              the expectation; trained by backprop
    hard   z_t = a_{s_t},  s_t ~ Multinoulli(alpha_t)   one region; trained by REINFORCE

The pieces, each next to its code below:

    annotations  a_i: a small CNN's last feature map, 3 x 12 regions of 4 x 4 pixels,
                 plus a learned embedding of each region's place (the paper's VGG
                 features carry place implicitly; ours are too shallow to)
    scores       e_ti = v^T tanh(W h_{t-1} + U a_i)       keras_attn.layers.AdditiveScore
    soft         alpha_t = softmax(e_t), z_t = sum_i alpha_ti a_i
    hard         keras_attn.layers.HardAttention (samples s_t; the most probable region
                 at inference), ReinforceBaseline and reinforce_loss for eq. 12
    gate         z_t <- sigmoid(f_beta(h_{t-1})) z_t          (section 4.2.1)
    decoder      h_t = LSTM(h_{t-1}, [E y_{t-1}; z_t]), h_0, c_0 = MLPs of mean_i a_i
    output       p(y_t) = softmax(L_o(E y_{t-1} + L_h h_t + L_z z_t))   (eq. 7)
    soft loss    -log p(y | x) + lambda sum_i (1 - sum_t alpha_ti)^2  (eq. 14, "doubly
                 stochastic": every region attended about once over the caption)
    hard loss    -log p(y | s, x) - lambda_r (log p(y | s, x) - b) log p(s | x)
                 - lambda_e H[s]   (eq. 12; b a moving average of log p(y | s, x))

Data: the 1,797 handwritten digits scikit-learn ships (UCI, 8 x 8, real scans), split
into disjoint training and held-out images (80 / 20, seed 0). A canvas of 12 x 48 pixels
holds 2-4 of them at random places (no two overlapping left to right, any height); the
caption is their names left to right ("three seven one"). Training canvases are drawn
afresh every step from the training images; the held-out canvases only from held-out
images, so no test digit was ever seen.

Measured on the held-out canvases (greedy decoding): exact captions, per-digit accuracy,
and localisation: when the word of the k-th digit is emitted, the share of the soft
attention on the regions holding that digit's ink (the hard model: how often its chosen
region is one of them). The attention for each word is drawn as the paper's figures, in
TensorBoard (IMAGES) and as PNG files.

Run:  python examples/show_attend_tell.py [--attention soft|hard|both] [--steps 4000] [--smoke]
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
from keras import ops  # noqa: E402

from keras_attn.layers import (  # noqa: E402
    AdditiveScore,
    HardAttention,
    LearnedPositionEmbedding,
    ReinforceBaseline,
    reinforce_loss,
)
from keras_attn.training import TimeBudget  # noqa: E402
from keras_attn.visualize import attention_over_image  # noqa: E402

DIGITS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
PAD, START, END = 0, 1, 2
WORDS = ("<pad>", "<start>", "<end>", *DIGITS)  # digit d is word d + 3
HEIGHT, WIDTH, CELL = 12, 48, 4  # the canvas; a region is CELL x CELL pixels
MAX_DIGITS = 4


# --- data ---


def digit_split(seed=0, held_out=0.2):
    """scikit-learn's digits as (images in [0, 1], labels), split into disjoint
    training and held-out images."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    order = np.random.default_rng(seed).permutation(len(digits.images))
    cut = int(len(order) * (1 - held_out))
    images = digits.images.astype("float32") / 16.0
    return [(images[part], digits.target[part]) for part in (order[:cut], order[cut:])]


def canvases(images, labels, count, rng, digits=(2, MAX_DIGITS)):
    """`count` canvases of `digits` (min, max) digits each: pixels `(count, HEIGHT,
    WIDTH)`, captions `(count, MAX_DIGITS + 1)` (the digits' words left to right, then
    END, then PAD) and each digit's ink `(count, MAX_DIGITS, HEIGHT, WIDTH)`."""
    pixels = np.zeros((count, HEIGHT, WIDTH), "float32")
    captions = np.full((count, MAX_DIGITS + 1), PAD, "int32")
    ink = np.zeros((count, MAX_DIGITS, HEIGHT, WIDTH), bool)
    for n in range(count):
        k = int(rng.integers(digits[0], digits[1] + 1))
        # Left edges: k sorted cuts of the free width, each digit 8 pixels after the last.
        lefts = np.sort(rng.integers(0, WIDTH - 8 * k + 1, size=k)) + 8 * np.arange(k)
        tops = rng.integers(0, HEIGHT - 8 + 1, size=k)
        for j, pick in enumerate(rng.integers(0, len(images), size=k)):
            y, x = tops[j], lefts[j]
            pixels[n, y : y + 8, x : x + 8] = images[pick]
            ink[n, j, y : y + 8, x : x + 8] = images[pick] > 0
            captions[n, j] = labels[pick] + 3
        captions[n, k] = END
    return pixels, captions, ink


def ink_regions(ink):
    """Which regions hold each digit's ink: `(..., HEIGHT // CELL, WIDTH // CELL)`."""
    shape = (*ink.shape[:-2], HEIGHT // CELL, CELL, WIDTH // CELL, CELL)
    return ink.reshape(shape).any(axis=(-3, -1))


def batches(images, labels, batch_size, seed):
    """Endless training batches: `({"images", "decoder_token_ids"}, targets)`."""
    rng = np.random.default_rng(seed)
    while True:
        pixels, captions, _ = canvases(images, labels, batch_size, rng)
        previous = np.concatenate([np.full((batch_size, 1), START, "int32"), captions[:, :-1]], 1)
        yield {"images": pixels, "decoder_token_ids": previous}, captions


# --- the model ---


class ShowAttendTell(keras.Model):
    """An attention captioner: inputs `images` `(batch, HEIGHT, WIDTH)` and
    `decoder_token_ids` (the previous words, START first), outputs a dict of `logits`
    `(batch, steps, words)`, `attention` `(batch, steps, regions)` and, for hard
    attention, `log_probs`, `entropy` and `choices` `(batch, steps)`."""

    def __init__(
        self,
        attention="soft",
        filters=64,
        units=256,
        embedding_dim=64,
        attention_units=128,
        doubly_stochastic=1.0,  # lambda of eq. 14 (soft)
        reinforce_weight=1.0,  # lambda_r of eq. 12 (hard)
        entropy_weight=0.01,  # lambda_e of eq. 12 (hard)
        expected_value_rate=0.5,  # hard: images trained on alpha instead of a sample
        estimator="reinforce",  # hard: Xu et al.'s, or "gumbel" (straight-through)
        seed=0,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.attention, self.doubly_stochastic = attention, doubly_stochastic
        self.reinforce_weight, self.entropy_weight = reinforce_weight, entropy_weight
        self.expected_value_rate, self.estimator = expected_value_rate, estimator
        self.seed_generator = keras.random.SeedGenerator(seed)
        conv = dict(kernel_size=3, padding="same", activation="relu")
        self.encoder = keras.Sequential(
            [
                keras.layers.Conv2D(filters // 2, **conv),
                keras.layers.Conv2D(filters // 2, **conv),
                keras.layers.MaxPooling2D(2),
                keras.layers.Conv2D(filters, **conv),
                keras.layers.Conv2D(filters, **conv),
                keras.layers.MaxPooling2D(2),
                keras.layers.Conv2D(2 * filters, **conv),  # receptive field 24 px
            ],
            name="encoder",
        )
        regions = (HEIGHT // CELL) * (WIDTH // CELL)
        self.places = LearnedPositionEmbedding(regions, name="places")
        self.init_h = keras.layers.Dense(units, activation="tanh", name="init_h")
        self.init_c = keras.layers.Dense(units, activation="tanh", name="init_c")
        self.embedding = keras.layers.Embedding(len(WORDS), embedding_dim, name="embedding")
        score = AdditiveScore(units=attention_units)
        if attention == "soft":
            self.score = score
        else:
            self.hard = HardAttention(score=score, estimator=estimator, seed=seed)
            self.baseline = ReinforceBaseline(0.9)
        self.gate = keras.layers.Dense(1, activation="sigmoid", name="gate")
        self.cell = keras.layers.LSTMCell(units, name="decoder")
        self.out_h = keras.layers.Dense(embedding_dim, name="out_h")  # L_h
        self.out_z = keras.layers.Dense(embedding_dim, name="out_z")  # L_z
        self.out = keras.layers.Dense(len(WORDS), name="out")  # L_o
        self.trackers = {
            name: keras.metrics.Mean(name=name)
            for name in ("accuracy", "caption_loss", "attention_loss")
        }

    def encode(self, images):
        """Annotations `(batch, regions, 2 filters)` and the initial LSTM state."""
        grid = self.encoder(images[..., None])  # (batch, rows, cols, dim)
        annotations = ops.reshape(grid, (ops.shape(grid)[0], -1, ops.shape(grid)[-1]))
        annotations = annotations + self.places(annotations)
        mean = ops.mean(annotations, axis=1)
        return annotations, [self.init_h(mean), self.init_c(mean)]

    def step(self, previous_word, state, annotations, expected=None, training=None):
        """One word: attend with `h_{t-1}`, update the LSTM, predict `y_t`. `expected`
        `(batch,)`: the hard model's images that take `alpha`'s expectation instead."""
        h = state[0]
        if self.attention == "soft":
            scores = self.score(h[:, None], annotations)[:, 0]  # (batch, regions)
            alpha = ops.softmax(scores, axis=-1)
            z = ops.einsum("br,brd->bd", alpha, annotations)
            details = {}
        else:
            out = self.hard(h[:, None], annotations, training=training, return_details=True)
            z, alpha = out["context"][:, 0], out["probabilities"][:, 0]
            details = {name: out[name][:, 0] for name in ("log_probs", "entropy")}
            details["choices"] = out["choices"][:, 0, 0]
            if expected is not None:
                mean = ops.einsum("br,brd->bd", alpha, annotations)
                z = ops.where(expected[:, None], ops.cast(mean, z.dtype), z)
        z = self.gate(h) * z
        y = self.embedding(previous_word)
        h, state = self.cell(ops.concatenate([y, z], axis=-1), state)
        logits = self.out(y + self.out_h(h) + self.out_z(z))
        return logits, state, {"attention": alpha, **details}

    def call(self, inputs, training=None):
        annotations, state = self.encode(inputs["images"])
        words = inputs["decoder_token_ids"]
        expected = None
        if training and self.attention == "hard":
            # "With probability 0.5 for a given image, we set the sampled attention
            # location s to its expected value alpha" (section 4.1): that image's words
            # train as soft attention's, and its samples leave the REINFORCE term.
            draw = keras.random.uniform((ops.shape(words)[0],), seed=self.seed_generator)
            expected = draw < self.expected_value_rate
        logits, details = [], []
        for t in range(words.shape[1]):  # teacher forcing, a few steps: unrolled
            step_logits, state, step_details = self.step(
                words[:, t], state, annotations, expected, training
            )
            logits.append(step_logits)
            details.append(step_details)
        outputs = {name: ops.stack([d[name] for d in details], axis=1) for name in details[0]}
        if expected is not None:
            sampled = ops.cast(ops.logical_not(expected), "float32")[:, None]
            outputs["log_probs"] = outputs["log_probs"] * sampled
        return {"logits": ops.stack(logits, axis=1), **outputs}

    def caption(self, images, steps=MAX_DIGITS + 1):
        """Greedy captions: words `(batch, steps)` (PAD after END) and the step details."""
        annotations, state = self.encode(images)
        word = ops.full((ops.shape(images)[0],), START, dtype="int32")
        words, details = [], []
        for _ in range(steps):
            logits, state, step_details = self.step(word, state, annotations)
            word = ops.cast(ops.argmax(logits, axis=-1), "int32")
            words.append(word)
            details.append(step_details)
        words = ops.stack(words, axis=1)
        ended = ops.cumsum(ops.cast(ops.equal(words, END), "int32"), axis=1)
        ended = ops.pad(ended[:, :-1], ((0, 0), (1, 0))) > 0  # after the first END
        outputs = {name: ops.stack([d[name] for d in details], axis=1) for name in details[0]}
        return ops.where(ended, PAD, words), outputs

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        real = ops.cast(ops.not_equal(y, PAD), "float32")  # (batch, steps)
        token_loss = keras.losses.sparse_categorical_crossentropy(
            y, y_pred["logits"], from_logits=True
        )
        caption_loss = ops.sum(token_loss * real, axis=1)  # -log p(y | x), per caption
        correct = ops.cast(ops.equal(ops.argmax(y_pred["logits"], axis=-1), y), "float32")
        self.trackers["accuracy"].update_state(correct, sample_weight=real)
        self.trackers["caption_loss"].update_state(ops.mean(caption_loss))
        if self.attention == "soft":  # eq. 14, over the words actually emitted
            coverage = ops.sum(y_pred["attention"] * real[..., None], axis=1)  # (batch, regions)
            attention_loss = self.doubly_stochastic * ops.mean(ops.sum((1 - coverage) ** 2, -1))
            loss = ops.mean(caption_loss) + attention_loss
        elif self.estimator == "gumbel":  # the gradient flows through the relaxed choice
            loss = ops.mean(caption_loss)
            attention_loss = ops.zeros(())
        else:  # eq. 12's surrogate: its gradient is the estimate
            advantage = self.baseline(-caption_loss, training=training)
            loss = reinforce_loss(
                caption_loss,
                self.reinforce_weight * y_pred["log_probs"] * real,
                advantage,
                entropy=y_pred["entropy"] * real,
                entropy_weight=self.entropy_weight,
            )
            attention_loss = loss - ops.mean(caption_loss)
        self.trackers["attention_loss"].update_state(attention_loss)
        return loss

    @property
    def metrics(self):
        return [*super().metrics, *self.trackers.values()]


# --- measuring ---


def evaluate(model, pixels, captions, ink, batch_size=250):
    """Exact captions, per-digit accuracy and localisation on held-out canvases."""
    words, attention, choices = [], [], []
    for start in range(0, len(pixels), batch_size):
        batch_words, details = model.caption(pixels[start : start + batch_size])
        words.append(ops.convert_to_numpy(batch_words))
        attention.append(ops.convert_to_numpy(details["attention"]))
        if "choices" in details:
            choices.append(ops.convert_to_numpy(details["choices"]))
    words, attention = np.concatenate(words), np.concatenate(attention)
    digit = (captions >= 3)[:, :MAX_DIGITS]  # (canvases, MAX_DIGITS)
    on_ink = ink_regions(ink).reshape(*ink.shape[:2], -1)  # (canvases, MAX_DIGITS, regions)
    # The k-th word's attention, on the k-th digit's regions.
    mass = np.sum(attention[:, :MAX_DIGITS] * on_ink, axis=-1)
    result = {
        "exact_captions": float(np.mean(np.all(words == captions, axis=1))),
        "digit_accuracy": float(np.sum((words == captions)[:, :MAX_DIGITS] & digit) / digit.sum()),
        "soft_mass_on_digit": float(np.sum(mass * digit) / digit.sum()),
    }
    right = (words == captions)[:, :MAX_DIGITS]
    truth = captions[:, :MAX_DIGITS] - 3
    result["digit_accuracy_by_class"] = {
        DIGITS[d]: float(np.mean(right[truth == d])) for d in range(10) if np.any(truth == d)
    }
    if choices:
        chosen = np.concatenate(choices)[:, :MAX_DIGITS]
        hit = np.take_along_axis(on_ink, chosen[..., None], axis=-1)[..., 0]
        result["hard_choice_on_digit"] = float(np.sum(hit * digit) / digit.sum())
    return result, words, attention, (np.concatenate(choices) if choices else None)


def pictures(model_name, pixels, words, attention, choices, logdir, count=4):
    """The paper's figure for `count` held-out canvases: PNG files and TensorBoard."""
    import tensorflow as tf

    files = []
    writer = tf.summary.create_file_writer(str(logdir))
    for n in range(count):
        emitted = [WORDS[w] for w in words[n] if w != PAD]
        grid = attention[n, : len(emitted)].reshape(len(emitted), HEIGHT // CELL, WIDTH // CELL)
        picked = None if choices is None else choices[n, : len(emitted)]
        path = pathlib.Path(logdir) / f"{model_name}_attention_{n}.png"
        png = attention_over_image(
            pixels[n], grid, emitted, choices=picked, title=f"{model_name} attention", path=path
        )
        with writer.as_default():
            tf.summary.image(f"attention/{n}", tf.io.decode_png(png, channels=3)[None], step=0)
        files.append(str(path))
    writer.flush()
    return files


def train(attention, train_digits, args, logdir):
    keras.utils.set_random_seed(args.seed)
    model = ShowAttendTell(
        attention=attention,
        doubly_stochastic=args.doubly_stochastic,
        estimator=args.estimator,
        seed=args.seed,
    )
    data = batches(*train_digits, args.batch_size, seed=args.seed)
    model(next(data)[0])  # builds every layer
    model.compile(optimizer=keras.optimizers.Adam(args.learning_rate, clipnorm=5.0))
    budget = TimeBudget(None, args.learning_rate, warmup=0.02, total_steps=args.steps)
    model.fit(
        data,
        shuffle=False,
        steps_per_epoch=min(args.steps, 250),
        epochs=-(-args.steps // min(args.steps, 250)),
        verbose=2 if not args.smoke else 0,
        callbacks=[budget, keras.callbacks.TensorBoard(str(logdir))],
    )
    return model


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--attention", choices=("soft", "hard", "both"), default="both")
    parser.add_argument(
        "--estimator", choices=("reinforce", "gumbel"), default="reinforce", help="hard's"
    )
    parser.add_argument(
        "--doubly-stochastic", type=float, default=1.0, help="soft's lambda (eq. 14)"
    )
    parser.add_argument("--steps", type=int, default=4000, help="training steps of each model")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--learning-rate", type=float, default=2e-3, help="peak Adam rate")
    parser.add_argument("--canvases", type=int, default=2000, help="held-out canvases")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--logdir", default="runs/show_attend_tell")
    parser.add_argument("--smoke", action="store_true", help="seconds: a few steps")
    args = parser.parse_args(argv)
    if args.steps <= 0 or args.canvases <= 0:
        parser.error("--steps and --canvases must be positive")
    if args.smoke:
        args.steps, args.canvases = 3, 20
    train_digits, test_digits = digit_split(seed=0)
    test = canvases(*test_digits, args.canvases, np.random.default_rng(1))
    print(
        f"{len(train_digits[0])} training and {len(test_digits[0])} held-out digit images; "
        f"{args.canvases} held-out canvases of 2-{MAX_DIGITS} digits"
    )
    results = {}
    for attention in ("soft", "hard") if args.attention == "both" else (args.attention,):
        logdir = pathlib.Path(args.logdir) / attention
        started = time.time()
        model = train(attention, train_digits, args, logdir)
        result, words, weights, choices = evaluate(model, *test)
        result["minutes"] = round((time.time() - started) / 60, 1)
        result["pictures"] = pictures(attention, test[0], words, weights, choices, logdir)
        results[attention] = result
        print(attention, json.dumps(result), flush=True)
    path = pathlib.Path(args.logdir) / "results.json"
    settings = {"steps": args.steps, "seed": args.seed, "estimator": args.estimator}
    settings["doubly_stochastic"] = args.doubly_stochastic
    path.write_text(json.dumps({**settings, **results}, indent=1))
    print(f"\n{args.steps} steps of batch {args.batch_size} per model; results in {path}")
    for attention, result in results.items():
        line = (
            f"{attention}: exact captions {result['exact_captions']:.1%}, digits "
            f"{result['digit_accuracy']:.1%}, attention on the digit "
            f"{result['soft_mass_on_digit']:.1%}"
        )
        if "hard_choice_on_digit" in result:
            line += f", chosen region on the digit {result['hard_choice_on_digit']:.1%}"
        print(line)
    return results


if __name__ == "__main__":
    main()
