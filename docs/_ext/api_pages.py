"""The API reference's pages, written at the start of each build from the public-name
registry (`keras_attn.api_export.EXPORTED`), and the command line's page from each
command's `--help`.

`docs/api/` is build output (not committed): one page per public name
(`keras_attn.layers.MultiHeadAttention.rst`: its docstring through autodoc and
napoleon), one page per package with a table of its names and their first lines, and
`cli.rst`. A public name without a docstring is a warning, so `-W` fails the build.
"""

import contextlib
import importlib
import inspect
import io
import os
import pathlib
import re
import shutil

from sphinx.util import logging

LOGGER = logging.getLogger(__name__)
# Packages in the order a reader meets them; every name of the registry is in one.
PACKAGES = (
    ("keras_attn.layers", "Attention layers, scores and blocks"),
    ("keras_attn.models", "Model families, presets, GGUF files and generation"),
    ("keras_attn.data", "Tokenizers, corpora and tf.data pipelines"),
    ("keras_attn.knowledge", "Knowledge graphs: WordNet, TransE, entity linking"),
    ("keras_attn.training", "Training: trainers, schedules, distillation, LoRA"),
    ("keras_attn.export", "Export: SavedModels for TF Serving, ONNX, OpenVINO, LiteRT"),
    ("keras_attn.export.client", "A client for TF Serving's REST and gRPC APIs"),
    ("keras_attn.evaluation", "Evaluation of language models in context"),
    ("keras_attn.visualize", "Attention pictures"),
)


# Docstrings write code in Markdown's single backticks; in reStructuredText a
# single-backtick span is "interpreted text" that must end before a space or punctuation
# (`Layer`s is an error). Each span (within a paragraph) becomes a literal, escaped where
# a word touches it; a `*args` / `**kwargs` outside code is escaped too.
_CODE = re.compile(r"(?<![`:])`((?:[^`\n]|\n(?![ \t]*\n))+?)`(?!`)")
_STARS = re.compile(r"(?<![\w`*\\])(\*{1,2})(?=\w)(?![^*\s]*\*)")  # not **strong**
_LINK = re.compile(r"\[([^\]\n]+)\]\((https?://[^)\s]+)\)")


def _rst(prose):
    """Markdown-ish prose as reStructuredText: code spans as literals (escaped where a
    word touches them), `*`s that start a word escaped, `[text](https://...)` links as
    links."""
    parts = _CODE.split(prose)  # prose, code, prose, ... (the code without backticks)
    out = []
    for index, part in enumerate(parts):
        if index % 2 == 0:
            part = _STARS.sub(lambda m: "\\*" * len(m[1]), part)
            out.append(_LINK.sub(lambda m: f"`{m[1]} <{m[2]}>`__", part))
            continue
        before = "\\ " if parts[index - 1][-1:].isalnum() else ""
        after = "\\ " if parts[index + 1][:1].isalnum() else ""
        out.append(f"{before}``{part}``{after}")
    return "".join(out)


def markdown_code(text):
    """`text`'s prose through `_rst`; doctest lines (`>>>`, `...`) as they are."""
    out, prose = [], []
    for line in [*text.split("\n"), None]:
        if line is None or line.lstrip().startswith((">>>", "...")):
            if prose:
                out.extend(_rst("\n".join(prose)).split("\n"))
                prose.clear()
            if line is not None:
                out.append(line)
        else:
            prose.append(line)
    return "\n".join(out)


def convert_docstring(app, what, name, obj, options, lines):
    lines[:] = markdown_code("\n".join(lines)).split("\n")


def class_signature(app, what, name, obj, options, signature, return_annotation):
    """A class's signature from its `__init__`: autodoc reads Keras's `Layer.__new__`
    first, whose `(*args, **kwargs)` says nothing."""
    if what != "class" or obj.__init__ is object.__init__:
        return None
    parameters = list(inspect.signature(obj.__init__).parameters.values())[1:]
    return str(inspect.Signature(parameters)), return_annotation


def public_names():
    """`{public path: symbol}` of every declared name. The packages load their names
    lazily and a name is declared as its module loads: each name of each package's
    `__all__` (the families' packages included) is touched first."""
    from keras_attn import api_export
    from keras_attn.models import registry

    packages = [p for p, _ in PACKAGES]
    packages += [f"keras_attn.models.{family}" for family in registry.discover()]
    for package in packages:
        module = importlib.import_module(package)
        for name in getattr(module, "__all__", ()):
            getattr(module, name)
    return dict(sorted(api_export.EXPORTED.items()))


def undocumented(names):
    """The paths of `names` (`{path: symbol}`) whose symbol has no docstring of its own."""
    return [path for path, symbol in names.items() if not (symbol.__doc__ or "").strip()]


def package_of(path):
    """The package of `PACKAGES` whose page lists `path` (the longest that holds it)."""
    module = path.rpartition(".")[0]
    matches = [p for p, _ in PACKAGES if module == p or module.startswith(p + ".")]
    if not matches:
        raise ValueError(f"{path}: in none of the reference's packages {PACKAGES}")
    return max(matches, key=len)


def _title(text, underline="="):
    return f"{text}\n{underline * len(text)}\n"


def _summary(symbol):
    doc = inspect.getdoc(symbol) or ""
    return markdown_code(doc.strip().splitlines()[0]) if doc.strip() else ""


def name_page(path, symbol):
    module, _, name = path.rpartition(".")
    directive = "autoclass" if inspect.isclass(symbol) else "autofunction"
    options = "   :members:\n" if inspect.isclass(symbol) else ""
    return (
        f"{_title(name)}\n.. currentmodule:: {module}\n\n"
        f"``from {module} import {name}``\n\n.. {directive}:: {name}\n{options}"
    )


def package_page(package, blurb, paths, names):
    rows = "".join(
        f"   * - :doc:`{paths[p].rpartition('.')[2]} <{p}>`\n     - {_summary(names[p])}\n"
        for p in paths
    )
    toctree = "".join(f"   {p}\n" for p in paths)
    return (
        f"{_title(package)}\n{blurb}.\n\n.. list-table::\n   :widths: 30 70\n\n{rows}\n"
        f".. toctree::\n   :hidden:\n\n{toctree}"
    )


def cli_help(command):
    """`keras-attn COMMAND --help` (`None`: `keras-attn --help`) as the command prints
    it, in `COLUMNS` columns."""
    from keras_attn.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        main.main([command, "--help"] if command else ["--help"])
    return out.getvalue()


def cli_page():
    from keras_attn.cli.main import COMMANDS

    parts = [
        _title("The keras-attn command"),
        "Each command's ``--help``, as ``keras-attn COMMAND --help`` prints it.\n",
        ".. code-block:: text\n",
        "\n".join("    " + line for line in cli_help(None).splitlines()) + "\n",
    ]
    for command, (_, text) in COMMANDS.items():
        parts += [
            _title(f"keras-attn {command}", "-"),
            f"{text[0].upper()}{text[1:]}.\n",
            ".. code-block:: text\n",
            "\n".join("    " + line for line in cli_help(command).splitlines()) + "\n",
        ]
    return "\n".join(parts)


def write_pages(app):
    folder = pathlib.Path(app.srcdir) / "docs" / "api"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    os.environ["COLUMNS"] = "88"  # argparse's help width, the same on every terminal
    names = public_names()
    for path in undocumented(names):
        LOGGER.warning("%s: a public name without a docstring", path)
    for path, symbol in names.items():
        (folder / f"{path}.rst").write_text(name_page(path, symbol), encoding="utf-8")
    by_package = {}
    for path in names:
        by_package.setdefault(package_of(path), {})[path] = path
    for package, blurb in PACKAGES:
        page = package_page(package, blurb, by_package.get(package, {}), names)
        (folder / f"{package}.rst").write_text(page, encoding="utf-8")
    (folder / "cli.rst").write_text(cli_page(), encoding="utf-8")
    toctree = "".join(f"   {package}\n" for package, _ in PACKAGES)
    (folder / "index.rst").write_text(
        f"{_title('API reference')}\nEvery public name of keras_attn, one page each, from "
        "its docstring; and the command line.\n\n.. toctree::\n   :maxdepth: 1\n\n"
        f"{toctree}   cli\n",
        encoding="utf-8",
    )


def write_home_redirect(app, exception):
    """`site/index.html` opens the home page (`docs/index.html`): the root document
    lives in `docs/`, as the guides do."""
    if exception is None and app.builder.format == "html":
        (pathlib.Path(app.outdir) / "index.html").write_text(
            '<!DOCTYPE html>\n<html><head><meta charset="utf-8">'
            '<meta http-equiv="refresh" content="0; url=docs/index.html">'
            "<title>keras_attn</title></head>"
            '<body><a href="docs/index.html">keras_attn documentation</a></body></html>\n',
            encoding="utf-8",
        )


def setup(app):
    app.connect("builder-inited", write_pages)
    app.connect("autodoc-process-docstring", convert_docstring)
    app.connect("autodoc-process-signature", class_signature)
    app.connect("build-finished", write_home_redirect)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
