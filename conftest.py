"""Process-wide test settings (also applies to the doctests under keras_attn/)."""

import gc
import os
import shutil
import sys
import tempfile
import threading

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
# The tests marked `backends(...)` also run on JAX and PyTorch (`make test` runs them
# there with KERAS_BACKEND=jax and =torch). Those runs are made on a machine "without
# TensorFlow": `import tensorflow` fails in them, so whatever they pass needs no
# TensorFlow; a test that does is marked for TensorFlow only (or left unmarked).
if os.environ["KERAS_BACKEND"] != "tensorflow":
    for _name in ("tensorflow", "tensorflow_text"):
        sys.modules[_name] = None
if os.environ["KERAS_BACKEND"] == "jax":
    # JAX compiles every eagerly run op once per shape (about 50 ms each on this CPU, most
    # of a layer test's time); the persistent cache shares that work between the two
    # workers and with the next run (the folder keras_attn's vocabulary cache uses).
    _cache = os.environ.get("KERAS_ATTN_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "keras_attn"
    )
    os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", os.path.join(_cache, "jax"))
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")
    # float32 products as float32 on a GPU: JAX's default there is TF32, which put the
    # loop-by-loop checks of the fusion block and KagNet 1e-3 off on an H200.
    os.environ.setdefault("JAX_DEFAULT_MATMUL_PRECISION", "highest")
# LLVM's optimisations at level 0 make each XLA compile about twice as fast (JAX's layer
# tests: 94 s instead of 150 s from an empty cache; TensorFlow's `jit_compile` steps, and
# the processes tests start, which inherit it: a sample of three TensorFlow modules ran
# in 2:32 instead of 2:50); the tests' small computations do not run long enough to miss
# them. XLA:CPU's older emitters in place of its fusion emitters compile JAX's programs
# about a third faster again (the JAX part of `make test` from an empty compilation cache:
# 159 s instead of 245 s; TensorFlow's XLA unchanged). Both are XLA's supported paths.
for _flag in ("--xla_backend_optimization_level=0", "--xla_cpu_use_fusion_emitters=false"):
    if _flag.split("=")[0] not in os.environ.get("XLA_FLAGS", ""):
        os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {_flag}".strip()
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# TensorFlow's oneDNN kernels allocate from a pool of their own that never gives memory
# back: a worker grew to 11 GB over the suite (the distillation example alone left 5.2 GB
# where 1.8 GB is live), and two such workers starved the JAX processes a test starts of
# memory on the 24 GB CI machine (600-s timeouts). The system allocator returns it.
os.environ.setdefault("TF_ONEDNN_USE_SYSTEM_ALLOCATOR", "1")
# Under `pytest -n 2` each worker (and each process a test starts, which inherits this)
# gets one intra-op thread: two workers on two cores, rather than four spinning threads
# fighting over them (about 12% faster measured on the 2-core machine).
if os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") != "1":
    os.environ.setdefault("TF_NUM_INTRAOP_THREADS", "1")
    os.environ.setdefault("OMP_NUM_THREADS", "1")  # PyTorch's intra-op threads

import keras  # noqa: E402
import pytest  # noqa: E402


def op_stacks_are_not_recorded_in_tests_see_conftest():
    """A stack trace to give every op: TensorFlow's own error messages point here."""
    from tensorflow.python.util import tf_stack

    return tf_stack.extract_stack()


def _record_no_op_stacks():
    """TensorFlow records the Python stack at every op it adds to a graph, for the
    "defined at" lines of its runtime errors, and turns those stacks into file names and
    lines when the graph becomes a function. In a pytest worker an op is made about 100
    frames deep (a median of 96, sampled): recording them took 20% of a sample's time
    (tests/models/test_generation.py and test_bert_classifier.py, one process: 75 s
    against 59.5 s, two rounds each), and the stacks kept with the graphs took memory
    (the same sample's peak 3.65 GB against 2.03). The test process gives every op the
    same short trace instead, so a graph error raised in a test names its cause and says
    "defined at ... op_stacks_are_not_recorded_in_tests_see_conftest";
    `KERAS_ATTN_TEST_OP_STACKS=1` records the stacks again. Processes the tests start
    record theirs as TensorFlow does."""
    from tensorflow.python.framework import ops

    stacks = getattr(ops, "tf_stack", None)
    if not hasattr(stacks, "extract_stack"):  # another TensorFlow: leave it as it is
        return
    traces = []  # taken in a thread of its own: a short stack, not pytest's
    worker = threading.Thread(
        target=lambda: traces.append(op_stacks_are_not_recorded_in_tests_see_conftest())
    )
    worker.start()
    worker.join()
    trace = traces[0]

    class _OneTrace:
        def __getattr__(self, name):
            return getattr(stacks, name)

        @staticmethod
        def extract_stack(stacklevel=1):
            return trace

    ops.tf_stack = _OneTrace()


if keras.config.backend() == "tensorflow":
    import tensorflow as tf

    # Grappler (TensorFlow's graph optimiser) off in the test process: it runs once per
    # traced function, on graphs a test then calls a few times, where the time it takes
    # is not won back (the getting-started example's smoke: 64.7 s without it, 73.8 s
    # with it, on the 2-core AVX2 machine). Numbers stay those of the ops as written;
    # what Grappler makes of an export is tested where it matters, in the processes a
    # test starts and in a Session given its own configuration
    # (tests/export/test_saved_model.py).
    tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": True})
    if os.environ.get("KERAS_ATTN_TEST_OP_STACKS") != "1":
        _record_no_op_stacks()

# keras_attn/__main__.py runs the demo; it is not a module to collect.
collect_ignore = ["keras_attn/__main__.py"]


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "backends(*names): the Keras backends the test runs on (of tensorflow, jax, "
        "torch); a test without the marker runs on TensorFlow only",
    )
    config.addinivalue_line(
        "markers",
        "eager: on TensorFlow, the test's `tf.function`s (Keras's train, test and predict "
        "steps) run as Python (`tests.helpers.eagerly`); for tests of what a few steps "
        "compute, whose traced path another test covers; `eager(False)` on a test "
        "undoes its module's",
    )


# The docstring examples that take 4 s or more (the `slow` marker's threshold, pytest.ini),
# which no decorator can mark: tests/test_conftest.py checks each still names one.
SLOW_DOCTESTS = (
    "keras_attn/models/pretrained.py::keras_attn.models.pretrained.from_gguf",  # 9.4 s
    "keras_attn/export/litert_export.py::keras_attn.export.litert_export.export_litert",  # 9.0
    "keras_attn/models/distillation/distiller.py::"
    "keras_attn.models.distillation.distiller.Distiller",  # 6.0 s
    "keras_attn/models/llama/llama_language_model.py::"
    "keras_attn.models.llama.llama_language_model.RMSNormDecoder.save_gguf",
    # 4.6-5.8 s each in `make test-fast` (two workers, the machine quiet)
    "keras_attn/data/ernie_pretraining.py::keras_attn.data.ernie_pretraining.ernie_pretraining_example",
    "keras_attn/data/graph_linking.py::keras_attn.data.graph_linking.mention_typing_inputs",
    "keras_attn/export/openvino_export.py::keras_attn.export.openvino_export.export_openvino",
    "keras_attn/export/saved_model.py::keras_attn.export.saved_model.export_saved_model",
)


def pytest_collection_modifyitems(config, items):
    """On JAX or PyTorch, only the tests marked for that backend are selected.

    The order stays the collection's but for the tests that start processes which wait
    on each other (`tests.training.runs.MULTI_PROCESS`, one xdist group), put first:
    `--dist loadgroup` deals the groups first, largest first (ties in this order), then
    the ungrouped tests in this order, so theirs starts within the first minutes, on one
    worker while the other goes on with the rest, rather than near the end, where the
    other worker could wait for it. Dealing all the slow tests first (so that the last
    ones are short) was measured slower on the 2-core machine: 1,616 s against 1,342 s
    for the TensorFlow part, both workers then running the tests that start processes
    of their own (two-process runs, racing exports, 8 host devices) at the same time."""
    backend = keras.config.backend()
    selected, deselected = [], []
    for item in items:
        if item.nodeid.startswith("keras_attn/layers/"):  # the layers' docstring examples
            item.add_marker(pytest.mark.backends("tensorflow", "jax", "torch"))
        if item.nodeid in SLOW_DOCTESTS:
            item.add_marker(pytest.mark.slow)
        marker = item.get_closest_marker("backends")
        (
            selected if backend in (marker.args if marker else ("tensorflow",)) else deselected
        ).append(item)
    if deselected:
        config.hook.pytest_deselected(items=deselected)
    items[:] = sorted(selected, key=lambda item: _group(item) != "multi_process")  # stable


def _group(item):
    marker = item.get_closest_marker("xdist_group")
    return marker and (marker.args[0] if marker.args else marker.kwargs.get("name"))


_THAW_EVERY = 80
_WIDER_SCOPES = ("class", "module", "package")
# Whether a test of the running module used a wider-scoped fixture; tests since the last thaw.
_MODULE_HELD, _SINCE_THAW = [False], [0]


@pytest.fixture(autouse=True)
def _fresh_keras_state(request):
    """Every test starts with a seeded RNG and the float32 policy, and leaves them so,
    and Keras's state is cleared after it (`pytest_runtest_teardown` then collects)."""
    keras.utils.set_random_seed(1234)
    keras.config.set_dtype_policy("float32")
    marker = request.node.get_closest_marker("eager")  # the test's own, else its module's
    if marker and (not marker.args or marker.args[0]) and keras.config.backend() == "tensorflow":
        from tests.helpers import eagerly

        with eagerly():
            yield
    else:
        yield
    keras.config.set_dtype_policy("float32")
    keras.backend.clear_session(free_memory=False)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    """After each test's teardown (its module's fixtures included, where the next test is
    in another module), Python's cyclic garbage collector runs over what the test left,
    and the survivors are frozen (`gc.freeze`): later collections skip them.

    Without the freeze every full collection walks a worker's whole heap, grown by
    hundreds of tests: run after each test that took about a second (750 s of a
    41-minute run's summed time); left to Python's own schedule, 370 s of a 29.5-minute
    run, in pauses of up to 37 s. But a frozen object is never collected: a model alive
    at one freeze (a module's fixture, a cache) and garbage later stayed for the rest of
    the session, and workers grew to 13.6 and 7.3 GB of 24, starving the tests that
    start processes (a CI run's two multi-process tests timed out). So the frozen
    objects are thawed and collected with the rest where that garbage is made: when a
    module whose tests used class-, module- or package-scoped fixtures has ended. A
    thaw walks the whole heap (2-2.5 s late in a run); thawing every 10 tests instead
    put 300 s of a slow run's 5,250 summed into them. A thaw comes at the latest every
    `_THAW_EVERY` tests, for garbage of any other kind. A teardown that fails is
    collected after too."""
    try:
        return (yield)
    finally:
        _collect(item, nextitem)


def _collect(item, nextitem):
    definitions = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})
    if any(d[-1].scope in _WIDER_SCOPES for d in definitions.values() if d):
        _MODULE_HELD[0] = True
    module = item.getparent(pytest.Module)
    ended = nextitem is None or nextitem.getparent(pytest.Module) is not module
    _SINCE_THAW[0] += 1
    thaw = (ended and _MODULE_HELD[0]) or _SINCE_THAW[0] >= _THAW_EVERY
    if ended:
        _MODULE_HELD[0] = False
    if thaw:
        _SINCE_THAW[0] = 0
        gc.unfreeze()
    gc.collect()  # the objects made since the last freeze (all, after a thaw)
    gc.freeze()


@pytest.fixture(autouse=True)
def _doctest_temporary_folder(request):
    """A docstring example's `tempfile.mkdtemp()` folders are removed when it passes.

    The examples make their folders as a user would; left in /tmp, a suite's run leaves
    hundreds of them."""
    if not isinstance(request.node, pytest.DoctestItem):
        yield
        return
    folder = tempfile.mkdtemp(prefix="doctest-")
    tempfile.tempdir = folder
    yield
    tempfile.tempdir = None
    if request.node.stash.get(_passed, False):
        shutil.rmtree(folder, ignore_errors=True)


_passed = pytest.StashKey[bool]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if call.when == "call":
        item.stash[_passed] = report.passed
    return report


# The client's docstring examples talk to TF Serving's ports (8501 REST, 8500 gRPC),
# as a user's would after the README's `docker run`. In tests a stand-in answers
# (tests/export/stand_in_server.py) from a small exported "sentiment" classifier, on
# free ports: the examples' addresses are pointed at them before each runs (a CI
# machine may have something else on 8500/8501).
_SERVED_DOCTESTS = {
    f"keras_attn.export.client.{name}" for name in ("predict_rest", "predict_grpc", "classify_grpc")
}


@pytest.fixture(scope="session")
def _sentiment_server(tmp_path_factory):
    from keras_attn.data import WordPieceTokenizer
    from keras_attn.export import export_saved_model
    from keras_attn.models import BertBackbone, BertClassifier
    from tests.export.stand_in_server import StandInServer

    vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "charming", "film", "."]
    model = BertClassifier(
        BertBackbone.from_size("tiny", vocabulary_size=len(vocabulary)), num_classes=2
    )
    base = tmp_path_factory.mktemp("served")
    export_saved_model(
        model,
        WordPieceTokenizer(vocabulary, sequence_length=16),
        base / "sentiment" / "1",
        labels=["rotten", "fresh"],
    )
    server = StandInServer(base, "sentiment").__enter__()
    yield server
    server.__exit__(None, None, None)


@pytest.fixture(autouse=True)
def _serve_for_client_doctests(request):
    if request.node.name in _SERVED_DOCTESTS:
        server = request.getfixturevalue("_sentiment_server")
        for example in request.node.dtest.examples:
            example.source = example.source.replace(
                "localhost:8501", f"127.0.0.1:{server.rest_port}"
            ).replace("localhost:8500", f"127.0.0.1:{server.grpc_port}")
