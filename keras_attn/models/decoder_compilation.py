"""The decoding loop compiled for the Keras backend (internal to `generate`).

- TensorFlow: a `tf.function` (XLA by default), retraced only for new shapes.
- JAX: `jax.jit` of a stateless function: the model's variables and the sampler's
  seed state go in as arguments (so later training is seen without recompiling) and
  the advanced seed state comes out; compiled once per setting and shape.
- PyTorch: the loop runs eagerly under `torch.no_grad()` (no compilation: the loop's
  shapes change every step with the cache index, which `torch.compile` would retrace).
"""

import keras


def compile_decoder(model, run, sampler, jit_compile):
    """`run` compiled for the current backend (see the module docstring)."""
    backend = keras.config.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        return tf.function(run, jit_compile=jit_compile)  # one trace per shape
    if backend == "jax":
        return _jax_decoder(model, run, sampler, jit_compile)
    if backend == "torch":
        import torch

        def decode(*arguments):
            with torch.no_grad():
                return run(*arguments)

        return decode
    raise ValueError(
        "generate() runs on the TensorFlow, JAX and PyTorch backends. Received: backend "
        f"{backend!r}"
    )


def has_keras_hub():
    """Whether keras-hub (its samplers) is installed."""
    import importlib.util

    return importlib.util.find_spec("keras_hub") is not None


def _jax_decoder(model, run, sampler, jit_compile):
    """`run` as a stateless `jax.jit` function of the model's variables and the
    sampler's seed state, wrapped to read them before and write the seed state back
    after. `decode.compilations()` counts the traces (for tests)."""
    import jax

    model_variables = list(model.variables)
    sampler_variables = list(sampler.variables) if sampler is not None else []
    traces = []

    def stateless(model_values, sampler_values, *arguments):
        traces.append(None)  # runs once per trace, not per call
        mapping = [
            *zip(model_variables, model_values, strict=True),
            *zip(sampler_variables, sampler_values, strict=True),
        ]
        with keras.StatelessScope(state_mapping=mapping) as scope:
            tokens, log_probs = run(*arguments)
        current = (scope.get_current_value(v) for v in sampler_variables)
        updated = [
            old if new is None else new for new, old in zip(current, sampler_values, strict=True)
        ]
        return tokens, log_probs, updated

    compiled = jax.jit(stateless) if jit_compile else stateless

    def decode(*arguments):
        tokens, log_probs, updated = compiled(
            [v.value for v in model_variables],
            [v.value for v in sampler_variables],
            *arguments,
        )
        for variable, value in zip(sampler_variables, updated, strict=True):
            variable.assign(value)
        return tokens, log_probs

    decode.compilations = lambda: len(traces)
    return decode


def compile_step(model, function, jit_compile):
    """`function` (of backend tensors, returning tensors, reading `model`'s weights)
    compiled as `compile_decoder` compiles the loop, for streaming's prefill and step: a
    `tf.function`, a stateless `jax.jit` of the model's variables, or `no_grad` eager."""
    backend = keras.config.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        return tf.function(function, jit_compile=jit_compile)
    if backend == "jax":
        import jax

        variables = list(model.variables)

        def stateless(values, *arguments):
            mapping = list(zip(variables, values, strict=True))
            with keras.StatelessScope(state_mapping=mapping):
                return function(*arguments)

        compiled = jax.jit(stateless) if jit_compile else stateless
        return lambda *arguments: compiled([v.value for v in variables], *arguments)
    import torch

    def step(*arguments):
        with torch.no_grad():
            return function(*arguments)

    return step
