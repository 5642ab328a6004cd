"""TransE (Bordes et al., 2013): entities and relations as vectors, a fact `(h, r, t)`
scored by how near `h + r` lands to `t`; the margin ranking loss against corrupted
facts; filtered rank evaluation (MRR, hits@k). `keras.ops`: every backend."""

import keras
import numpy as np
from keras import ops

from keras_attn.api_export import keras_attn_export


class _UnitRows(keras.initializers.Initializer):
    """Bordes et al.'s initialisation: uniform in `±6/√d`, each row then scaled to unit
    L2 norm."""

    def __init__(self, seed=None):
        self.seed = seed

    def __call__(self, shape, dtype=None):
        bound = 6.0 / np.sqrt(shape[-1])
        values = keras.random.uniform(shape, -bound, bound, dtype=dtype, seed=self.seed)
        return values / ops.sqrt(ops.sum(ops.square(values), axis=-1, keepdims=True))

    def get_config(self):
        return {"seed": self.seed}


@keras_attn_export("keras_attn.knowledge.TransE")
class TransE(keras.Model):
    """TransE: a fact `(head, relation, tail)` scores `-‖e_h + r - e_t‖_p`.

    Entity vectors are kept on the unit sphere (a `UnitNorm` constraint applied after
    every update, Bordes et al.'s Algorithm 1 normalising before every batch); relation
    vectors are initialised on it and then left free, as in the paper.

    Args:
        num_entities: how many entities (rows of `entity_embedding`).
        num_relations: how many relations.
        embedding_dim: the vectors' size (the paper: 20 or 50).
        norm: the dissimilarity, 1 (L1) or 2 (L2).
        margin: the ranking loss's margin γ.
        seed: the initialisers' seed.

    Call arguments:
        triples: int `(batch, 3)`: head, relation and tail ids; or a dict with
            `"positive"` and `"negative"` `(batch, 3)` (training: both scored).

    Returns:
        Scores `(batch,)` (higher: more plausible); for the dict, `(batch, 2)`: each
        positive's and negative's score, which `margin_ranking_loss` reads.

    Example:

    >>> import numpy as np
    >>> from keras_attn.knowledge import TransE
    >>> model = TransE(num_entities=5, num_relations=2, embedding_dim=4, seed=0)
    >>> tuple(model(np.array([[0, 1, 2], [3, 0, 4]])).shape)
    (2,)
    """

    def __init__(
        self, num_entities, num_relations, embedding_dim=50, norm=1, margin=1.0, seed=None, **kwargs
    ):
        super().__init__(**kwargs)
        for name, value in (
            ("num_entities", num_entities),
            ("num_relations", num_relations),
            ("embedding_dim", embedding_dim),
        ):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"Expected `{name}` an int >= 1. Received: {name}={value!r}")
        if norm not in (1, 2):
            raise ValueError(f"Expected `norm` 1 or 2. Received: norm={norm!r}")
        if not margin > 0:
            raise ValueError(f"Expected `margin` > 0. Received: margin={margin!r}")
        self.num_entities, self.num_relations = num_entities, num_relations
        self.embedding_dim, self.norm, self.margin, self.seed = embedding_dim, norm, margin, seed
        self.entity_embedding = keras.layers.Embedding(
            num_entities,
            embedding_dim,
            embeddings_initializer=_UnitRows(seed),
            embeddings_constraint=keras.constraints.UnitNorm(axis=1),
            name="entity_embedding",
        )
        self.relation_embedding = keras.layers.Embedding(
            num_relations,
            embedding_dim,
            embeddings_initializer=_UnitRows(None if seed is None else seed + 1),
            name="relation_embedding",
        )
        self.build()  # the vectors exist from the start (`score_all` reads them)

    def build(self, input_shape=None):
        self.entity_embedding.build((None,))
        self.relation_embedding.build((None,))
        self.built = True

    def distance(self, heads, relations, tails):
        """`‖e_h + r - e_t‖_p` of id tensors of one shape."""
        gap = (
            self.entity_embedding(heads)
            + self.relation_embedding(relations)
            - self.entity_embedding(tails)
        )
        if self.norm == 1:
            return ops.sum(ops.abs(gap), axis=-1)
        return ops.sqrt(ops.sum(ops.square(gap), axis=-1) + 1e-12)

    def score(self, triples):
        """Scores `(batch,)` of int triples `(batch, 3)`."""
        triples = ops.cast(triples, "int32")
        return -self.distance(triples[:, 0], triples[:, 1], triples[:, 2])

    def score_all(self, heads, relations, tails, side="tail"):
        """NumPy scores `(batch, num_entities)` of every entity in the `side` slot
        (`"tail"`: `(h, r, ?)`; `"head"`: `(?, r, t)`), for `filtered_ranks`."""
        entities = np.asarray(self.entity_embedding.embeddings, "float32")
        relation = np.asarray(self.relation_embedding.embeddings, "float32")[relations]
        if side == "tail":
            query = entities[heads] + relation  # near the tail
        elif side == "head":
            query = entities[tails] - relation  # near the head
        else:
            raise ValueError(f"Expected `side` 'tail' or 'head'. Received: side={side!r}")
        gap = query[:, None, :] - entities[None]
        distance = np.abs(gap).sum(-1) if self.norm == 1 else np.sqrt((gap**2).sum(-1) + 1e-12)
        return -distance

    def call(self, triples):
        if isinstance(triples, dict):
            return ops.stack([self.score(triples["positive"]), self.score(triples["negative"])], 1)
        return self.score(triples)

    def compile(self, optimizer="sgd", loss=None, **kwargs):
        """Defaults: SGD (the paper's) and `margin_ranking_loss(self.margin)`."""
        super().compile(
            optimizer=optimizer, loss=loss or margin_ranking_loss(self.margin), **kwargs
        )

    def get_config(self):
        config = super().get_config()
        config.update(
            num_entities=self.num_entities,
            num_relations=self.num_relations,
            embedding_dim=self.embedding_dim,
            norm=self.norm,
            margin=self.margin,
            seed=self.seed,
        )
        return config


@keras_attn_export("keras_attn.knowledge.margin_ranking_loss")
def margin_ranking_loss(margin=1.0):
    """The loss `max(0, γ + d(positive) - d(negative))` of `TransE`'s `(batch, 2)`
    scores (scores are negated distances), averaged over the batch.

    Example:

    >>> import numpy as np
    >>> from keras_attn.knowledge import margin_ranking_loss
    >>> float(margin_ranking_loss(1.0)(None, np.array([[-0.5, -1.0], [-2.0, -0.5]])))
    1.5
    """

    def loss(y_true, scores):
        scores = ops.convert_to_tensor(scores)
        return ops.mean(ops.relu(margin - scores[:, 0] + scores[:, 1]))

    return loss


@keras_attn_export("keras_attn.knowledge.corrupted_batches")
def corrupted_batches(triples, num_entities, batch_size=128, seed=0):
    """Endless `({"positive", "negative"}, zeros)` batches for `TransE.fit`: shuffled
    facts, each with its head or its tail (a coin flip) replaced by a uniformly drawn
    entity, as in Bordes et al. (the corrupted fact may be true: the paper does not
    filter).

    Example:

    >>> import numpy as np
    >>> from keras_attn.knowledge import corrupted_batches
    >>> x, y = next(corrupted_batches(np.array([[0, 0, 1], [1, 0, 2]]), 3, batch_size=2))
    >>> x["negative"].shape, bool((x["negative"][:, 1] == x["positive"][:, 1]).all())
    ((2, 3), True)
    """
    triples = np.asarray(triples, "int32")
    if triples.ndim != 2 or triples.shape[1] != 3 or not len(triples):
        raise ValueError(f"Expected `triples` int (facts, 3). Received shape: {triples.shape}")
    rng = np.random.default_rng(seed)
    while True:
        for start in range(0, max(len(triples) - batch_size + 1, 1), batch_size):
            if start == 0:
                order = rng.permutation(len(triples))
            positive = triples[order[start : start + batch_size]]
            negative = positive.copy()
            column = np.where(rng.random(len(positive)) < 0.5, 0, 2)
            negative[np.arange(len(positive)), column] = rng.integers(
                0, num_entities, len(positive)
            )
            yield {"positive": positive, "negative": negative}, np.zeros(len(positive), "float32")


@keras_attn_export("keras_attn.knowledge.filtered_ranks")
def filtered_ranks(score_all, triples, known, num_entities, batch_size=64):
    """The filtered rank of each fact's tail among all entities (given its head and
    relation) and of its head (given its relation and tail), the "filtered" setting of
    Bordes et al.: other known facts are not counted as ranked above. Ties count half.

    Args:
        score_all: `(heads, relations, tails, side) -> (batch, num_entities)` scores,
            `side` `"tail"` or `"head"`: every entity in that slot.
        triples: int `(facts, 3)` to rank.
        known: every true fact (training, validation, test) as a set of tuples.
        num_entities: how many entities.
        batch_size: facts scored at once.

    Returns:
        int ranks `(2 * facts,)`: tails first, then heads; 1 is best.

    Example:

    >>> import numpy as np
    >>> from keras_attn.knowledge import filtered_ranks
    >>> def score_all(heads, relations, tails, side):  # entity 2 scores highest
    ...     return np.tile([0.0, 1.0, 2.0], (len(heads), 1))
    >>> # (0, r, 1): entity 2 ranks above the tail unless (0, r, 2) is a known fact.
    >>> filtered_ranks(score_all, [[0, 0, 1]], {(0, 0, 1)}, 3).tolist()
    [2, 3]
    >>> filtered_ranks(score_all, [[0, 0, 1]], {(0, 0, 1), (0, 0, 2)}, 3).tolist()
    [1, 3]
    """
    tails_of, heads_of = {}, {}
    for h, r, t in known:
        tails_of.setdefault((h, r), set()).add(t)
        heads_of.setdefault((r, t), set()).add(h)
    ranks = []
    for side, others in (("tail", tails_of), ("head", heads_of)):
        for start in range(0, len(triples), batch_size):
            chunk = np.asarray(triples[start : start + batch_size])
            scores = np.array(score_all(chunk[:, 0], chunk[:, 1], chunk[:, 2], side), "float64")
            for row, (h, r, t) in enumerate(chunk.tolist()):
                truth = t if side == "tail" else h
                key = (h, r) if side == "tail" else (r, t)
                target = scores[row, truth]
                above = scores[row] > target
                ties = scores[row] == target
                for other in others.get(key, ()):
                    above[other] = ties[other] = False
                ranks.append(1 + int(above.sum()) + int(ties.sum()) // 2)
    return np.asarray(ranks)


@keras_attn_export("keras_attn.knowledge.read_entity_vectors")
def read_entity_vectors(path, max_bytes=4 << 30):
    """`(synsets, vectors)` from an `entity_vectors.npz` (`examples/transe_wordnet.py`
    writes one: `synsets`, a string per entity, and `vectors`, float `(entities, dim)`),
    checked before it is trusted: no pickles, each array's declared size within the
    file's and `max_bytes`, one finite row per distinct synset.

    Example:

    >>> import tempfile, numpy as np
    >>> from keras_attn.knowledge import read_entity_vectors
    >>> path = tempfile.mkdtemp() + "/entity_vectors.npz"
    >>> np.savez(path, synsets=np.array(["02084071-n", "02075296-n"]), vectors=np.eye(2, 4))
    >>> synsets, vectors = read_entity_vectors(path)
    >>> synsets, vectors.shape, vectors.dtype
    (['02084071-n', '02075296-n'], (2, 4), dtype('float32'))
    """
    import zipfile

    from numpy.lib import format as npy_format

    def refuse(why):
        raise ValueError(f"{path}: not usable entity vectors: {why}")

    try:
        with zipfile.ZipFile(path) as archive:
            members = {info.filename: info for info in archive.infolist()}
            for name in ("synsets.npy", "vectors.npy"):
                if name not in members:
                    refuse(f"no {name[:-4]!r} array (expected 'synsets' and 'vectors')")
                with archive.open(name) as member:
                    version = npy_format.read_magic(member)
                    if version not in ((1, 0), (2, 0)):
                        refuse(f"{name[:-4]!r} has .npy format version {version}")
                    read_header = getattr(npy_format, f"read_array_header_{version[0]}_0")
                    shape, _, dtype = read_header(member)
                claimed = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
                stored_size = members[name].file_size
                if dtype.hasobject or claimed > min(stored_size, max_bytes):
                    refuse(f"{name[:-4]!r} claims {claimed:,} bytes of {dtype} (the file "
                           f"holds {stored_size:,}; at most {max_bytes:,})")  # fmt: skip
    except (OSError, zipfile.BadZipFile) as error:
        refuse(f"cannot read it as an .npz file ({error})")
    with np.load(path, allow_pickle=False) as stored:
        synsets, vectors = stored["synsets"], stored["vectors"]
    if synsets.ndim != 1 or synsets.dtype.kind not in "US":
        refuse(f"'synsets' must be a 1-D string array, got {synsets.dtype} {synsets.shape}")
    if vectors.ndim != 2 or vectors.dtype.kind != "f" or 0 in vectors.shape:
        refuse(f"'vectors' must be a 2-D float array, got {vectors.dtype} {vectors.shape}")
    synsets = [str(s) for s in synsets]
    if len(synsets) != len(vectors) or len(set(synsets)) != len(synsets):
        refuse(f"{len(set(synsets))} distinct synsets of {len(synsets)} for {len(vectors)} rows")
    if not np.isfinite(vectors).all():
        refuse("NaN or inf among the vectors")
    return synsets, vectors.astype("float32")
