"""How a family's tokenizer lives in a folder (`TokenizerFiles`), and the default:
WordPiece in a `vocab.txt` (`WORDPIECE`). The registry's families name theirs; the GGUF
tokenizers are two more."""

import dataclasses
import pathlib
import typing


def _wordpiece(folder, sequence_length=128, lowercase=True, strip_accents=None):
    from keras_attn.data import WordPieceTokenizer

    return WordPieceTokenizer(
        pathlib.Path(folder) / "vocab.txt",
        lowercase=lowercase,
        sequence_length=sequence_length,
        strip_accents=strip_accents,
    )


def _save_wordpiece(tokenizer, folder):
    from keras_attn.data.wordpiece_tokenizer import write_vocabulary

    write_vocabulary(tokenizer.vocabulary, pathlib.Path(folder) / "vocab.txt")


@dataclasses.dataclass(frozen=True)
class TokenizerFiles:
    """How a family's tokenizer lives in a folder (a run, a converted checkpoint):
    what fine-tuning reads beside a backbone, writes into its run, and `export` serves.

    Attributes:
        files: the file names it is kept in (`("vocab.txt",)`).
        load: `(folder, sequence_length, lowercase) -> tokenizer`, called once every
            file is there (`lowercase`: a WordPiece vocabulary's; a cased byte-level
            BPE leaves it).
        save: `(tokenizer, folder) -> None`, writing those files.
        or_else: the `TokenizerFiles` a folder without these files may hold instead
            (`WORDPIECE` for a DeBERTa `keras-attn pretrain` learned on a WordPiece
            vocabulary), or `None`.
        classes: the names of the tokenizer classes `load` gives (a preprocessor finds
            its tokenizer's family by them: `family_of_tokenizer`).
    """

    files: tuple
    load: typing.Callable
    save: typing.Callable
    or_else: typing.Optional["TokenizerFiles"] = None
    classes: tuple = ()

    def missing(self, folder):
        """The files `folder` lacks (empty: `load` can read it)."""
        return [name for name in self.files if not (pathlib.Path(folder) / name).is_file()]

    def in_folder(self, folder):
        """The `TokenizerFiles` `folder` keeps its tokenizer in: the first of `chain()`
        whose files are all there, else these (then `missing` names these)."""
        return next((files for files in self.chain() if not files.missing(folder)), self)

    def load_checked(self, folder, model, sequence_length=128, lowercase=True):
        """`load`, its files parsed whole and the tokenizer checked against `model`'s
        embedding (`keras_attn.models.tokenizer_checks`): a `ValueError` names the file."""
        from keras_attn.models.tokenizer_checks import load_checked

        return load_checked(self, folder, model, sequence_length, lowercase)

    def chain(self):
        """These files and the alternatives after them (`or_else`), in order."""
        files = self
        while files is not None:
            yield files
            files = files.or_else

    def for_tokenizer(self, tokenizer):
        """Of `chain()`, the files that keep `tokenizer`'s class (the nearest class of its
        MRO any of them names), or `None`."""
        for cls in type(tokenizer).__mro__:
            for files in self.chain():
                if cls.__name__ in files.classes:
                    return files
        return None

    def write(self, tokenizer, folder):
        """`tokenizer`'s files into `folder`, by the `TokenizerFiles` of `chain()` that
        keep its class (these when none names it)."""
        (self.for_tokenizer(tokenizer) or self).save(tokenizer, folder)

    def read(self, folder):
        """The tokenizer in `folder` (default settings), or `None` when a file of these is
        missing (`or_else` is not read: a Hugging Face folder written from a DeBERTa
        backbone holds its SentencePiece model or no tokenizer): what a
        `HuggingFaceTwin.read_tokenizer` gives."""
        return None if self.missing(folder) else self.load(folder)


WORDPIECE = TokenizerFiles(
    ("vocab.txt",), _wordpiece, _save_wordpiece, classes=("WordPieceTokenizer",)
)
