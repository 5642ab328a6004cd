"""Sphinx's settings for the site that `make docs` builds into `site/`.

The source folder is the repository's root (`sphinx-build -c docs . site`), so the
guides' links between `README.md`, `docs/` and `examples/` resolve as they do on
GitHub; `include_patterns` keeps the rest of the tree out. The API reference pages are
written at the start of each build from the public-name registry (`_ext/api_pages.py`).
"""

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).parent / "_ext"))

from keras_attn.cli.main import start_tensorflow  # noqa: E402

# TensorFlow started as the command line starts it: its native start-up lines held back,
# so that what the build prints is Sphinx's (a warning is an error: `-W`).
start_tensorflow(quiet=True)

project = "keras_attn"
author = "keras_attn developers"
copyright = "keras_attn developers"  # noqa: A001 (Sphinx's own setting name)
root_doc = "docs/index"
include_patterns = ["README.md", "docs/*.md", "docs/api/*.rst", "examples/*.md"]

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "api_pages",
]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}

# Markdown: headings get anchors for in-page links, as GitHub gives them.
myst_heading_anchors = 4
myst_enable_extensions = ["colon_fence"]

# Docstrings: Google style; "Call arguments" (a Keras layer's `call`) read as parameters.
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_custom_sections = [("Call arguments", "params_style")]
napoleon_use_rtype = False
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_class_signature = "mixed"
autodoc_inherit_docstrings = False
# `x` in a docstring is code, as in the Markdown guides.
default_role = "code"

html_theme = "furo"
html_title = "keras_attn"
html_static_path = []
html_show_sourcelink = False
html_copy_source = False
# Nothing is fetched from the network when a page is viewed: Furo uses the system's
# fonts; no analytics, no external scripts (the browser test blocks any request that
# leaves the site).
html_theme_options = {"navigation_with_keys": True}
# The search page lists titles without fetching each hit's page for a snippet: a fetch
# that `file://` forbids (the site opens from the disk as well as from a server).
html_show_search_summary = False
