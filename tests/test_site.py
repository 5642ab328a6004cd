"""The documentation site (`make docs`, docs/conf.py): built once here with every Sphinx
warning an error, then checked as files (a page per public name, every internal link
and anchor resolves, nothing fetched from the network) and in Debian's Chromium driven
by Playwright (no console error; search finds `MultiHeadAttention`). Screenshots of
the home page and of an API page land in `build/test-artefacts/site/`."""

import functools
import html.parser
import http.server
import os
import pathlib
import re
import shutil
import subprocess
import sys
import threading
import urllib.parse

import pytest

from keras_attn.api_export import EXPORTED
from keras_attn.cli.main import COMMANDS
from tests.test_public_api import REEXPORTED  # every sub-package's names declared

ROOT = pathlib.Path(__file__).parents[1]
ARTEFACTS = ROOT / "build" / "test-artefacts" / "site"
CHROMIUM = shutil.which("chromium")
pytestmark = pytest.mark.xdist_group("site")
sys.path.insert(0, str(ROOT / "docs" / "_ext"))
import api_pages  # noqa: E402 (docs/_ext is Sphinx's extension folder, not a package)


def test_markdown_code_spans_become_literals_and_doctests_stay_as_they_are():
    convert = api_pages.markdown_code
    assert convert("a `Layer`s list of `x`.") == "a ``Layer``\\ s list of ``x``."
    assert convert("`(batch,\n length)` ids") == "``(batch,\n length)`` ids"
    assert convert("`a`\n\n`b`") == "``a``\n\n``b``"  # not one span across paragraphs
    assert convert("x, **kwargs: as `f`") == "x, \\*\\*kwargs: as ``f``"
    assert convert("**query** -- the `q`") == "**query** -- the ``q``"  # strong stays strong
    assert convert(":class:`X` and ``y``") == ":class:`X` and ``y``"  # roles, literals kept
    assert convert("[Su et al.](https://arxiv.org/abs/2104.09864)") == (
        "`Su et al. <https://arxiv.org/abs/2104.09864>`__"
    )
    doctest = ">>> f(`x`)\n... `y`\n'`z`'"
    assert convert(doctest) == ">>> f(`x`)\n... `y`\n'``z``'"  # output lines are prose


def test_a_public_name_without_a_docstring_is_reported():
    def documented():
        """Does a thing."""

    def bare():
        pass

    names = {"keras_attn.a.documented": documented, "keras_attn.a.bare": bare}
    assert api_pages.undocumented(names) == ["keras_attn.a.bare"]
    assert api_pages.package_of("keras_attn.export.client.predict_rest") == (
        "keras_attn.export.client"
    )
    assert api_pages.package_of("keras_attn.models.bert.BertBackbone") == "keras_attn.models"


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The site built as `make docs` builds it, into a temporary folder."""
    out = tmp_path_factory.mktemp("site")
    completed = subprocess.run(
        [sys.executable, "-m", "sphinx", "-b", "html", "-c", "docs", "-W", "--keep-going"]
        + ["-q", ".", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"),
    )
    assert completed.returncode == 0, completed.stderr[-5000:]
    assert completed.stderr.strip() == "", completed.stderr[-5000:]  # not one warning
    return out


class _Links(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.links, self.ids = [], set()

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if "id" in attrs:
            self.ids.add(attrs["id"])
        for name in ("href", "src"):
            if attrs.get(name):
                self.links.append((tag, attrs[name]))


@functools.cache
def _parsed(path):
    parser = _Links()
    parser.feed(path.read_text(encoding="utf-8"))
    return parser


@pytest.mark.slow  # the site's build: about a minute
def test_every_public_name_has_its_page_and_every_guide_is_there(site):
    pages = {p.stem for p in (site / "docs" / "api").glob("keras_attn.*.html")}
    assert set(EXPORTED.values()) == set(REEXPORTED.values()) and len(EXPORTED) > 200
    packages = ("layers", "models", "data", "knowledge", "training", "export")
    packages += ("export.client", "evaluation", "visualize")
    assert pages == set(EXPORTED) | {f"keras_attn.{package}" for package in packages}
    page = (site / "docs" / "api" / "keras_attn.layers.MultiHeadAttention.html").read_text()
    assert "num_key_value_heads" in page and "Call arguments" in page and "&gt;&gt;&gt;" in page
    text = re.sub(r"<[^>]+>", "", page)
    assert "MultiHeadAttention(num_heads, key_dim" in text  # __init__'s, not Layer.__new__'s
    for guide in sorted((ROOT / "docs").glob("*.md")):
        assert (site / "docs" / f"{guide.stem}.html").is_file(), guide.name
    assert (site / "README.html").is_file() and (site / "index.html").is_file()
    cli = (site / "docs" / "api" / "cli.html").read_text(encoding="utf-8")
    assert "keras-attn chat" in cli and "--max-new-tokens" in cli  # each command's --help
    assert cli.count('class="highlight-text') == 1 + len(COMMANDS)  # plain text, not Python


@pytest.mark.slow  # the site's build: about a minute
def test_every_internal_link_resolves_and_nothing_is_fetched_from_the_network(site):
    pages = sorted(site.rglob("*.html"))
    assert len(pages) > len(EXPORTED)
    checked = 0
    for page in pages:
        for tag, link in _parsed(page).links:
            parts = urllib.parse.urlsplit(link)
            if parts.scheme in ("http", "https", "mailto"):
                # A link a reader follows is fine; a script, style sheet or image is not.
                assert tag == "a", (page, tag, link)
                continue
            assert not link.startswith("//"), (page, link)
            target = (page.parent / urllib.parse.unquote(parts.path)).resolve()
            if not parts.path:
                target = page
            assert target.is_file() and site in target.parents, (page, link)
            if parts.fragment and target.suffix == ".html":
                assert parts.fragment in _parsed(target).ids, (page, link)
            checked += 1
    assert checked > 10_000


@pytest.fixture(scope="module")
def served(site):
    """The site over HTTP on a free port of 127.0.0.1, as `python -m http.server`."""
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(site))
    handler.log_message = lambda *args: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def browser():
    if CHROMIUM is None:
        if os.environ.get("CI"):
            pytest.fail("Chromium is missing: `make` installs it (.ci/install-chromium)")
        pytest.skip("needs Debian's chromium (apt-get install chromium; .ci/install-chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM,
            # As root in a container Chromium's sandbox cannot start; the rest keeps it
            # from calling Google's services on a machine without a network.
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"]
            + ["--disable-component-update", "--disable-sync", "--no-first-run"],
        )
        yield browser
        browser.close()


class _Page:
    """A browser page that records console errors, uncaught exceptions and every request
    leaving `allowed` (each refused)."""

    def __init__(self, browser, allowed):
        self.page = browser.new_page(viewport={"width": 1280, "height": 900})
        self.errors, self.outside = [], []
        self.page.on("console", lambda m: m.type == "error" and self.errors.append(m.text))
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))

        def route(route):
            if route.request.url.startswith(allowed):
                return route.continue_()
            self.outside.append(route.request.url)
            return route.abort()

        self.page.route("**/*", route)

    def search(self, query):
        """`query` typed into the sidebar's search box: the hits' links."""
        self.page.locator("input[name=q]").first.fill(query)
        self.page.keyboard.press("Enter")
        self.page.wait_for_url("**/search.html?q=*")
        self.page.wait_for_selector("#search-results li a", timeout=30_000)
        return [a.get_attribute("href") for a in self.page.locator("#search-results li a").all()]


@pytest.mark.slow  # the site's build: about a minute
@pytest.mark.parametrize("how", ["http", "file"])
def test_the_site_in_a_browser_finds_a_layer_and_reports_no_error(site, served, browser, how):
    url = served if how == "http" else site.as_uri()
    page = _Page(browser, served if how == "http" else "file://")
    page.page.goto(f"{url}/index.html")
    page.page.wait_for_url("**/docs/index.html")  # the root page opens the home page
    assert page.page.title().startswith("keras_attn")
    assert page.page.get_by_role("link", name="API reference").count() >= 1
    if how == "http":
        ARTEFACTS.mkdir(parents=True, exist_ok=True)
        page.page.screenshot(path=str(ARTEFACTS / "home.png"))
    page.page.goto(f"{url}/docs/api/keras_attn.layers.MultiHeadAttention.html")
    assert page.page.locator("h1").first.inner_text().startswith("MultiHeadAttention")
    if how == "http":
        page.page.screenshot(path=str(ARTEFACTS / "multi_head_attention.png"))
    hits = page.search("MultiHeadAttention")
    assert any(h.startswith("docs/api/keras_attn.layers.MultiHeadAttention.html") for h in hits), (
        hits
    )
    assert page.errors == [] and page.outside == []
    page.page.close()
