"""The knowledge graph's vectors in a model (internal): ERNIE's entity table and KagNet's
concept table load them the same way."""

import numpy as np


def load_graph_vectors(embedding, vectors, what):
    """Loads `vectors` `(rows, width)` (TransE's, in id order from 1) into `embedding`'s
    table, whose row 0 (no entity, padding) becomes zeros; `what` (`"entity"`,
    `"concept"`) names them in the errors."""
    vectors = np.asarray(vectors, "float32")
    rows, width = embedding.input_dim - 1, embedding.output_dim
    if vectors.shape != (rows, width):
        raise ValueError(
            f"Expected {what} vectors of shape {(rows, width)} (num_{what}s, {what}_dim). "
            f"Received: {vectors.shape}"
        )
    if not np.isfinite(vectors).all():
        raise ValueError(f"Expected finite {what} vectors. Received: NaN or inf among them")
    embedding.embeddings.assign(np.concatenate([np.zeros((1, width), "float32"), vectors]))
