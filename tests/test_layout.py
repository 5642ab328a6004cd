"""The package's layout as docs/layout.md states it: no import cycle among
`keras_attn` modules, dependencies pointing one way (layers/data/checkpoints -> models
-> training/export/visualize -> cli), no file name twice, no module over 400 lines, no
test of a model's class (`isinstance`, `hasattr` of a model method) in training,
export or the CLI (they ask the model-family registry), and a family is its folder: no
module of `models/` reaches into another family's modules, and `bert/` imports no other
family at all."""

import ast
import collections
import inspect
import pathlib

import keras

from keras_attn import models

PACKAGE = pathlib.Path(__file__).parent.parent / "keras_attn"
FLOORS = {  # a module may import from its own floor and below
    "layers": 1,
    "data": 1,
    "checkpoints": 1,
    "models": 2,
    "visualize": 2,
    "training": 3,
    "export": 3,
    "cli": 4,
    "__main__": 5,
}


def _modules():
    modules = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


def _imports(modules):
    """Module -> the `keras_attn` modules it imports, at any depth of its code."""

    def resolve(name):
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name

    graph = collections.defaultdict(set)
    for module, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [f"{node.module}.{a.name}" for a in node.names]
            else:
                continue
            graph[module] |= {resolve(n) for n in names if n.startswith("keras_attn")} - {""}
    return graph


def _floor(module):
    parts = module.split(".")
    return FLOORS.get(parts[1], 0) if len(parts) > 1 else 0


# The upward imports allowed, each made inside a function when it is called: Keras's
# `model.export(path)` convention asks a model with a preprocessor (floor 2: the
# pipeline every task and language model shares) to write our raw-text export
# (floor 3) when it holds a preprocessor.
CALLED_UPWARD = {"keras_attn.models.pipeline -> keras_attn.export"}


def test_no_import_cycle_and_no_import_from_a_higher_floor():
    modules = _modules()
    graph = _imports(modules)
    upward = sorted(
        f"{a} -> {b}" for a in graph for b in graph[a] if b != a and _floor(b) > _floor(a)
    )
    assert set(upward) - CALLED_UPWARD == set()
    for edge in CALLED_UPWARD:  # never at a module's top level
        module, _, target = edge.partition(" -> ")
        top = ast.parse(modules[module].read_text(encoding="utf-8")).body
        assert not any(
            isinstance(node, ast.ImportFrom | ast.Import)
            and target in (getattr(node, "module", None) or "", *(a.name for a in node.names))
            for node in top
        ), edge
    # A cycle is a module that reaches itself (depth-first search from each module).
    cycles = []
    for start in modules:
        seen, stack = set(), [(start, (start,))]
        while stack:
            module, trail = stack.pop()
            for nxt in graph.get(module, ()):
                if nxt == start and len(trail) > 1:
                    cycles.append(" -> ".join((*trail, nxt)))
                elif nxt not in seen and nxt != module:
                    seen.add(nxt)
                    stack.append((nxt, (*trail, nxt)))
    assert not cycles


def code_lines(source):
    """The lines of `source` that hold code: not blank, not only a comment, not part of
    a docstring (a module's, class's or function's first statement, a string alone).
    What the 400-line signal counts: a module's explanations are never a reason to
    shorten it (docs/layout.md)."""
    import ast
    import io
    import tokenize

    docstrings = set()
    for node in ast.walk(ast.parse(source)):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            value = body[0].value
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                docstrings.update(range(body[0].lineno, body[0].end_lineno + 1))
    code = set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT,
                          tokenize.DEDENT, tokenize.ENDMARKER):  # fmt: skip
            continue
        code.update(range(token.start[0], token.end[0] + 1))
    return len(code - docstrings)


def test_code_lines_counts_code_alone():
    source = '''"""A module.

    Its docstring.
    """

# a comment
import os  # a reason


def f():
    """A docstring
    over two lines."""
    return (
        os.sep
    )
'''
    assert code_lines(source) == 5  # import, def, return (, os.sep, )


def test_no_file_name_twice_and_no_module_over_400_code_lines():
    names = collections.Counter(p.name for p in PACKAGE.rglob("*.py") if p.name != "__init__.py")
    assert [name for name, count in names.items() if count > 1] == []
    long = [
        f"{p.relative_to(PACKAGE)}: {n}"
        for p in PACKAGE.rglob("*.py")
        if (n := code_lines(p.read_text(encoding="utf-8"))) > 400
    ]
    assert long == []


def test_training_export_and_cli_ask_the_registry_not_the_model_class():
    model_classes = {
        name
        for name in models.__all__
        if inspect.isclass(getattr(models, name)) and issubclass(getattr(models, name), keras.Model)
    }
    # Methods our models add to keras.Model: what a hasattr would probe them for.
    model_methods = {
        attribute
        for name in model_classes
        for attribute in vars(getattr(models, name))
        if not attribute.startswith("__") and not hasattr(keras.Model, attribute)
    }
    found = []
    for floor in ("training", "export", "cli"):
        for path in (PACKAGE / floor).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
                    continue
                if node.func.id == "isinstance" and len(node.args) == 2:
                    kinds = node.args[1]
                    kinds = kinds.elts if isinstance(kinds, ast.Tuple) else [kinds]
                    names = {k.id for k in kinds if isinstance(k, ast.Name)}
                    if names & model_classes:
                        found.append(f"{path.name}:{node.lineno} isinstance {sorted(names)}")
                if node.func.id == "hasattr" and len(node.args) == 2:
                    attribute = getattr(node.args[1], "value", None)
                    if attribute in model_methods:
                        found.append(f"{path.name}:{node.lineno} hasattr {attribute!r}")
    assert found == []


def _family_folders():
    """The folders of `models/` that hold a family (a `<folder>_family.py` registers it)."""
    return sorted(path.parent.name for path in (PACKAGE / "models").glob("*/*_family.py"))


def _family_edges(modules, graph):
    """`(importer, imported)` for every import of a family folder's module from a module
    outside that folder (the folder's package itself, `keras_attn.models.<family>`, is
    not counted: a family may build on another's public names through it)."""
    families = _family_folders()
    edges = []
    for module in modules:
        parts = module.split(".")
        own = parts[2] if len(parts) > 2 and parts[1] == "models" else None
        for imported in graph[module]:
            target = imported.split(".")
            if len(target) > 3 and target[1] == "models" and target[2] in families:
                if target[2] != own:
                    edges.append((module, imported))
    return edges


def test_a_family_is_its_folder():
    """No module under `models/` (a family's, or a shared one's) imports another family's
    internal modules; `bert/` imports no other family, not even its package. A shared
    helper lives beside the families (`models/masked_lm_head.py`, `encoder_sizes.py`,
    `checkpoints/keras_hub_weights.py`), not in one of them."""
    modules = _modules()
    graph = _imports(modules)
    edges = _family_edges(modules, graph)
    inside = [f"{a} -> {b}" for a, b in edges if a.startswith("keras_attn.models.")]
    assert not inside, inside
    families = set(_family_folders()) - {"bert"}
    bert = sorted(
        f"{module} -> {imported}"
        for module in modules
        if module.startswith("keras_attn.models.bert.")
        for imported in graph[module]
        if len(imported.split(".")) > 2 and imported.split(".")[2] in families
    )
    assert not bert, bert


def test_the_family_rule_sees_a_reach_into_another_family():
    modules = {"keras_attn.models.gemma.gemma_checkpoint": None, "keras_attn.models.llama": None}
    graph = {
        "keras_attn.models.gemma.gemma_checkpoint": {
            "keras_attn.models.llama.llama_checkpoint",  # reaches in
            "keras_attn.models.llama",  # the package: allowed
            "keras_attn.models.gguf.reader",  # a shared package: allowed
        },
        "keras_attn.models.llama": set(),
    }
    edges = _family_edges(modules, collections.defaultdict(set, graph))
    assert edges == [
        ("keras_attn.models.gemma.gemma_checkpoint", "keras_attn.models.llama.llama_checkpoint")
    ]
