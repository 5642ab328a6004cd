"""Export: SavedModels in TF Serving's layout, with the tokenizer inside the graph."""

from keras_attn.export.saved_model import export_saved_model, next_version_dir

__all__ = ["export_saved_model", "next_version_dir"]
