"""Runs `keras-attn` in a process whose CPU is split into logical devices (for the strategy tests).

Usage: python -m tests.training.strategy_run LOGICAL_CPUS RESULT_PREFIX keras-attn-args...
Writes RESULT_PREFIX.json (the fit history) and RESULT_PREFIX.npz (the final weights).
The device split must happen before TensorFlow starts, hence a process of its own.
"""

import json
import sys

import numpy as np
import tensorflow as tf


def main():
    cpus, prefix, args = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
    if cpus > 1:
        (cpu,) = tf.config.list_physical_devices("CPU")
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration()] * cpus
        )
    from keras_attn.cli.main import main as keras_attn

    result = keras_attn(args)
    with open(f"{prefix}.json", "w") as f:
        json.dump({"history": result.history}, f)
    np.savez(f"{prefix}.npz", *result.model.get_weights())


if __name__ == "__main__":
    main()
