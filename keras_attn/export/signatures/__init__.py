"""The signatures of each model family (one module each), found through `registry`.

`registry.FAMILIES` names the family modules (classifier, tagger, span QA, multiple
choice, backbone, the generation models); each registers its builder when imported,
which `model_signatures` does on first use. A new family is one module with one
`@serves(ModelClass, option=default)` builder, named in `FAMILIES`.
"""

from keras_attn.export.signatures.registry import model_signatures, serves

__all__ = ["model_signatures", "serves"]
