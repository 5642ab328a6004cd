"""`GenerationConfig`: how a decoder model generates, one frozen record for every caller."""

import dataclasses
import numbers
import typing

from keras_attn.api_export import keras_attn_export
from keras_attn.models.stop_strings import check_stop_strings

STRATEGIES = ("greedy", "beam", "sample")
# The most beams a row may have: each is a row of the batch with its own cache (128
# beams of SmolLM2's 2,048 positions hold 12 GB of keys and values); beam search's
# papers use 4 to 10.
MAX_BEAMS = 64


@keras_attn_export("keras_attn.models.GenerationConfig", serializable=False)
@dataclasses.dataclass(frozen=True)
class GenerationConfig:
    """How `generate()` decodes, and what `export_saved_model` traces into the graph.

    Frozen and checked when made: a bad value raises a `ValueError` naming it.
    `replace(**changes)` gives a checked copy.

    Args:
        strategy: `"greedy"`, `"beam"` (beam search) or `"sample"`.
        max_length: total length of the returned rows, prompt included (`None`:
            the model's `max_sequence_length`).
        num_beams: beams per row for beam search (1 is greedy), at most `MAX_BEAMS`
            (and the model's vocabulary).
        length_penalty: GNMT's alpha for beam search (0: rank by log-probability;
            the Transformer paper decodes with 0.6).
        end_token_id: stops a row; everything after it becomes padding.
        temperature: logits are divided by it before choosing (> 0).
        top_k: sampling keeps the `top_k` most likely tokens.
        top_p: sampling keeps the smallest set with probability >= `top_p` (nucleus).
        min_p: sampling drops tokens less likely than `min_p` times the most likely.
        repetition_penalty: CTRL's penalty on the tokens so far (> 0; 1: none), greedy
            and sampling (`transformers`' processors and order:
            `keras_attn.models.logits_processors`).
        seed: sampling's seed; the same seed gives the same samples.
        stop_strings: a string or up to 16 strings (1 to 256 characters each) that end
            a text's continuation: decoding from text (`generate` on strings, `chat`)
            returns each row up to and with the first one its continuation holds, as
            `transformers`' `stop_strings` (`keras_attn.models.stop_strings`).

    Call arguments:
        None: a record; pass it as `generate(..., config=...)` or
            `export_saved_model(..., generation=...)`.

    Example:

    >>> from keras_attn.models import GenerationConfig
    >>> beam = GenerationConfig(strategy="beam", num_beams=4, length_penalty=0.6)
    >>> beam.replace(num_beams=8).num_beams
    8
    >>> GenerationConfig(top_p=1.5)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: Expected `top_p` to be None or in (0, 1]. Received: top_p=1.5
    """

    strategy: str = "greedy"  # the arg-max each step
    max_length: typing.Optional[int] = None  # None: the model's max_sequence_length
    num_beams: int = 4  # the paper's beam width
    length_penalty: float = 0.0  # GNMT's alpha; 0 ranks beams by total log-probability
    end_token_id: typing.Optional[int] = None  # None: every row runs to max_length
    temperature: float = 1.0  # 1: the model's own distribution
    top_k: typing.Optional[int] = None  # None: no top-k cut
    top_p: typing.Optional[float] = None  # None: no nucleus cut
    min_p: typing.Optional[float] = None  # None: no min-p cut
    repetition_penalty: float = 1.0  # 1: none
    seed: typing.Optional[int] = None  # None: the generator's current state
    stop_strings: typing.Optional[tuple] = None  # None: none

    def __post_init__(self):
        for name in (
            "max_length",
            "num_beams",
            "end_token_id",
            "top_k",
            "seed",
        ):  # NumPy scalars too
            value = getattr(self, name)
            if isinstance(value, numbers.Integral) and not isinstance(value, bool):
                object.__setattr__(self, name, int(value))
        for name in ("length_penalty", "temperature", "top_p", "min_p", "repetition_penalty"):
            value = getattr(self, name)
            if isinstance(value, numbers.Real) and not isinstance(value, bool):
                object.__setattr__(self, name, float(value))
        object.__setattr__(self, "stop_strings", check_stop_strings(self.stop_strings))
        if self.strategy not in STRATEGIES:
            raise ValueError(
                f"Expected `strategy` to be one of {STRATEGIES}. Received: "
                f"strategy={self.strategy!r}"
            )
        _check_int("num_beams", self.num_beams, minimum=1, maximum=MAX_BEAMS)
        _check_int("max_length", self.max_length, minimum=2, allow_none=True)
        _check_int("end_token_id", self.end_token_id, minimum=0, allow_none=True)
        _check_int("seed", self.seed, minimum=None, allow_none=True)
        if not isinstance(self.temperature, float) or not self.temperature > 0:
            raise ValueError(
                f"Expected `temperature` > 0. Received: temperature={self.temperature!r}"
            )
        if self.top_k is not None and (
            isinstance(self.top_k, bool) or not isinstance(self.top_k, int) or self.top_k < 1
        ):
            raise ValueError(
                f"Expected `top_k` to be None or an integer >= 1. Received: top_k={self.top_k!r}"
            )
        if self.top_p is not None and (
            not isinstance(self.top_p, float) or not 0 < self.top_p <= 1
        ):
            raise ValueError(
                f"Expected `top_p` to be None or in (0, 1]. Received: top_p={self.top_p!r}"
            )
        min_p = self.min_p
        if min_p is not None and (not isinstance(min_p, float) or not 0 <= min_p <= 1):
            raise ValueError(
                f"Expected `min_p` to be None or in [0, 1]. Received: min_p={self.min_p!r}"
            )
        penalty = self.repetition_penalty
        if not isinstance(penalty, float) or not 0 < penalty < float("inf"):
            raise ValueError(
                "Expected `repetition_penalty` to be a finite number > 0 (1: none). "
                f"Received: repetition_penalty={self.repetition_penalty!r}"
            )
        if self.strategy == "beam" and self.num_beams > 1 and self.repetition_penalty != 1.0:
            raise ValueError(
                "Expected `repetition_penalty` 1 with beam search of more than one beam "
                "(`transformers` penalises beams' log-probabilities, which is not matched "
                f"here); use greedy or sampling. Received: repetition_penalty="
                f"{self.repetition_penalty}"
            )
        if not isinstance(self.length_penalty, float) or self.length_penalty < 0:
            raise ValueError(
                f"Expected `length_penalty` >= 0 (GNMT's alpha). "
                f"Received: length_penalty={self.length_penalty!r}"
            )

    def replace(self, **changes):
        """A checked copy with `changes`; an unknown name raises a `TypeError` listing
        the fields."""
        fields = [field.name for field in dataclasses.fields(self)]
        unknown = sorted(set(changes) - set(fields))
        if unknown:
            raise TypeError(f"Unknown generation setting(s) {unknown}. Expected some of {fields}.")
        return dataclasses.replace(self, **changes)

    def trace_key(self):
        """The settings that change the traced decoding loop (not `max_length`, a
        shape, nor `seed`, a state, nor `stop_strings`, applied to the decoded text):
        one compiled function per distinct key."""
        beam = self.strategy == "beam"
        sample = self.strategy == "sample"
        return (
            self.strategy,
            self.num_beams if beam else 1,
            self.length_penalty if beam else 0.0,
            self.end_token_id,
            self.temperature,
            self.top_k if sample else None,
            self.top_p if sample else None,
            self.min_p if sample else None,
            self.repetition_penalty,
        )


# keras-hub's sampler names -> the settings they mean here (its constructors' defaults:
# top-k's k 5, top-p's p 0.1, beam's 5 beams).
SAMPLER_NAMES = {
    "greedy": {"strategy": "greedy"},
    "random": {"strategy": "sample"},
    "top_k": {"strategy": "sample", "top_k": 5},
    "top_p": {"strategy": "sample", "top_p": 0.1},
    "beam": {"strategy": "beam", "num_beams": 5},
}


def sampler_settings(sampler):
    """The `GenerationConfig` fields a keras-hub sampler means: its name (`"greedy"`,
    `"random"`, `"top_k"`, `"top_p"`, `"beam"`) or an instance of those classes (its `k`,
    `p`, `num_beams`, `temperature` and `seed`); another (contrastive, speculative) is
    named in a `ValueError`."""
    if isinstance(sampler, str):
        if sampler not in SAMPLER_NAMES:
            raise ValueError(
                f"Expected `sampler` to be one of {sorted(SAMPLER_NAMES)} or a keras-hub "
                f"sampler of those kinds. Received: sampler={sampler!r}"
            )
        return dict(SAMPLER_NAMES[sampler])
    kind = type(sampler).__name__
    settings = {
        "GreedySampler": lambda: {"strategy": "greedy"},
        "RandomSampler": lambda: {"strategy": "sample"},
        "TopKSampler": lambda: {"strategy": "sample", "top_k": sampler.k},
        "TopPSampler": lambda: {"strategy": "sample", "top_p": sampler.p, "top_k": sampler.k},
        "BeamSampler": lambda: {"strategy": "beam", "num_beams": sampler.num_beams},
    }.get(kind)
    if settings is None or getattr(sampler, "return_all_beams", False):
        raise ValueError(
            f"Expected `sampler` to be one of {sorted(SAMPLER_NAMES)} or a keras-hub sampler "
            f"of those kinds (one beam returned). Received: sampler={sampler!r}"
        )
    settings = settings()
    if kind != "BeamSampler":
        settings["temperature"] = getattr(sampler, "temperature", 1.0)
    if getattr(sampler, "seed", None) is not None:
        settings["seed"] = sampler.seed
    return settings


def _check_int(name, value, minimum, allow_none=False, maximum=None):
    if value is None and allow_none:
        return
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or (minimum is not None and value < minimum)
        or (maximum is not None and value > maximum)
    ):
        expected = (
            "an integer"
            + (f" >= {minimum}" if minimum is not None else "")
            + (f" and <= {maximum}" if maximum is not None else "")
            + (" or None" if allow_none else "")
        )
        raise ValueError(f"Expected `{name}` to be {expected}. Received: {name}={value!r}")
