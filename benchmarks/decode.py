"""Greedy decoding speed: with the key/value cache against re-running the decoder.

Both ways produce the same tokens (tests/models/test_generation.py);
uncached decoding re-runs the whole decoder over the (padded) sequence for every new
token, cached decoding computes one position per step against the stored keys and
values. Models: our GPTLanguageModel and TransformerSeq2Seq, and keras-hub's
GPT2CausalLM of the same size as the field's reference (its generate() uses a cache
too). Each call decodes `--new-tokens` tokens after an 8-token prompt (16-token
sources for the seq2seq); XLA and plain graph; the calls alternate between the
variants, median of `--repeats` after one warm-up (compilation) call.

    python benchmarks/decode.py            # the README's figures

`--grouped-query` measures instead our GPT's cached decoding with `K` key/value heads
for K = `--heads` (multi-head), `--heads` / 4 (grouped-query) and 1 (multi-query):
the median time of a `generate` call (XLA) and the bytes of its key/value caches.

    python benchmarks/decode.py --grouped-query --heads 8 --new-tokens 248
"""

import argparse
import os
import platform

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import keras_hub  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from timing import alternating_medians  # noqa: E402  (benchmarks/timing.py)

from keras_attn.models import GPTLanguageModel, TransformerSeq2Seq  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--hidden-dim", type=int, default=256)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--vocabulary-size", type=int, default=8000)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument(
        "--grouped-query",
        action="store_true",
        help="time cached decoding with heads, heads/4 and 1 key/value heads instead",
    )
    args = parser.parse_args(argv)
    print(
        f"TensorFlow {tf.__version__}, Keras {keras.__version__}, keras-hub "
        f"{keras_hub.__version__}, "
        f"{platform.machine()}, {os.cpu_count()} CPUs"
    )
    size = dict(
        num_layers=args.layers,
        num_heads=args.heads,
        hidden_dim=args.hidden_dim,
        intermediate_dim=4 * args.hidden_dim,
    )
    prompt_length, length = 8, 8 + args.new_tokens
    print(
        f"{args.layers} layers, hidden {args.hidden_dim}, vocabulary {args.vocabulary_size}, batch "
        f"{args.batch_size}, greedy, {args.new_tokens} new tokens, median of {args.repeats}\n"
    )
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    prompt = rng.integers(5, args.vocabulary_size, (args.batch_size, prompt_length)).astype("int32")
    if args.grouped_query:
        return grouped_query_rows(args, size, prompt, length)
    source = rng.integers(5, args.vocabulary_size, (args.batch_size, 16)).astype("int32")
    gpt = GPTLanguageModel(args.vocabulary_size, max_sequence_length=length, dropout=0.0, **size)
    seq2seq = TransformerSeq2Seq(
        args.vocabulary_size, max_sequence_length=length, dropout=0.0, **size
    )
    theirs = keras_hub.models.GPT2CausalLM(
        backbone=keras_hub.models.GPT2Backbone(
            vocabulary_size=args.vocabulary_size,
            num_layers=args.layers,
            num_heads=args.heads,
            hidden_dim=args.hidden_dim,
            intermediate_dim=4 * args.hidden_dim,
            dropout=0.0,
            max_sequence_length=length,
        ),
        preprocessor=None,
    )
    theirs.compile(sampler="greedy")
    hub_inputs = {
        "token_ids": np.pad(prompt, ((0, 0), (0, args.new_tokens))),
        "padding_mask": np.arange(length)[None].repeat(args.batch_size, 0) < prompt_length,
    }

    rows = []
    for jit in (True, False):
        # keras-hub keeps the first generate function it compiled: drop it, or the "no XLA"
        # calls would reuse the XLA one.
        theirs.jit_compile, theirs.generate_function = jit, None
        calls = {
            "GPT cached": lambda jit=jit: gpt.generate(prompt, length, jit_compile=jit),
            "GPT uncached": lambda jit=jit: gpt.generate(
                prompt, length, jit_compile=jit, use_cache=False
            ),
            "seq2seq cached": lambda jit=jit: seq2seq.generate(
                source, length, start_token_id=2, jit_compile=jit
            ),
            "seq2seq uncached": lambda jit=jit: seq2seq.generate(
                source, length, start_token_id=2, jit_compile=jit, use_cache=False
            ),
            "keras-hub GPT-2": lambda: theirs.generate(
                hub_inputs, max_length=length, stop_token_ids=None
            ),
        }
        medians = alternating_medians(calls, args.repeats, warmup=1)
        for model in ("GPT", "seq2seq"):
            cached, uncached = medians[f"{model} cached"], medians[f"{model} uncached"]
            rows.append((model, jit, cached, uncached))
            print(
                f"{model:>8} XLA={str(jit):<5} cached {cached * 1000:8.1f} ms   uncached "
                f"{uncached * 1000:8.1f} ms   speed-up {uncached / cached:5.1f}x",
                flush=True,
            )
        print(
            f"keras-hub GPT-2 XLA={str(jit):<5} {medians['keras-hub GPT-2'] * 1000:8.1f} ms "
            f"(ours cached / keras-hub: {medians['GPT cached'] / medians['keras-hub GPT-2']:.2f} "
            "of its time)",
            flush=True,
        )
    return rows


def grouped_query_rows(args, size, prompt, length):
    """(K, median seconds of a cached XLA `generate`, cache bytes) for K key/value heads."""
    kv_heads = sorted({args.heads, max(1, args.heads // 4), 1}, reverse=True)
    models = {
        k: GPTLanguageModel(
            args.vocabulary_size,
            max_sequence_length=length,
            dropout=0.0,
            num_key_value_heads=k,
            **size,
        )
        for k in kv_heads
    }
    calls = {k: (lambda model=model: model.generate(prompt, length)) for k, model in models.items()}
    medians = alternating_medians(calls, args.repeats, warmup=1)
    rows = []
    for k, model in models.items():
        caches = model._empty_caches(args.batch_size, length)
        cache_bytes = sum(int(np.prod(cache.shape)) * 4 for cache in caches)  # float32
        rows.append((k, medians[k], cache_bytes))
        print(
            f"K={k:<3} ({args.heads} query heads) cached XLA {medians[k] * 1000:8.1f} ms   "
            f"cache {cache_bytes / 2**20:7.2f} MiB   parameters {model.count_params():,}   "
            f"time vs K={kv_heads[0]}: {medians[k] / medians[kv_heads[0]]:.2f}",
            flush=True,
        )
    return rows


if __name__ == "__main__":
    main()
