"""The suite's own harness (conftest.py): when a worker's frozen garbage is thawed, that
the backend-neutral files `make test-backends` runs import no TensorFlow when loaded, that
the docstring examples it marks slow exist, and that ops traced in the test process share
one short stack."""

import ast
import gc
import itertools
import os
import pathlib
import types

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
ROOT_CONFTEST = ROOT / "conftest.py"


def _harness(request):
    """The root conftest.py as pytest loaded it (the plugin whose hooks run)."""
    (harness,) = [
        plugin
        for plugin in request.config.pluginmanager.get_plugins()
        if pathlib.Path(getattr(plugin, "__file__", "") or "") == ROOT_CONFTEST
    ]
    return harness


def _item(module, *scopes):
    """A stand-in for a test item of `module` whose fixtures have these scopes."""
    definitions = {f"f{i}": [types.SimpleNamespace(scope=s)] for i, s in enumerate(scopes)}
    return types.SimpleNamespace(
        getparent=lambda kind: module if kind is pytest.Module else None,
        _fixtureinfo=types.SimpleNamespace(name2fixturedefs=definitions),
    )


def test_a_thaw_comes_when_a_module_with_wider_fixtures_ends_or_40_tests_on(request, monkeypatch):
    harness = _harness(request)
    thaws, done = [], itertools.count(1)
    monkeypatch.setattr(gc, "unfreeze", lambda: thaws.append(test))
    monkeypatch.setattr(harness, "_MODULE_HELD", [False])
    monkeypatch.setattr(harness, "_SINCE_THAW", [0])
    first, second, third = object(), object(), object()
    for item, following in [
        (_item(first, "function", "module"), _item(first)),  # test 1: its module goes on
        (_item(first, "function"), _item(second)),  # 2: first ends, a test of it held one
        (_item(second, "session", "function"), _item(third)),  # 3: second held none
        (_item(third, "class"), None),  # 4: the last test
    ]:
        test = next(done)
        harness._collect(item, following)
    assert thaws == [2, 4]
    while test < 4 + 2 * harness._THAW_EVERY:  # at the latest every _THAW_EVERY tests
        test = next(done)
        harness._collect(_item(third), _item(third))
    assert thaws == [2, 4, 4 + harness._THAW_EVERY, 4 + 2 * harness._THAW_EVERY]


def _backend_neutral_files():
    """The Python files under the Makefile's BACKEND_NEUTRAL paths."""
    text = (ROOT / "Makefile").read_text(encoding="utf-8").replace("\\\n", " ")
    (line,) = [x for x in text.splitlines() if x.startswith("BACKEND_NEUTRAL :=")]
    files = set()
    for word in line.partition(":=")[2].replace("$(wildcard", " ").split():
        for path in ROOT.glob(word.rstrip(")")):
            files |= {path} if path.is_file() else set(path.rglob("*.py"))
    return sorted(files)


def _module_file(name):
    """The file of `tests...` or `keras_attn...` module `name`, or None."""
    path = ROOT.joinpath(*name.split("."))
    for candidate in (path.with_suffix(".py"), path / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _loaded_at_import(path, seen):
    """The modules `path` imports when loaded (its module-level imports), following
    this project's own modules (`tests`, `keras_attn`) through theirs."""
    if path in seen:
        return []
    seen.add(path)
    loaded = []
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        else:
            continue
        for name in names:
            loaded.append((path, name))
            own = name.split(".")[0] in ("tests", "keras_attn") and _module_file(name)
            if own:
                loaded += _loaded_at_import(own, seen)
    return loaded


def test_backend_neutral_files_import_no_tensorflow_when_loaded():
    """On JAX and PyTorch `import tensorflow` fails (conftest.py): a file there that
    imports it when loaded, itself or through a module of this project it imports, fails
    to collect; inside a TensorFlow-only test's body it is fine."""
    files = _backend_neutral_files()
    assert ROOT / "tests/layers/test_int8_products.py" in files
    assert ROOT / "tests/models/ernie/test_ernie_family.py" in files
    seen = set()
    loaded = [
        f"{path.relative_to(ROOT)}: {name}"
        for file in files
        for path, name in _loaded_at_import(file, seen)
        if name.split(".")[0] in ("tensorflow", "tensorflow_text")
    ]
    assert loaded == []
    assert ROOT / "keras_attn/layers/__init__.py" in seen  # followed into the package


def test_each_slow_doctest_names_a_docstring_example(request):
    """`SLOW_DOCTESTS` (marked slow at collection) names docstring examples that exist:
    a renamed one would otherwise slip back into `make test-fast` unnoticed."""
    import importlib

    harness = _harness(request)
    assert harness.SLOW_DOCTESTS
    for nodeid in harness.SLOW_DOCTESTS:
        path, name = nodeid.split("::")
        module_name = path.removesuffix(".py").replace("/", ".")
        assert name.startswith(f"{module_name}."), nodeid
        target = importlib.import_module(module_name)
        for part in name.removeprefix(f"{module_name}.").split("."):
            target = getattr(target, part)
        assert ">>> " in (target.__doc__ or ""), nodeid


@pytest.mark.skipif(
    os.environ.get("KERAS_ATTN_TEST_OP_STACKS") == "1", reason="op stacks asked for"
)
def test_ops_traced_in_the_test_process_share_one_short_stack():
    """TensorFlow's record of the Python stack at each op is replaced in the test
    process (20% of a traced test's time under pytest's deep stacks): every op gets the
    same few frames, whose last names the harness, and a graph error still names its
    cause."""
    import tensorflow as tf

    @tf.function
    def out_of_range(x):
        return tf.gather(x, 5)

    graph = out_of_range.get_concrete_function(tf.TensorSpec([2], tf.int32)).graph
    gathers = [op for op in graph.get_operations() if op.type == "GatherV2"]
    frames = [frame.name for frame in gathers[0].traceback]
    assert frames[-1] == "op_stacks_are_not_recorded_in_tests_see_conftest"
    assert len(frames) < 10
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"indices = 5 is not in \[0, 2\)"):
        out_of_range(tf.constant([1, 2]))
