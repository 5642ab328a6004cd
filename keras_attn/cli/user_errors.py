"""How a command ends on a user's error: one `error:` line on stderr and exit status 2.

Every command's `main` is wrapped by `user_errors`: a `UserInputError` (a file, a
flag, a configuration key or value that cannot be used, see `keras_attn.errors`)
becomes `error: <message>` and `SystemExit(2)`, as argparse ends on a bad flag. Any
other exception is a bug and keeps its traceback. Ctrl-C ends in `error: interrupted`
with status 130. `keras-attn --verbose COMMAND ...` prints the traceback of a user's
error and of Ctrl-C too, above the `error:` line.
"""

import argparse
import functools
import sys
import traceback

from keras_attn.errors import UserInputError


class CommandError(SystemExit):
    """The exit of a command that refused a user's input: status 2, the message in `str()`."""

    def __init__(self, message):
        super().__init__(2)
        self.message = message

    def __str__(self):
        return f"error: {self.message}"


class CommandParser(argparse.ArgumentParser):
    """`argparse.ArgumentParser` whose refusals (an unknown flag, a value of the wrong
    type or not among the choices, a missing argument) are `UserInputError`s: one
    `error:` line naming the flag and where the options are listed, not argparse's
    usage block and `prog: error:`. Parse inside a `user_errors` main."""

    def error(self, message):
        raise UserInputError(f"{message} (`{self.prog} --help` lists the options)")


def at_least(minimum, kind=int, at_most=None):
    """An argparse `type=` for a number of `kind` no smaller than `minimum` (and no
    larger than `at_most`): refused at parsing, before anything is loaded, as
    `argument --flag: expected ...` (a number of thousands of digits too)."""

    def number(text):
        try:
            value = kind(text)
        except ValueError:
            what = "an integer" if kind is int else "a number"
            raise argparse.ArgumentTypeError(f"expected {what}, got {text[:40]!r}") from None
        if not value >= minimum or at_most is not None and not value <= at_most:
            expected = f"{minimum} or more" if at_most is None else f"{minimum} to {at_most}"
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text[:40]}")
        return value

    number.__name__ = kind.__name__
    return number


_tracebacks = {"shown": False}


def show_tracebacks(shown=True):
    """Whether a user's error and Ctrl-C print their traceback above the `error:` line
    (`keras-attn --verbose`)."""
    _tracebacks["shown"] = bool(shown)


def user_errors(main):
    """Wraps a command's `main`: a `UserInputError` -> `error: ...` on stderr, exit 2;
    Ctrl-C (`KeyboardInterrupt`) -> `error: interrupted` (and what the command adds as
    the interrupt's message), exit 130 as a shell reports SIGINT, no traceback."""

    @functools.wraps(main)
    def run(*args, **kwargs):
        try:
            return main(*args, **kwargs)
        except UserInputError as error:
            if _tracebacks["shown"]:
                traceback.print_exc()
            print(f"error: {error}", file=sys.stderr, flush=True)
            raise CommandError(str(error)) from None
        except KeyboardInterrupt as interrupt:
            if _tracebacks["shown"]:
                traceback.print_exc()
            note = f": {interrupt}" if str(interrupt) else ""
            print(f"error: interrupted{note}", file=sys.stderr, flush=True)
            raise SystemExit(130) from None

    return run


def add_sampling_filters(parser, penalty_help):
    """The flags of `generate`'s processors that `keras-attn chat` and `export` share:
    `--top-k`, `--top-p`, `--min-p` and `--repetition-penalty` (default 1: none),
    bounded at parsing as `GenerationConfig` bounds them."""
    parser.add_argument("--top-k", type=at_least(1), help="sampling keeps the k likeliest")
    parser.add_argument(
        "--top-p", type=at_least(0.0, float, at_most=1.0), help="sampling's nucleus"
    )
    parser.add_argument(
        "--min-p", type=at_least(0.0, float, at_most=1.0), help="sampling's min-p cut"
    )
    parser.add_argument(
        "--repetition-penalty",
        type=at_least(0.01, float, at_most=100.0),
        default=1.0,
        help=penalty_help,
    )
