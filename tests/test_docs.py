"""The README stays short, the long documents stay under their limits, prose lines are
read without scrolling, every relative link (and its anchor) resolves, and the package's
comments describe the code, not its history."""

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).parents[1]
DOCUMENTS = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
    *sorted((ROOT / "examples").glob("*.md")),
]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def test_readme_is_read_in_three_minutes():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 150, len(lines)


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_prose_line_or_table_cell_over_300_characters(document):
    long, in_code = [], False
    for number, line in enumerate(document.read_text(encoding="utf-8").splitlines(), 1):
        if line.startswith("```"):
            in_code = not in_code
        elif not in_code and line.startswith("|"):
            long += [f"{number}: cell" for cell in line.strip("| ").split(" | ") if len(cell) > 300]
        elif not in_code and len(line) > 300:
            long.append(f"{number}: line")
    assert not long, f"{document.relative_to(ROOT)}: {long}"


def _anchors(document):
    """The anchors of a Markdown file's headings, as GitHub makes them."""
    headings = re.findall(r"^#+ (.+)$", _prose(document), flags=re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-") for heading in headings}


def _prose(document):
    """`document`'s text without its fenced code blocks."""
    return re.sub(r"^```.*?^```", "", document.read_text(encoding="utf-8"), flags=re.S | re.M)


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(document):
    targets = LINK.findall(document.read_text(encoding="utf-8"))
    broken = []
    for target in targets:
        if re.match(r"(https?:|mailto:)", target):
            continue
        path, _, anchor = target.partition("#")
        linked = (document.parent / path) if path else document
        if not linked.exists():
            broken.append(target)
        elif anchor and linked.suffix == ".md" and anchor not in _anchors(linked):
            broken.append(target)
    assert not broken, f"{document.relative_to(ROOT)}: {broken}"


# The long documents and their limit: past it, a document narrates instead of describing.
LONG_DOCUMENTS = ("results.md", "speed.md", "deployment.md", "one_file_exports.md")
MAX_DOCUMENT_LINES = 400
MAX_PROSE_LINE = 100


@pytest.mark.parametrize("name", LONG_DOCUMENTS)
def test_long_documents_stay_within_their_limit(name):
    lines = (ROOT / "docs" / name).read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_DOCUMENT_LINES, f"docs/{name}: {len(lines)} lines"


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_prose_lines_are_read_without_scrolling(document):
    """Outside tables and code blocks no line is over 100 characters (a lone address,
    without a space to break at, aside)."""
    long = [
        f"{number}: {len(line)}"
        for number, line in enumerate(_prose(document).splitlines(), 1)
        if len(line) > MAX_PROSE_LINE and not line.lstrip().startswith("|") and " " in line.strip()
    ]
    assert not long, f"{document.relative_to(ROOT)}: {long}"


# History in a comment: an issue's number, a date, "since"/"until" a date or commit.
HISTORY = re.compile(
    r"\bissue \d+|\b20\d\d-\d\d-\d\d\b|\b(?:since|until|as of) (?:20\d\d|[0-9a-f]{7}\b)",
    re.IGNORECASE,
)


def test_the_packages_comments_and_docstrings_narrate_no_history():
    found = []
    for path in sorted((ROOT / "keras_attn").rglob("*.py")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if HISTORY.search(line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not found, "\n".join(found)


def test_the_history_pattern_finds_what_it_is_for():
    for narrated in ("(docs/speed.md, issue 62)", "until 2026-12-03 it was", "since 8d0736b"):
        assert HISTORY.search(narrated), narrated
    for present in ("the issuer's key", "a 2,026-token prompt", "since the cache holds"):
        assert not HISTORY.search(present), present


def test_every_document_in_docs_is_linked_from_the_readme():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for document in (ROOT / "docs").glob("*.md"):
        assert f"](docs/{document.name})" in readme, document.name


def test_the_limits_untrusted_files_states_are_the_codes():
    """docs/untrusted_files.md states the bounds as the code sets them, and the sweep's
    count as tests/hostile_sweep_files.py holds it."""
    from keras_attn.cli.export import MAX_BEAMS as EXPORT_BEAMS
    from keras_attn.data import template_sandbox
    from keras_attn.data.chat_templates import RENDER_SECONDS
    from keras_attn.models.generation_config import MAX_BEAMS
    from keras_attn.models.gguf.header import MAX_DIMS
    from tests import hostile_sweep_files

    text = (ROOT / "docs" / "untrusted_files.md").read_text(encoding="utf-8")
    text = " ".join(text.split())  # sentences wrap
    assert EXPORT_BEAMS == MAX_BEAMS
    stated = [
        f"at most {MAX_DIMS} dimensions",
        f"address space at {template_sandbox.MEMORY_BYTES >> 30} GiB",
        f"CPU time at {template_sandbox.CPU_SECONDS} s",
        f"waits at most {RENDER_SECONDS} s",
        f"past {template_sandbox.MAX_CHARACTERS:,} items or {template_sandbox.MAX_INT_BITS:,} bits",
        f"stops at {template_sandbox.MAX_CHARACTERS:,} characters",
        f"`num_beams`: at most {MAX_BEAMS}",
        f"tries {len(hostile_sweep_files.CASES)} hostile neighbours",
        f"takes more than {hostile_sweep_files.SECONDS} s",
        f"by more than {hostile_sweep_files.GROWTH_BYTES >> 30} GiB",
    ]
    missing = [phrase for phrase in stated if phrase not in text]
    assert not missing, missing


def test_the_architectures_hub_handles_may_hold_are_the_registrys():
    """docs/layers_and_models.md's list of what a handle's files may hold: every Hugging
    Face `model_type` the families read, every GGUF architecture and pre-tokenizer."""
    from keras_attn.models import registry
    from keras_attn.models.gguf import ARCHITECTURES
    from keras_attn.models.gguf.tokenizers import BYTE_LEVEL_PRE

    registry.discover()
    text = " ".join((ROOT / "docs" / "layers_and_models.md").read_text().split())
    listed = re.search(r"Hugging Face `model_type` (.*?); GGUF `general.architecture` (.*?), "
                       r"with the tokenizers `tokenizer.ggml.pre` (.*?) \(and", text)  # fmt: skip
    model_types, architectures, pres = ([n.strip() for n in g.split(",")] for g in listed.groups())
    assert model_types == sorted(t for f in registry.families() for t in f.model_types)
    assert architectures == sorted(ARCHITECTURES)
    assert pres == sorted(BYTE_LEVEL_PRE)
