"""The one exception class for bad user input, on the ground floor (imports nothing).

`data/`, `models/`, `training/` and `export/` raise `UserInputError` (or a subclass)
when something a user gave cannot be used: a file that cannot be read, a flag or a
configuration value out of range, a run folder that holds a different run. The
`keras-attn` commands print it as one `error:` line and exit with status 2; any
other exception is a bug of ours and keeps its traceback.
"""


class UserInputError(ValueError):
    """A file, flag, configuration key or value a user gave that cannot be used.

    The message names the file, key or value and says what was expected. It is a
    `ValueError`, so code that catches `ValueError` keeps working.

    Example:

    >>> from keras_attn.errors import UserInputError
    >>> try:
    ...     raise UserInputError("reviews.csv: expected a header with the column 'text'")
    ... except ValueError as error:
    ...     print(error)
    reviews.csv: expected a header with the column 'text'
    """
