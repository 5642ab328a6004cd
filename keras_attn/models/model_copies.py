"""A model rebuilt from its serialized config: what copies for saving, merging LoRA,
quantizing and changing precision build on."""

import keras


def rebuilt_from_config(model, config):
    """A new model from `config` (`model` serialized, perhaps edited), `model`'s
    preprocessor carried over whole: a config names the tokenizer but not its files
    (a `.keras` file's assets hold those), so a preprocessor deserialized from it alone
    would have none. What copies for saving, merging and quantizing build on."""
    copy = keras.saving.deserialize_keras_object(config)
    if getattr(model, "preprocessor", None) is not None:
        copy.preprocessor = model.preprocessor
    return copy
