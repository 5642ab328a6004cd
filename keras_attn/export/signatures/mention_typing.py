"""`EntityTyping`: the type of a mention in raw text, entity linking in the graph."""

import numpy as np
import tensorflow as tf

from keras_attn.export.signatures import common
from keras_attn.export.signatures.signature_kinds import serves


def _linker(entities, model):
    """WordNet's linking of the model's entities (a list or a file of synsets in id
    order, checked against the backbone's table); `None` for a text-only backbone."""
    from keras_attn.data import GraphLinker

    wanted = getattr(model.backbone, "num_entities", None)
    if wanted is None:
        return None
    if entities is None:
        raise ValueError(
            "Expected `entities`: the synsets of the model's entity ids 1.."
            f"{wanted} (a list or a file, one per line), to link raw text. Received: None"
        )
    return GraphLinker.from_entities(entities, wanted)


@serves("entity_typing", labels=None, entities=None, marker="[ENT]")
def entity_typing_signatures(model, tokenizer, labels, entities, marker):
    """`serving_default`: `text`, `mention_start`, `mention_end` (characters) -> the
    mention's type; entity linking in the graph (`GraphLinker`); `serve_token_ids`."""
    from keras_attn.data import mention_typing_inputs

    names = common.label_names(labels, model.num_classes)
    linker = _linker(entities, model)
    if marker not in tokenizer.vocabulary:
        raise ValueError(f"Expected the marker {marker!r} in the tokenizer's vocabulary")
    marker_id = tokenizer.vocabulary.index(marker)

    def classify(inputs):
        if linker is None:  # a text-only backbone: serve_token_ids' entities are unread
            inputs = {k: v for k, v in inputs.items() if k != "entity_ids"}
        logits = common.float32(model(inputs, training=False))
        probabilities = tf.nn.softmax(logits, axis=-1)
        label_ids = tf.argmax(probabilities, axis=-1)
        return logits, probabilities, label_ids, tf.gather(names, label_ids)

    def serve_text(text, mention_start, mention_end):
        inputs, has_target = mention_typing_inputs(
            tokenizer, common.clean_text(text), mention_start, mention_end, marker_id, linker
        )
        _, probabilities, label_ids, labels = classify(inputs)
        return {
            "probabilities": probabilities,
            # A mention no piece covers (empty, reversed, out of range, cut): no type.
            "label_ids": tf.where(has_target, label_ids, -1),
            "labels": tf.where(has_target, labels, ""),
        }

    def serve_token_ids(token_ids, segment_ids, padding_mask, entity_ids, marker_positions):
        logits, probabilities, _, _ = classify({
            "token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": padding_mask,
            "entity_ids": entity_ids, "marker_positions": marker_positions,
        })  # fmt: skip
        return {"logits": logits, "probabilities": probabilities}

    texts = ["a giraffe ate", "the geese by the seashore"]
    offsets = {"mention_start": [2, 4], "mention_end": [9, 9]}
    warm = {"text": texts, **{k: np.array(v, "int32") for k, v in offsets.items()}}
    signatures = common.Signatures()
    signatures.add(
        "serving_default",
        serve_text,
        [common.strings("text"), common.ids("mention_start", 1), common.ids("mention_end", 1)],
        warm,
    )
    example, _ = mention_typing_inputs(
        tokenizer, texts, offsets["mention_start"], offsets["mention_end"], marker_id, linker
    )
    example.setdefault("entity_ids", tf.zeros_like(example["token_ids"]))
    signatures.add(
        "serve_token_ids",
        serve_token_ids,
        [*common.token_id_specs(), common.ids("entity_ids"), common.ids("marker_positions", 1)],
        {k: v.numpy() for k, v in example.items()},
    )
    if linker is not None:
        signatures.tracked.append(linker)
        signatures.assets["WORDNET_LICENSE"] = linker.license
    return signatures
