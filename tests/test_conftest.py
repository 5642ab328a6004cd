"""The suite's own harness (conftest.py): when a worker's frozen garbage is thawed."""

import gc
import itertools
import pathlib
import types

import pytest

ROOT_CONFTEST = pathlib.Path(__file__).resolve().parents[1] / "conftest.py"


def _item(module, *scopes):
    """A stand-in for a test item of `module` whose fixtures have these scopes."""
    definitions = {f"f{i}": [types.SimpleNamespace(scope=s)] for i, s in enumerate(scopes)}
    return types.SimpleNamespace(
        getparent=lambda kind: module if kind is pytest.Module else None,
        _fixtureinfo=types.SimpleNamespace(name2fixturedefs=definitions),
    )


def test_a_thaw_comes_when_a_module_with_wider_fixtures_ends_or_40_tests_on(request, monkeypatch):
    (harness,) = [
        plugin
        for plugin in request.config.pluginmanager.get_plugins()
        if pathlib.Path(getattr(plugin, "__file__", "") or "") == ROOT_CONFTEST
    ]
    thaws, done = [], itertools.count(1)
    monkeypatch.setattr(gc, "unfreeze", lambda: thaws.append(test))
    monkeypatch.setattr(harness, "_MODULE_HELD", [False])
    monkeypatch.setattr(harness, "_SINCE_THAW", [0])
    first, second, third = object(), object(), object()
    for item, following in [
        (_item(first, "function", "module"), _item(first)),  # test 1: its module goes on
        (_item(first, "function"), _item(second)),  # 2: first ends, a test of it held one
        (_item(second, "session", "function"), _item(third)),  # 3: second held none
        (_item(third, "class"), None),  # 4: the last test
    ]:
        test = next(done)
        harness._collect(item, following)
    assert thaws == [2, 4]
    while test < 4 + 2 * harness._THAW_EVERY:  # at the latest every _THAW_EVERY tests
        test = next(done)
        harness._collect(_item(third), _item(third))
    assert thaws == [2, 4, 4 + harness._THAW_EVERY, 4 + 2 * harness._THAW_EVERY]
