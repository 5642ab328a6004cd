"""What every task model on a BertBackbone shares: the backbone check and its config."""

import keras

from keras_attn.models.bert.bert_backbone import BertBackbone


class BertTask(keras.Model):
    """Base of the functional task models (pre-training, classification, ...).

    Their config holds the serialized backbone plus the task's own arguments, and
    `from_config` rebuilds the backbone first, so tied or shared layers are wired
    again on load. Subclasses call `check_backbone` first and add their arguments
    to `get_config`.
    """

    @staticmethod
    def check_backbone(backbone):
        if not isinstance(backbone, BertBackbone):
            raise TypeError(f"Expected a BertBackbone. Received: backbone of type {type(backbone).__name__}")

    def get_config(self):
        return {
            "name": self.name,
            "trainable": self.trainable,
            "backbone": keras.saving.serialize_keras_object(self.backbone),
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["backbone"] = keras.saving.deserialize_keras_object(config["backbone"])
        return cls(**config)
