"""ELMo's bidirectional LSTM language model (Peters et al., 2018)."""

import keras
import numpy as np
from keras import ops

from keras_attn.api_export import keras_attn_export
from keras_attn.argument_checks import check_non_negative_int, check_positive_int, check_rate
from keras_attn.layers import Dropout
from keras_attn.models.functional_model import FunctionalModel

BEGIN_OF_WORD, END_OF_WORD, FIRST_BYTE = 1, 2, 3  # character ids; 0 pads
NUM_CHARACTERS = FIRST_BYTE + 256


@keras_attn_export("keras_attn.models.character_table", serializable=False)
def character_table(vocabulary, max_characters=50):
    """Each vocabulary entry spelt as character ids, for `ElmoBiLM`'s character CNN.

    ELMo's encoding: the word's UTF-8 bytes between a begin- and an end-of-word mark,
    cut to `max_characters`, padded with 0. WordPiece's `##` continuation mark is kept
    (a continuation is spelt differently from a word start, as it should be).

    Args:
        vocabulary: the token strings, in id order.
        max_characters: characters per token, marks included (ELMo: 50).

    Returns:
        An int32 array `(len(vocabulary), max_characters)`.

    Example:

    >>> from keras_attn.models import character_table
    >>> character_table(["[PAD]", "ab"], max_characters=5)[1].tolist()  # "a" is byte 97
    [1, 100, 101, 2, 0]
    """
    check_positive_int("max_characters", max_characters)
    if max_characters < 3:
        raise ValueError(f"Expected `max_characters` >= 3. Received: {max_characters}")
    table = np.zeros((len(vocabulary), max_characters), "int32")
    for row, token in enumerate(vocabulary):
        ids = [b + FIRST_BYTE for b in str(token).encode("utf-8")][: max_characters - 2]
        table[row, : len(ids) + 2] = [BEGIN_OF_WORD, *ids, END_OF_WORD]
    return table


def _check_character_cnn(max_characters, filters, highway_layers):
    check_positive_int("max_characters", max_characters)
    check_non_negative_int("highway_layers", highway_layers)
    pairs = list(filters) if isinstance(filters, (list, tuple)) else None
    if not pairs or not all(
        isinstance(pair, (list, tuple))
        and len(pair) == 2
        and all(isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in pair)
        for pair in pairs
    ):
        raise ValueError(
            f"Expected `filters` to be a non-empty list of (width, count) pairs of positive "
            f"ints. Received: filters={filters!r}"
        )
    if max(width for width, _ in pairs) > max_characters:
        raise ValueError(
            f"Expected every filter width <= max_characters={max_characters} (a wider "
            f"convolution has no window over a word). Received: filters={filters!r}"
        )


class CharacterCNN(keras.layers.Layer):
    """ELMo's token representation from characters: embeddings of each character,
    convolutions of several widths max-pooled over the word, highway layers and a
    projection (internal to `ElmoBiLM`). The spelling of every vocabulary entry is a
    non-trainable table, so the layer takes token ids."""

    layout_roles = {"character_table": "replicated"}  # keras_attn.models.layout_maps

    def __init__(self, vocabulary_size, max_characters, output_dim, filters, highway_layers,
                 character_dim=16, **kwargs):  # fmt: skip
        super().__init__(**kwargs)
        self.vocabulary_size = vocabulary_size
        self.max_characters = max_characters
        self.output_dim = output_dim
        self.filters = [tuple(f) for f in filters]
        self.highway_layers = highway_layers
        self.character_dim = character_dim
        self.character_embedding = keras.layers.Embedding(
            NUM_CHARACTERS, character_dim, name="character_embedding"
        )
        self.convolutions = [
            keras.layers.Conv1D(count, width, activation="tanh", name=f"convolution_{width}")
            for width, count in self.filters
        ]
        width = sum(count for _, count in self.filters)
        self.highways = [
            keras.layers.Dense(2 * width, name=f"highway_{i}") for i in range(highway_layers)
        ]
        self.projection = keras.layers.Dense(output_dim, name="projection")

    def build(self, token_ids_shape):
        self.table = self.add_weight(
            name="character_table",
            shape=(self.vocabulary_size, self.max_characters),
            dtype="int32",
            initializer="zeros",
            trainable=False,
        )
        characters = (None, self.max_characters)
        self.character_embedding.build(characters)
        for convolution in self.convolutions:
            convolution.build((None, self.max_characters, self.character_dim))
        width = sum(count for _, count in self.filters)
        for highway in self.highways:
            highway.build((None, width))
        self.projection.build((None, width))
        self.built = True

    def call(self, token_ids):
        characters = ops.take(self.table, ops.cast(token_ids, "int32"), axis=0)
        shape = ops.shape(characters)  # (batch, length, max_characters)
        x = self.character_embedding(ops.reshape(characters, (-1, self.max_characters)))
        x = ops.concatenate([ops.max(conv(x), axis=1) for conv in self.convolutions], axis=-1)
        width = x.shape[-1]
        for highway in self.highways:  # y = g * relu(A x) + (1 - g) * x
            transform, gate = ops.split(highway(x), 2, axis=-1)
            gate = ops.sigmoid(gate)
            x = gate * ops.relu(transform) + (1.0 - gate) * x
        x = self.projection(ops.reshape(x, (-1, width)))
        return ops.reshape(x, (shape[0], shape[1], self.output_dim))

    def compute_output_shape(self, token_ids_shape):
        return (*token_ids_shape, self.output_dim)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "vocabulary_size": self.vocabulary_size,
                "max_characters": self.max_characters,
                "output_dim": self.output_dim,
                "filters": self.filters,
                "highway_layers": self.highway_layers,
                "character_dim": self.character_dim,
            }
        )
        return config


DEFAULT_FILTERS = ((1, 32), (2, 32), (3, 64), (4, 128), (5, 256), (6, 512), (7, 1024))


@keras_attn_export("keras_attn.models.ElmoBiLM")
class ElmoBiLM(FunctionalModel):
    """ELMo's biLM: forward and backward LSTM language models over one token representation.

    "A forward language model computes the probability of the sequence by modeling the
    probability of token t_k given the history (t_1, ..., t_k-1) ... A backward LM is
    similar ... predicting the previous token given the future context. ... We tie the
    parameters for both the token representation and Softmax layer in the forward and
    backward direction while maintaining separate parameters for the LSTMs in each
    direction" (Peters et al., 2018, §3.1). Each LSTM layer is projected to
    `projection_dim` (ELMo: 4096 cells to 512) with a residual connection from the
    second layer on. The token representation is a table of embeddings, or ELMo's
    character CNN (`character_cnn=True`: each vocabulary entry spelt by `character_table`,
    convolutions, highway layers, projection). `hidden_states()` gives the `L + 1`
    layers ELMo's task models mix (`keras_attn.layers.ScalarMix`): the token
    representation twice, then each layer's forward and backward states side by side.

    Args:
        vocabulary_size: tokens in the vocabulary.
        num_layers: LSTM layers per direction (ELMo: 2).
        hidden_dim: LSTM cells per layer (ELMo: 4096).
        projection_dim: width of the token representation and of each layer's projection
            (ELMo: 512).
        dropout: on the token representation and each layer's output.
        character_cnn: the token representation from characters, not a table.
        max_characters: characters per token (the character CNN's).
        filters: `(width, count)` of each convolution (ELMo's seven by default).
        highway_layers: highway layers after the convolutions (ELMo: 2).
        pad_token_id: the padding id, never a target.
        dtype: dtype policy.
        character_table: the spelling of every vocabulary entry (`character_table`),
            required with `character_cnn`; kept as a weight (not in `get_config`).
        **kwargs: `keras.Model` arguments (`name`).

    Call arguments:
        inputs: a dict with `token_ids` and `padding_mask`, `(batch, length)` int.

    Returns:
        A dict: `forward_logits` (position t predicts token t + 1) and `backward_logits`
        (position t predicts token t - 1), each `(batch, length, vocabulary_size)`, float32.

    Example:

    >>> import numpy as np
    >>> from keras_attn.models import ElmoBiLM
    >>> bilm = ElmoBiLM(100, num_layers=2, hidden_dim=32, projection_dim=16)
    >>> x = {"token_ids": np.array([[2, 7, 9, 3, 0]]), "padding_mask": np.array([[1, 1, 1, 1, 0]])}
    >>> tuple(bilm(x)["forward_logits"].shape), len(bilm.hidden_states(x))
    ((1, 5, 100), 3)

    References:
        - [Peters et al., 2018, ELMo](https://arxiv.org/abs/1802.05365)
        - [Jozefowicz et al., 2016](https://arxiv.org/abs/1602.02410) (the character CNN)
    """

    def __init__(
        self,
        vocabulary_size,
        num_layers=2,
        hidden_dim=512,
        projection_dim=128,
        dropout=0.1,
        character_cnn=False,
        max_characters=50,
        filters=DEFAULT_FILTERS,
        highway_layers=2,
        pad_token_id=0,
        dtype=None,
        *,
        character_table=None,
        **kwargs,
    ):
        sizes = dict(vocabulary_size=vocabulary_size, num_layers=num_layers)
        sizes.update(hidden_dim=hidden_dim, projection_dim=projection_dim)
        for name, value in sizes.items():
            check_positive_int(name, value)
        check_rate("dropout", dropout)
        if character_table is not None and not character_cnn:
            raise ValueError("Expected `character_table` only with character_cnn=True")
        if character_cnn:
            _check_character_cnn(max_characters, filters, highway_layers)

        # === Layers ===
        if character_cnn:
            self.token_representation = CharacterCNN(
                vocabulary_size, max_characters, projection_dim, filters, highway_layers,
                dtype=dtype, name="character_cnn",
            )  # fmt: skip
        else:
            self.token_representation = keras.layers.Embedding(
                vocabulary_size, projection_dim, dtype=dtype, name="token_embedding"
            )
        self.dropout_layer = Dropout(dropout, dtype=dtype, name="dropout")

        def stack(direction):
            lstms = [
                keras.layers.LSTM(hidden_dim, return_sequences=True, dtype=dtype,
                                  name=f"{direction}_lstm_{i}")
                for i in range(num_layers)
            ]  # fmt: skip
            projections = [
                keras.layers.Dense(projection_dim, dtype=dtype, name=f"{direction}_projection_{i}")
                for i in range(num_layers)
            ]
            return lstms, projections

        self.forward_lstms, self.forward_projections = stack("forward")
        self.backward_lstms, self.backward_projections = stack("backward")
        self.softmax = keras.layers.Dense(vocabulary_size, dtype="float32", name="softmax")

        # === Functional model ===
        inputs = {
            "token_ids": keras.Input((None,), dtype="int32", name="token_ids"),
            "padding_mask": keras.Input((None,), dtype="int32", name="padding_mask"),
        }
        mask = ops.cast(inputs["padding_mask"], "bool")
        x = self.dropout_layer(self.token_representation(inputs["token_ids"]))
        states = [keras.layers.Concatenate(name="states_0")([x, x])]
        # The backward LM reads the sequence reversed (padding first: masked, skipped).
        forward, backward, reversed_mask = x, ops.flip(x, axis=1), ops.flip(mask, axis=1)
        for i in range(num_layers):
            f = self.forward_projections[i](self.forward_lstms[i](forward, mask=mask))
            b = self.backward_projections[i](self.backward_lstms[i](backward, mask=reversed_mask))
            if i:  # residual connections between LSTM layers
                f, b = f + forward, b + backward
            forward, backward = self.dropout_layer(f), self.dropout_layer(b)
            states.append(
                keras.layers.Concatenate(name=f"states_{i + 1}")(
                    [forward, ops.flip(backward, axis=1)]
                )
            )
        outputs = {
            "forward_logits": self.softmax(forward),
            "backward_logits": self.softmax(ops.flip(backward, axis=1)),
        }
        super().__init__(inputs=inputs, outputs=outputs, dtype=dtype, **kwargs)
        # The states' symbolic tensors, for `hidden_states_model` (not tracked by Keras).
        object.__setattr__(self, "_state_tensors", states)
        if character_table is not None:
            table = np.asarray(character_table, "int32")
            if table.shape != (vocabulary_size, max_characters):
                raise ValueError(
                    f"Expected `character_table` of shape ({vocabulary_size}, {max_characters}). "
                    f"Received: {table.shape}"
                )
            self.token_representation.table.assign(table)

        # === Config ===
        self.vocabulary_size = vocabulary_size
        self.num_layers = num_layers
        self.hidden_dim = hidden_dim
        self.projection_dim = projection_dim
        self.dropout = dropout
        self.character_cnn = character_cnn
        self.max_characters = max_characters
        self.filters = [tuple(f) for f in filters]
        self.highway_layers = highway_layers
        self.pad_token_id = pad_token_id

    def hidden_states_model(self):
        """A `keras.Model` from the inputs to the `num_layers + 1` states, each
        `(batch, length, 2 * projection_dim)`: the token representation twice, then each
        layer's forward and backward outputs side by side."""
        return keras.Model(self.input, list(self._state_tensors), name=f"{self.name}_hidden_states")

    @staticmethod
    def language_model_targets(token_ids, pad_token_id=0):
        """`{"forward_logits": next tokens, "backward_logits": previous tokens}` of
        `(batch, length)` ids, padded with `pad_token_id` where there is none."""
        token_ids = ops.convert_to_tensor(token_ids, "int32")
        pad = ops.full_like(token_ids[:, :1], pad_token_id)
        return {
            "forward_logits": ops.concatenate([token_ids[:, 1:], pad], axis=1),
            "backward_logits": ops.concatenate([pad, token_ids[:, :-1]], axis=1),
        }

    def compile(self, optimizer="adam", loss=None, metrics=None, **kwargs):
        """Defaults: both directions' cross-entropy, summed (ELMo maximises both
        log-likelihoods), padding never a target; token accuracy of each."""
        make = lambda: keras.losses.SparseCategoricalCrossentropy(  # noqa: E731
            from_logits=True, ignore_class=self.pad_token_id
        )
        names = ("forward_logits", "backward_logits")
        super().compile(
            optimizer=optimizer,
            loss=loss or {name: make() for name in names},
            metrics=metrics
            or {name: [keras.metrics.SparseCategoricalAccuracy("accuracy")] for name in names},
            **kwargs,
        )

    def get_config(self):
        return {
            **self._base_config(),
            "vocabulary_size": self.vocabulary_size,
            "num_layers": self.num_layers,
            "hidden_dim": self.hidden_dim,
            "projection_dim": self.projection_dim,
            "dropout": self.dropout,
            "character_cnn": self.character_cnn,
            "max_characters": self.max_characters,
            "filters": self.filters,
            "highway_layers": self.highway_layers,
            "pad_token_id": self.pad_token_id,
        }
