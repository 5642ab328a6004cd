"""The public API is declared once (`keras_attn_export`) and re-exported explicitly."""

import importlib
import pathlib
import re

import keras

import keras_attn
from keras_attn import data, evaluation, export, knowledge, layers, models, training, visualize
from keras_attn.api_export import EXPORTED, PACKAGE, keras_attn_export
from keras_attn.layers import scoring

TESTS = pathlib.Path(__file__).parent


def _family_packages():
    """Each family folder's package (`keras_attn.models.roberta`), its names included."""
    return [
        (f"keras_attn.models.{name}", importlib.import_module(f"keras_attn.models.{name}"))
        for name in models.registry.discover()
    ]


def _reexported():
    names = {}
    for module_name, module in (
        ("keras_attn.layers", layers),
        ("keras_attn.layers.scoring", scoring),
        ("keras_attn.models", models),
        ("keras_attn.data", data),
        ("keras_attn.evaluation", evaluation),
        ("keras_attn.knowledge", knowledge),
        ("keras_attn.training", training),
        ("keras_attn.visualize", visualize),
        ("keras_attn.export", export),
        ("keras_attn.export.client", export.client),
        *_family_packages(),
    ):
        for name in getattr(module, "__all__", ()):
            symbol = getattr(module, name)
            if callable(symbol):
                names[f"{module_name}.{name}"] = symbol
    return names


# The sub-packages load lazily: touch every re-exported name once, so every declaration
# (made when its module is imported) is in EXPORTED before the tests below read it.
REEXPORTED = _reexported()


def test_declared_and_reexported_names_agree():
    declared = dict(EXPORTED)
    reexported = REEXPORTED
    # Scoring classes are exported once, under keras_attn.layers, and also appear
    # in keras_attn.layers.scoring's namespace; compare by symbol.
    assert set(declared.values()) == set(reexported.values())
    for path, symbol in declared.items():
        module, _, name = path.rpartition(".")
        assert getattr(importlib.import_module(module), name) is symbol, path


def test_every_public_class_is_registered_for_serialization():
    for path, symbol in EXPORTED.items():
        is_layer = isinstance(symbol, type) and issubclass(symbol, keras.layers.Layer)
        if is_layer or path.endswith("gelu_approximate"):
            registered = keras.saving.get_registered_object(f"{PACKAGE}>{symbol.__name__}")
            assert registered is symbol, path


def test_every_public_name_has_a_test():
    sources = "\n".join(
        p.read_text() for p in TESTS.rglob("test_*.py") if p.name != "test_public_api.py"
    )
    for path, symbol in EXPORTED.items():
        assert re.search(rf"[\s.(=]{symbol.__name__}\(", sources), f"no test calls {path}"


def test_every_public_name_has_a_docstring_with_an_example():
    for path, symbol in EXPORTED.items():
        doc = symbol.__doc__ or ""
        assert "Example:" in doc and ">>>" in doc, path
        if isinstance(symbol, type):
            assert "Args:" in doc and "Call arguments:" in doc, path


def test_export_rejects_bad_paths():
    import pytest

    with pytest.raises(ValueError, match="Received: path='layers.X'"):
        keras_attn_export("layers.X")


def test_version():
    assert keras_attn.__version__.count(".") == 2


def test_importing_the_package_quiets_tensorflow_s_native_info_lines_unless_set():
    import os
    import subprocess
    import sys

    code = "import keras_attn, os; print(os.environ['TF_CPP_MIN_LOG_LEVEL'])"
    environment = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    for given, expected in ((None, "2"), ("0", "0")):
        if given is not None:
            environment["TF_CPP_MIN_LOG_LEVEL"] = given
        result = subprocess.run(
            [sys.executable, "-c", code], env=environment, capture_output=True, text=True
        )
        assert result.stdout.strip() == expected, result.stderr[-2000:]
