"""`benchmarks/decode.py --gguf`: greedy decoding of real decoders read from GGUF files,
ours against `transformers` on PyTorch and llama.cpp (issue 62; decode.py's docstring
says what is measured)."""

import importlib.util

import numpy as np
from timing import alternating_medians  # beside this file


def gguf_file(name):
    """The GGUF file `name` names: `smollm2` and `gemma3` are the packaged ones
    (`keras_attn.models.gguf.reader.packaged_gguf`), anything else a path."""
    from keras_attn.checkpoints import CheckpointError
    from keras_attn.models.gguf.reader import packaged_gguf

    try:
        return packaged_gguf(name)
    except CheckpointError as error:
        raise SystemExit(f"error: --gguf {name}: {error}") from None


def prompts(model, batch, length):
    """`(batch, length)` int32 ids: Rotten Tomatoes reviews in the model's own tokens,
    each row its own reviews run together, cut to `length`."""
    from keras_attn.data import rotten_tomatoes

    tokenizer = model.preprocessor.tokenizer
    texts = rotten_tomatoes(log=False).texts
    rows, start = [], 0
    for _ in range(batch):
        ids = []
        while len(ids) < length:
            ids += [int(i) for i in tokenizer([texts[start]])[0]]
            start += 1
        rows.append(ids[:length])
    return np.array(rows, "int32")


def _ours(model, kind, path=None):
    from keras_attn.export import quantized_copy
    from keras_attn.models import from_gguf

    if kind == "float32":
        return model
    if kind == "file's blocks":
        return from_gguf(path, keep_blocks=True)
    return quantized_copy(model, weights_only=kind == "int8 weights only")


def _our_call(model, ids, total):
    return lambda: model.generate(ids, total)[:, ids.shape[1] :]


def _theirs(path, int8, threads):
    import torch
    import transformers

    torch.set_num_threads(threads)
    model = transformers.AutoModelForCausalLM.from_pretrained(
        path.parent, gguf_file=path.name, dtype=torch.float32
    ).eval()
    if int8:
        model = torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, torch.qint8)
    return model


def _their_call(model, ids, new_tokens):
    import torch

    tensor = torch.tensor(ids, dtype=torch.long)

    def call():
        with torch.inference_mode():
            out = model.generate(
                tensor,
                attention_mask=torch.ones_like(tensor),
                max_new_tokens=new_tokens,
                min_new_tokens=new_tokens,
                do_sample=False,
                pad_token_id=0,
            )
        return out[:, ids.shape[1] :].numpy()

    return call


def _llama_cpp(path, threads, context):
    """llama.cpp's model on the file, or `None` where `llama-cpp-python` is not installed."""
    if importlib.util.find_spec("llama_cpp") is None:
        return None
    from llama_cpp import Llama

    return Llama(
        model_path=str(path),
        n_ctx=context,
        n_batch=context,
        n_threads=threads,
        n_threads_batch=threads,
        verbose=False,
    )


def _llama_call(llm, ids, new_tokens):
    def call():
        tokens = []
        for token in llm.generate([int(i) for i in ids[0]], temp=0.0, top_k=1, reset=True):
            tokens.append(token)
            if len(tokens) == new_tokens:
                break
        return np.array([tokens])

    return call


def _llama_batched_call(path, ids, new_tokens, threads):
    """llama.cpp's batched greedy decoding of the `(batch, prompt)` ids: one context of
    `batch` sequences (`n_seq_max`), the prompts in one `llama_decode`, then one
    `llama_decode` a step of one token per sequence (as its `batched` example does;
    `llama-cpp-python`'s `Llama` decodes one sequence)."""
    import llama_cpp as lib

    batch_size, length = ids.shape
    lib.llama_backend_init()
    model = lib.llama_model_load_from_file(str(path).encode(), lib.llama_model_default_params())
    params = lib.llama_context_default_params()
    params.n_ctx = batch_size * (length + new_tokens)
    params.n_batch = params.n_ubatch = batch_size * length
    params.n_seq_max = batch_size
    params.n_threads = params.n_threads_batch = threads
    context = lib.llama_init_from_model(model, params)
    vocabulary = lib.llama_vocab_n_tokens(lib.llama_model_get_vocab(model))
    batch = lib.llama_batch_init(batch_size * length, 0, batch_size)

    def decode(items):  # (token, position, sequence, whether its logits are wanted)
        batch.n_tokens = len(items)
        for i, (token, position, sequence, wanted) in enumerate(items):
            batch.token[i], batch.pos[i], batch.n_seq_id[i] = token, position, 1
            batch.seq_id[i][0], batch.logits[i] = sequence, wanted
        if lib.llama_decode(context, batch) != 0:
            raise RuntimeError("llama_decode failed")

    def call():
        lib.llama_memory_clear(lib.llama_get_memory(context), True)
        decode([
            (int(ids[s, p]), p, s, p == length - 1)
            for s in range(batch_size) for p in range(length)
        ])  # fmt: skip
        rows = [s * length + length - 1 for s in range(batch_size)]
        out = np.zeros((batch_size, new_tokens), "int64")
        for step in range(new_tokens):
            for s, row in enumerate(rows):
                logits = lib.llama_get_logits_ith(context, row)
                out[s, step] = int(np.argmax(np.ctypeslib.as_array(logits, (vocabulary,))))
            if step < new_tokens - 1:
                decode([(int(out[s, step]), length + step, s, True) for s in range(batch_size)])
                rows = list(range(batch_size))
        return out

    return call


def same_tokens(a, b):
    """The share of positions where two `(batch, new)` greedy outputs agree."""
    return float((np.asarray(a) == np.asarray(b)).mean())


def run(args):
    """Rows `{model, batch, variant, tokens_per_second, same_as_float32}`, printed."""
    import keras

    from keras_attn.models import from_gguf

    new_tokens = args.new_tokens or 128
    rows = []
    for name in args.gguf:
        path = gguf_file(name)
        keras.utils.set_random_seed(0)
        model = from_gguf(path)
        kinds = ("float32", "int8", "int8 weights only")
        if keras.backend.backend() == "jax":  # the custom call reading the blocks
            kinds += ("file's blocks",)
        ours = {kind: _ours(model, kind, path) for kind in kinds}
        theirs = {"float32": _theirs(path, False, args.threads)}
        theirs["int8"] = _theirs(path, True, args.threads)
        llama = _llama_cpp(path, args.threads, args.prompt_tokens + new_tokens)
        total = args.prompt_tokens + new_tokens
        print(
            f"\n{path.name}: {type(model).__name__}, {model.count_params():,} parameters; "
            f"greedy, {args.prompt_tokens} prompt tokens + {new_tokens} new, median of "
            f"{args.repeats}, {args.threads} threads; tokens/s (new tokens of all rows)",
            flush=True,
        )
        for batch in args.batch_sizes:
            ids = prompts(model, batch, args.prompt_tokens)
            calls = {f"ours {kind}": _our_call(m, ids, total) for kind, m in ours.items()}
            calls.update({
                f"transformers {kind}": _their_call(m, ids, new_tokens)
                for kind, m in theirs.items()
            })  # fmt: skip
            if llama is not None and batch == 1:
                calls["llama.cpp (file's 4-bit)"] = _llama_call(llama, ids, new_tokens)
            elif llama is not None:
                calls["llama.cpp (file's 4-bit)"] = _llama_batched_call(
                    path, np.asarray(ids), new_tokens, args.threads
                )
            outputs = {variant: call() for variant, call in calls.items()}
            medians = alternating_medians(calls, args.repeats, warmup=0)
            for variant, seconds in medians.items():
                reference = outputs[
                    "ours float32" if variant.startswith("ours") else "transformers float32"
                ]
                row = {
                    "model": path.name,
                    "batch": batch,
                    "variant": variant,
                    "tokens_per_second": batch * new_tokens / seconds,
                    "same_as_float32": same_tokens(outputs[variant], reference),
                }
                rows.append(row)
                print(
                    f"  batch {batch} {variant:>26} {row['tokens_per_second']:8.1f} tokens/s"
                    f"   greedy tokens as float32's: {row['same_as_float32']:.1%}",
                    flush=True,
                )
            agree = same_tokens(outputs["ours float32"], outputs["transformers float32"])
            ratio = medians["transformers float32"] / medians["ours float32"]
            print(
                f"  batch {batch}: ours float32 / transformers float32 speed {ratio:.2f}; "
                f"their greedy tokens equal on {agree:.1%}",
                flush=True,
            )
    return rows
