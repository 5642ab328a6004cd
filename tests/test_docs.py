"""The README stays short, and every relative link in it and in docs/ resolves."""

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


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(document):
    targets = LINK.findall(document.read_text(encoding="utf-8"))
    broken = [
        target
        for target in targets
        if not re.match(r"(https?:|mailto:|#)", target)
        and not (document.parent / target.split("#")[0]).exists()
    ]
    assert not broken, f"{document.relative_to(ROOT)}: {broken}"


def test_every_document_in_docs_is_linked_from_the_readme():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for document in (ROOT / "docs").glob("*.md"):
        assert f"](docs/{document.name})" in readme, document.name


def test_the_limits_untrusted_files_states_are_the_codes():
    """docs/untrusted_files.md states the bounds as the code sets them, and the sweep's
    count as tests/hostile_sweep_files.py holds it."""
    from keras_attn.checkpoints.gguf_files import MAX_DIMS
    from keras_attn.cli.export import MAX_BEAMS as EXPORT_BEAMS
    from keras_attn.data import template_sandbox
    from keras_attn.data.chat_templates import RENDER_SECONDS
    from keras_attn.models.generation_config import MAX_BEAMS
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
