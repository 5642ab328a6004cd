"""The signatures of each kind of model (one module each), found through `registry`.

`registry.MODULES` names the modules (encoder, classifier, tagger, span QA, multiple
choice, fill-mask, the generation models); each registers its builder for a kind of signatures
when imported, which `model_signatures` does on first use. Which kind a model serves
is its family's word (`keras_attn.models.registry.Family.signatures`).
"""

from keras_attn.export.signatures.signature_kinds import model_signatures, serves

__all__ = ["model_signatures", "serves"]
