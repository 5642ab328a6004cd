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

`--gguf smollm2 gemma3` (or GGUF paths) measures real decoders instead (issue 62):
SmolLM2-135M-Instruct and Gemma 3 270M, read from their packaged GGUF files by
`from_gguf` (dequantised to float32), greedy, a 64-token prompt then 128 new tokens
(`--prompt-tokens`, `--new-tokens`), at batch 1 and 8 (`--batch-sizes`): tokens per
second (new tokens of all rows over the call's time) of ours in float32 (XLA), with
Keras's int8 (`quantized_copy`: int8 weights and inputs) and with int8 weights only
(`weights_only=True`: float inputs), against `transformers` on PyTorch reading the
same file (float32, and its dynamic int8: `torch.ao.quantization.quantize_dynamic` on
the linear layers) and, where `llama-cpp-python` is installed (built from source: `pip
install llama-cpp-python`), llama.cpp on the file's own 4-bit weights (batch 1 through
its Python API; more rows by its batched decoding: one context of that many sequences,
one `llama_decode` a step). Every variant is given `--threads`. Also printed:
how many of int8's greedy tokens equal float32's, ours and theirs. On JAX
(`KERAS_BACKEND=jax`) ours also decodes from the file's own blocks (`from_gguf(path,
keep_blocks=True)`: the products read the blocks on a custom call).

    python benchmarks/decode.py --gguf smollm2 gemma3 --repeats 3
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
    parser.add_argument("--new-tokens", type=int, default=None, help="default 64 (--gguf: 128)")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument(
        "--gguf",
        nargs="+",
        help="smollm2, gemma3 (the packaged files) or .gguf paths: real decoders instead",
    )
    parser.add_argument("--prompt-tokens", type=int, default=64, help="--gguf: prompt length")
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 8], help="--gguf")
    parser.add_argument("--threads", type=int, default=2, help="--gguf: threads per runtime")
    parser.add_argument(
        "--grouped-query",
        action="store_true",
        help="time cached decoding with heads, heads/4 and 1 key/value heads instead",
    )
    args = parser.parse_args(argv)
    if args.gguf:
        import gguf_decoding  # beside this file

        return gguf_decoding.run(args)
    args.new_tokens = args.new_tokens or 64
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
