"""Process-wide test settings (also applies to the doctests under keras_attn/)."""

import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import pytest  # noqa: E402

# keras_attn/__main__.py runs the demo; it is not a module to collect.
collect_ignore = ["keras_attn/__main__.py"]


@pytest.fixture(autouse=True)
def _fresh_keras_state():
    """Every test starts with a seeded RNG and the float32 policy, and leaves them so."""
    keras.utils.set_random_seed(1234)
    keras.config.set_dtype_policy("float32")
    yield
    keras.config.set_dtype_policy("float32")
    keras.backend.clear_session()
