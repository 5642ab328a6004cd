"""The signatures of each model family (one module each), found through `registry`.

Importing this package registers every family: classifier, tagger, span QA,
multiple choice, backbone, and the generation models. A new family is one module
with one `@serves(ModelClass, option=default)` builder, imported here.
"""

from keras_attn.export.signatures import (backbone, classifier, generation, multiple_choice, span_qa,  # noqa: F401
                                          tagger)
from keras_attn.export.signatures.registry import model_signatures, serves

__all__ = ["model_signatures", "serves"]
