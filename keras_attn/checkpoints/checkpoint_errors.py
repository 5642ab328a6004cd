"""The errors of reading a checkpoint folder: each names the file."""

from keras_attn.errors import UserInputError


class CheckpointError(UserInputError):
    """A checkpoint folder whose files cannot be read or do not fit; names the file."""


class CheckpointFileNotFound(CheckpointError, FileNotFoundError):
    """A checkpoint folder without the files of a layout we read."""
