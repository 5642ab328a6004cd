"""GPU check: one generation API on the accelerator, JAX (jit, XLA) or PyTorch (eager).

For TransformerXL and GPT, float32 and mixed_bfloat16: a beam of one equals greedy,
cached decoding equals re-running the decoder (float32), beam search of 4 runs; and
the time per generated token of the cached loop, batch 8, after a warm-up call.
"""

import time

import keras
import numpy as np

from keras_attn.models import GenerationConfig, GPTLanguageModel, TransformerXL

print("backend", keras.config.backend(), "devices", end=" ")
if keras.config.backend() == "jax":
    import jax

    print(jax.devices())
else:
    import torch

    print(torch.cuda.get_device_name(0), torch.cuda.is_available())

rng = np.random.default_rng(0)
prompts = [list(rng.integers(1, 1000, n)) for n in (3, 7, 5, 9, 4, 6, 8, 2)]
SIZES = {
    "TransformerXL": (TransformerXL, {}),
    "GPT": (GPTLanguageModel, {"max_sequence_length": 128}),
}
for dtype in ("float32", "mixed_bfloat16"):
    for name, (cls, extra) in SIZES.items():
        keras.utils.set_random_seed(0)
        model = cls.from_size("tiny", vocabulary_size=1000, dtype=dtype, **extra)
        greedy = model.generate(prompts, config=GenerationConfig(max_length=64))
        one = model.generate(
            prompts, config=GenerationConfig(strategy="beam", num_beams=1, max_length=64)
        )
        beam4 = model.generate(
            prompts, config=GenerationConfig(strategy="beam", num_beams=4, max_length=64)
        )
        line = f"{name:14s} {dtype:15s} beam1==greedy {bool((one == greedy).all())}"
        if dtype == "float32":
            uncached = model.generate(
                prompts, config=GenerationConfig(max_length=64), use_cache=False
            )
            line += f" cached==uncached {bool((uncached == greedy).all())}"
        line += f" beam4 {beam4.shape}"
        start = time.perf_counter()
        for _ in range(3):
            model.generate(prompts, config=GenerationConfig(max_length=64))
        per_token = (time.perf_counter() - start) / 3 / (64 - 2)
        print(line, f"greedy {1000 * per_token:.2f} ms/token (batch 8)", flush=True)
