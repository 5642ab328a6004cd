"""Parameter bytes per device when `get_layout_map` splits a model over a 1 x N mesh.

Usage: python benchmarks/model_parallel.py [--devices 8] [--models bert-base gpt2-small]

Runs on JAX, on N host devices of the CPU (`--xla_force_host_platform_device_count`,
set here before JAX starts) or on the accelerators JAX finds when there are N of them.
Each model is built twice: on one device, then in a `ModelParallel` scope on a `(1, N)`
mesh; the second's bytes on the mesh's first device are summed from the variables'
shards (what the device holds, not what the map says), next to the whole model's.
"""

import argparse
import os
import sys
import time

DEVICES = 8


def _devices_flag(argv):
    for index, arg in enumerate(argv):
        if arg == "--devices" and index + 1 < len(argv):
            return int(argv[index + 1])
        if arg.startswith("--devices="):
            return int(arg.split("=", 1)[1])
    return DEVICES


def _start_jax(devices):
    """JAX on `devices` host devices unless XLA_FLAGS already says; before JAX starts."""
    os.environ.setdefault("KERAS_BACKEND", "jax")
    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_force_host_platform_device_count" not in flags:
        os.environ["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={devices}"


MODELS = {  # name -> (family class, its arguments)
    "bert-base": ("BertBackbone", dict(vocabulary_size=30522, **{"size": "base"})),
    "gpt2-small": (
        "GPTLanguageModel",
        dict(
            vocabulary_size=50257,
            num_layers=12,
            num_heads=12,
            hidden_dim=768,
            intermediate_dim=3072,
            max_sequence_length=1024,
        ),
    ),  # fmt: skip
    "bert-tiny": ("BertBackbone", dict(vocabulary_size=1000, **{"size": "tiny"})),
}


def _build(name):
    import keras_attn.models

    cls_name, arguments = MODELS[name]
    cls, arguments = getattr(keras_attn.models, cls_name), dict(arguments)
    size = arguments.pop("size", None)
    return cls.from_size(size, **arguments) if size else cls(**arguments)


def _bytes_on(model, device):
    """Bytes of `model`'s variables that `device` holds."""
    total = 0
    for variable in model.variables:
        for shard in variable.value.addressable_shards:
            if shard.device == device:
                total += shard.data.nbytes
    return total


def measure(name, devices):
    import keras
    import numpy as np

    from keras_attn.models import model_structure

    keras.utils.set_random_seed(0)
    whole = _build(name)
    whole_bytes = sum(int(np.prod(v.shape)) * np.dtype(v.dtype).itemsize for v in whole.variables)
    del whole
    mesh = keras.distribution.DeviceMesh((1, len(devices)), ["batch", "model"], devices)
    began = time.perf_counter()
    layouts = model_structure(lambda: _build(name)).get_layout_map(mesh)
    seconds = time.perf_counter() - began
    with keras.distribution.ModelParallel(layout_map=layouts, batch_dim_name="batch").scope():
        split = _build(name)
    per_device = _bytes_on(split, devices[0])
    return {
        "model": name,
        "devices": len(devices),
        "whole_mib": whole_bytes / 2**20,
        "per_device_mib": per_device / 2**20,
        "ratio": per_device / whole_bytes,
        "layout_seconds": seconds,
        "split_variables": len(layouts),
    }


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--devices", type=int, default=DEVICES)
    parser.add_argument("--models", nargs="+", default=["bert-base", "gpt2-small"])
    args = parser.parse_args(argv)
    _start_jax(args.devices)
    import jax

    devices = jax.devices()[: args.devices]
    if len(devices) < args.devices:
        raise SystemExit(f"error: JAX has {len(devices)} devices, --devices {args.devices}")
    print(f"{'model':>12} {'whole MiB':>10} {'per device':>11} {'ratio':>7} {'map s':>6}")
    rows = []
    for name in args.models:
        row = measure(name, devices)
        print(
            f"{name:>12} {row['whole_mib']:>10.1f} {row['per_device_mib']:>11.1f} "
            f"{row['ratio']:>7.3f} {row['layout_seconds']:>6.1f}",
            flush=True,
        )
        rows.append(row)
    return rows


if __name__ == "__main__":
    _start_jax(_devices_flag(sys.argv[1:]))
    main()
