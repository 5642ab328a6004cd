"""The one shared check for layers, and small utilities the tests share.

The layer tests run on every Keras backend (`KERAS_BACKEND=jax|torch pytest tests/layers`),
so what they need beyond `keras.ops` is here, written once per backend: `to_numpy` (a
PyTorch output that tracks gradients cannot go through `np.asarray`), `gradients` and
`jacobian` (TensorFlow's tape, `jax.grad` over Keras's stateless scope, `torch.autograd`),
`xla_compiled` (`tf.function(jit_compile=True)` or `jax.jit` with the layers' state
threaded through) and `dtype_name`."""

import contextlib
import json
import os
import subprocess
import sys

import keras
import numpy as np

ALL_BACKENDS = ("tensorflow", "jax", "torch")


def run_layer_test(
    layer_cls,
    init_kwargs,
    input_data,
    call_kwargs=None,
    expected_output_shape=None,
    expected_num_trainable_weights=None,
    tmp_path=None,
    unchanged_weights=(),
):
    """Builds, calls (eager and symbolic), fits one step, saves and reloads a layer.

    Args:
        layer_cls: the layer class.
        init_kwargs: constructor arguments.
        input_data: dict of call-argument name -> numpy array (tensor arguments).
        call_kwargs: other call arguments (Python values).
        expected_output_shape: shape of the (first) output in eager mode.
        expected_num_trainable_weights: checked after building.
        tmp_path: folder for the `.keras` round trip (pytest's `tmp_path`).
        unchanged_weights: path suffixes of weights whose gradient is zero by the
            mathematics (e.g. the key bias under dot scoring, which adds the same
            `q . b_k` to every key's score and so cancels in the softmax).

    Returns:
        The eager output (first output if several).
    """
    call_kwargs = call_kwargs or {}

    # Config round trip.
    layer = layer_cls(**init_kwargs)
    config = layer.get_config()
    assert layer_cls.from_config(config).get_config() == config
    assert (
        keras.saving.deserialize_keras_object(
            keras.saving.serialize_keras_object(layer)
        ).get_config()
        == config
    )

    # Eager call.
    output = _first(layer(**input_data, **call_kwargs))
    if expected_output_shape is not None:
        assert tuple(output.shape) == tuple(expected_output_shape)
    if expected_num_trainable_weights is not None:
        assert len(layer.trainable_weights) == expected_num_trainable_weights

    # Symbolic call: same shapes (batch left unknown), then a functional model.
    inputs = {
        name: keras.Input(shape=value.shape[1:], dtype=str(value.dtype), name=name)
        for name, value in input_data.items()
    }
    symbolic_layer = layer_cls(**init_kwargs)
    symbolic = symbolic_layer(**inputs, **call_kwargs)
    eager_outputs = keras.tree.flatten(symbolic_layer(**input_data, **call_kwargs))
    for sym, eager in zip(keras.tree.flatten(symbolic), eager_outputs, strict=True):
        assert tuple(sym.shape)[1:] == tuple(eager.shape)[1:], (sym.shape, eager.shape)
    model = keras.Model(inputs, _first(symbolic))

    # One training step moves every trainable weight.
    before = [np.array(w) for w in model.trainable_weights]
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    target = np.random.default_rng(0).normal(size=output.shape).astype("float32")
    model.fit(input_data, target, batch_size=len(target), epochs=1, verbose=0)
    for w, old in zip(model.trainable_weights, before, strict=True):
        if w.path.endswith(tuple(unchanged_weights)):
            continue
        assert not np.allclose(np.array(w), old), f"{w.path} did not change in fit"

    # .keras save and reload: identical outputs.
    if tmp_path is not None:
        path = str(tmp_path / "layer_test.keras")
        model.save(path)
        reloaded = keras.saving.load_model(path)
        np.testing.assert_allclose(
            to_numpy(reloaded(input_data)), to_numpy(model(input_data)), atol=1e-6, rtol=0
        )
    return output


def _first(outputs):
    return outputs[0] if isinstance(outputs, (tuple, list)) else outputs


def max_abs_diff(a, b):
    return float(np.max(np.abs(to_numpy(a, "float64") - to_numpy(b, "float64"))))


def to_numpy(x, dtype=None):
    """`np.asarray` for a tensor of any backend (or a NumPy value), optionally cast."""
    if not isinstance(x, (np.ndarray, np.generic, list, tuple, int, float, bool)):
        x = keras.ops.convert_to_numpy(x)
    return np.asarray(x, dtype)


def dtype_name(x):
    """A tensor's dtype as Keras names it (`"float16"`, not `torch.float16`)."""
    return keras.backend.standardize_dtype(x.dtype)


def _split(result, has_aux):
    return (result[0], result[1]) if has_aux else (result, None)


def gradients(fn, variables, has_aux=False):
    """The gradients of `fn()` with respect to Keras `variables`, on any backend.

    `fn` takes no arguments and returns a scalar loss, or `(loss, aux)` with
    `has_aux=True`; then `(gradients, aux)` is returned. State `fn` changes (a seed
    generator's) is kept, as after an eager call. Works eagerly and inside
    `xla_compiled`."""
    variables = list(variables)
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        with tf.GradientTape() as tape:
            loss, aux = _split(fn(), has_aux)
        grads = tape.gradient(loss, [v.value for v in variables])
    elif backend == "jax":
        import jax

        assigned = []  # the variables `fn` assigned (outside jax's pytrees)

        def pure(values):
            with _RecordingScope(list(zip(variables, values, strict=True))) as scope:
                loss, aux = _split(fn(), has_aux)
            changed = scope.changed_state()
            assigned[:] = [variable for variable, _ in changed]
            return loss, (aux, [value for _, value in changed])

        grads, (aux, values) = jax.grad(pure, has_aux=True)([v.value for v in variables])
        for variable, value in zip(assigned, values, strict=True):
            variable.assign(value)
    else:
        import torch

        with torch.enable_grad():
            loss, aux = _split(fn(), has_aux)
            grads = torch.autograd.grad(loss, [v.value for v in variables], allow_unused=True)
    return (list(grads), aux) if has_aux else list(grads)


def jacobian(fn, variable):
    """`d fn()[i] / d variable`: shape `fn()`'s (a vector) + the variable's, any backend."""
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        with tf.GradientTape() as tape:
            outputs = fn()
        return to_numpy(tape.jacobian(outputs, variable.value))
    if backend == "jax":
        import jax

        def pure(value):
            with keras.StatelessScope(state_mapping=[(variable, value)]):
                return fn()

        return to_numpy(jax.jacfwd(pure)(variable.value))  # few inputs, many outputs
    import torch

    with torch.enable_grad():
        outputs = fn()
        eye = torch.eye(outputs.shape[0], dtype=outputs.dtype, device=outputs.device)
        (rows,) = torch.autograd.grad(
            outputs, [variable.value], grad_outputs=eye, is_grads_batched=True
        )
    return to_numpy(rows)


class _RecordingScope(keras.StatelessScope):
    """A stateless scope that remembers which variables were assigned in it; opened
    inside another (`gradients` inside `xla_compiled`), it reads the outer one's values
    for the variables it is not given."""

    def __init__(self, state_mapping):
        from keras.src.backend.common.stateless_scope import get_stateless_scope

        super().__init__(state_mapping=state_mapping)
        outer = get_stateless_scope()
        if outer is not None:
            self.state_mapping = {**outer.state_mapping, **self.state_mapping}
        self.assigned = {}

    def add_update(self, update):
        self.assigned[id(update[0])] = update[0]
        super().add_update(update)

    def changed_state(self):
        return [(v, self.get_current_value(v)) for v in self.assigned.values()]


def xla_compiled(fn, layers):
    """`fn` compiled with XLA the backend's way: `tf.function(jit_compile=True)` on
    TensorFlow; on JAX `jax.jit` over a pure function of the `layers`' state (weights and
    seed-generator state in, updated state out, assigned back after each call). PyTorch
    has no XLA: tests of compiled behaviour are marked for the other two backends."""
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        return tf.function(fn, jit_compile=True)
    if backend != "jax":
        raise NotImplementedError(f"no XLA compilation on the {backend} backend")
    import jax

    variables = [v for layer in layers for v in layer.variables]

    def pure(values, *args):
        with keras.StatelessScope(list(zip(variables, values, strict=True))) as scope:
            outputs = fn(*args)
        new = [scope.get_current_value(v) for v in variables]
        return outputs, [old if n is None else n for old, n in zip(values, new, strict=True)]

    compiled = jax.jit(pure)

    def run(*args):
        outputs, values = compiled([v.value for v in variables], *args)
        for variable, value in zip(variables, values, strict=True):
            variable.assign(value)
        return outputs

    return run


@contextlib.contextmanager
def eagerly():
    """TensorFlow's `tf.function`s (Keras's train, test and predict steps among them) run
    as Python inside the block: for a few training steps whose traced path another test
    checks, where tracing the steps takes longer than running them (the getting-started
    example's smoke: 87 s traced, 25 s eager on 2 cores). Exports trace all the same."""
    import tensorflow as tf

    before = tf.config.functions_run_eagerly()  # inside an `eager` test: stays eager after
    tf.config.run_functions_eagerly(True)
    try:
        yield
    finally:
        tf.config.run_functions_eagerly(before)


def varied_weights(model, scale=0.2):
    """`model` with every weight drawn from N(0, scale), seeded by its path: answers that
    vary from input to input (no untrained half-and-half probabilities). Returns it."""
    for weight in model.weights:
        weight.assign(np.random.default_rng(len(weight.path)).normal(0, scale, weight.shape))
    return model


# The start of a script run where keras and keras_attn cannot be imported, as TF Serving
# has it: TensorFlow with tensorflow-text's op libraries loaded as the server links them
# (its Python package would import keras); `json`, `sys` and `tf` imported.
TF_SERVING_PREAMBLE = """
import glob, importlib.util, json, os, sys
sys.modules["keras"] = None
sys.modules["keras_attn"] = None
import tensorflow as tf
package = importlib.util.find_spec("tensorflow_text").submodule_search_locations[0]
for library in sorted(glob.glob(os.path.join(package, "python", "ops", "*.so"))):
    tf.load_op_library(library)
"""


@contextlib.contextmanager
def serving_session(path):
    """A SavedModel's `serving_default` in a Session as TF Serving runs it: the MetaGraph
    loaded, Grappler's rewrites on (a `ConfigProto` of its own, not what conftest.py set
    for this process). Yields `run(texts) -> (probabilities, nodes)`, `nodes` those of the
    graphs the Session ran, rewrites included."""
    import tensorflow as tf

    graph, config = tf.Graph(), tf.compat.v1.ConfigProto()
    with graph.as_default(), tf.compat.v1.Session(graph=graph, config=config) as session:
        meta_graph = tf.compat.v1.saved_model.loader.load(session, ["serve"], str(path))
        signature = meta_graph.signature_def["serving_default"]

        def run(texts):
            metadata = tf.compat.v1.RunMetadata()
            probabilities = session.run(
                signature.outputs["probabilities"].name,
                {signature.inputs["text"].name: texts},
                options=tf.compat.v1.RunOptions(output_partition_graphs=True),
                run_metadata=metadata,
            )
            return probabilities, [node for part in metadata.partition_graphs for node in part.node]

        yield run


def script_answer(script, *args, stdin=None, env=None, preexec_fn=None, timeout=300):
    """`python -c SCRIPT ARGS` in a process of its own (a runtime loaded without what the
    test process imported), `stdin` fed to it (`env`, `preexec_fn`: as `subprocess`'s, e.g.
    a memory cap): the JSON of its last printed line.

    A script that starts with `TF_SERVING_PREAMBLE` (and sets no `preexec_fn`) runs in
    this worker's TensorFlow-only process for its `env` (`_TFOnlyRunner`, one per
    environment, e.g. `TF_ENABLE_ONEDNN_OPTS=0`), which did the preamble's imports once:
    starting TensorFlow took 8-13 s per answer on the 2-core machine, 11 answers in
    tests/export/test_saved_model.py alone."""
    if preexec_fn is None and script.startswith(TF_SERVING_PREAMBLE):
        returncode, stdout, stderr = _TFOnlyRunner.get(env).run(
            script[len(TF_SERVING_PREAMBLE) :], args, stdin, timeout
        )
    else:
        completed = subprocess.run(
            [sys.executable, "-c", script, *map(str, args)],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
            preexec_fn=preexec_fn,
        )
        returncode, stdout, stderr = completed.returncode, completed.stdout, completed.stderr
    assert returncode == 0, stderr[-3000:]
    return json.loads(stdout.strip().splitlines()[-1])


# The TensorFlow-only process's loop: after the preamble, each line it reads is a request
# (a script's body after the preamble, its arguments, its stdin); the body runs as
# `python -c` would run it (`sys.argv`, `sys.stdin`, `__name__ == "__main__"`, its own
# globals over the preamble's), its printed lines and traceback captured; the answer goes
# back as one JSON line on a descriptor of its own (TensorFlow's C++ logs write to 1 and 2).
_RUNNER_LOOP = """
import contextlib, gc, io, traceback
_answers = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)
_preamble = dict(globals())
for _line in sys.stdin:
    _request = json.loads(_line)
    _out, _err, _code = io.StringIO(), io.StringIO(), 0
    sys.argv = ["-c", *_request["args"]]
    sys.stdin = io.StringIO(_request["stdin"] or "")
    try:
        with contextlib.redirect_stdout(_out), contextlib.redirect_stderr(_err):
            exec(compile(_request["script"], "<script>", "exec"), dict(_preamble))
    except SystemExit as _exit:
        _code = _exit.code if isinstance(_exit.code, int) else (0 if _exit.code is None else 1)
    except BaseException:
        _err.write(traceback.format_exc())
        _code = 1
    sys.stdin = sys.__stdin__
    gc.collect()
    _answers.write(json.dumps([_code, _out.getvalue(), _err.getvalue()]) + "\\n")
    _answers.flush()
"""


class _TFOnlyRunner:
    """One process per test worker in which `TF_SERVING_PREAMBLE` ran once (keras and
    keras_attn cannot be imported there, TensorFlow Text's op libraries are loaded as TF
    Serving links them); `run` executes a script's body in it. A request that fails to
    answer in time, or a process that died, is replaced by a fresh process next time, as
    is one that answered `ANSWERS` times: what the SavedModels it loaded leave behind
    (0.6-0.9 GB after all of a worker's answers, in a run without replacements) goes back
    with it. Each environment (`env`, as `subprocess` takes it; `None`: this process's)
    has a process of its own."""

    ANSWERS = 32
    _current = {}

    @classmethod
    def get(cls, env=None):
        # The environment's difference from this process's names its runner.
        key = None if env is None else tuple(sorted(set(env.items()) ^ set(os.environ.items())))
        current = cls._current.get(key)
        if current is None or current.process.poll() is not None or current.answers >= cls.ANSWERS:
            if current is not None:
                current.process.kill()
                current.process.wait()
            cls._current[key] = cls(env)
        return cls._current[key]

    def __init__(self, env=None):
        import atexit
        import tempfile

        self.log = tempfile.TemporaryFile("w+")
        self.process = subprocess.Popen(
            [sys.executable, "-c", TF_SERVING_PREAMBLE + _RUNNER_LOOP],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
            env=env,
        )
        atexit.register(self.process.kill)
        self.answers = 0

    def run(self, body, args, stdin, timeout):
        """`(returncode, stdout, stderr)` of `body` run with `args` and `stdin`."""
        import selectors

        self.answers += 1
        request = {"script": body, "args": [str(a) for a in args], "stdin": stdin}
        try:
            self.process.stdin.write(json.dumps(request) + "\n")
            self.process.stdin.flush()
            with selectors.DefaultSelector() as selector:
                selector.register(self.process.stdout, selectors.EVENT_READ)
                ready = selector.select(timeout)
            line = self.process.stdout.readline() if ready else ""
        except BrokenPipeError:
            ready, line = True, ""
        if not line:
            why = "died" if ready else f"gave no answer in {timeout} s"
            self.process.kill()
            self.process.wait()
            self.log.seek(0)
            return 1, "", f"the TensorFlow-only process {why}:\n" + self.log.read()[-3000:]
        return tuple(json.loads(line))


def race(script, argument_lists, folder, env=None, timeout=600):
    """Runs `python -c SCRIPT ARGS READY GO` once per argument list, all at once: each
    process writes its READY file when set up and waits for GO, which is written once
    every one is ready (a process that dies first fails the test with its stderr).
    Returns the JSON of each process's last printed line, in order."""
    import pathlib
    import time

    folder, go = pathlib.Path(folder), pathlib.Path(folder) / "go"
    ready = [folder / f"ready{i}" for i in range(len(argument_lists))]
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", script, *map(str, args), str(flag), str(go)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for args, flag in zip(argument_lists, ready, strict=True)
    ]
    try:
        deadline = time.monotonic() + 300
        while not all(flag.exists() for flag in ready):
            ended = [p for p in processes if p.poll() is not None]
            assert not ended, ended[0].communicate()[1][-3000:]  # one died before the race
            assert time.monotonic() < deadline
            time.sleep(0.05)
        go.write_text("")  # all of them at once from now on
        outputs = [process.communicate(timeout=timeout) for process in processes]
    finally:
        for process in processes:
            process.kill()
    errors = "\n".join(err[-2000:] for _, err in outputs)
    assert [p.returncode for p in processes] == [0] * len(processes), errors
    return [json.loads(out.strip().splitlines()[-1]) for out, _ in outputs]


def with_one_file_changed(source, folder, name, change):
    """`folder` (made here) of links to every file of `source` but `name`, whose bytes
    `change(original bytes)` gives (`change` None: the file is missing): a damaged copy
    of a folder of data files, the others shared."""
    folder.mkdir()
    for path in source.iterdir():
        if path.name != name:
            (folder / path.name).symlink_to(path)
    if change is not None:
        (folder / name).write_bytes(change((source / name).read_bytes()))
    return folder
