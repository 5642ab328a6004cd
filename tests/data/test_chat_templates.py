"""Chat templates a hostile file carries, through `model.chat()` as the probe called it and
through `render_chat_template`: each ends in one `ValueError` within seconds, the memory
it took capped in the rendering process, never the caller's."""

import resource
import time

import pytest

from keras_attn.data import template_sandbox
from keras_attn.data.chat_templates import RENDER_SECONDS, render_chat_template

MESSAGES = [{"role": "user", "content": "hi"}]

HOSTILE = {
    "a string of 10^10": ("{{ 'a' * 10**10 }}", "too large: 1 items times 10000000000"),
    "a list of 10^10": ("{{ [0] * 10**10 }}", "too large: 1 items times 10000000000"),
    "center(5e9)": ("{{ 'x'.center(5000000000) }}", "more than 1024 MiB of memory"),
    "the center filter": ("{{ 'x'|center(5000000000) }}", "more than 1024 MiB of memory"),
    "join": ("{{ ('x' * 100000)|join('x' * 100000) }}", "more than 1024 MiB of memory"),
    "2 ** 10 ** 10": ("{{ 2 ** (10 ** 10) }}", "2 \\*\\* 10000000000 has more than"),
    "a doubling namespace": (
        "{% set ns = namespace(s='a') %}{% for i in range(64) %}"
        "{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s|length }}",
        "more than 1024 MiB of memory",
    ),
    "printf width": ("{{ '%10000000000d' % 1 }}", "more than 1024 MiB of memory"),
    "format width": ("{{ '{:>10000000000}'.format(1) }}", "more than 1024 MiB of memory"),
    "a long text": (
        "{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}",
        "its text passed 4194304 characters",
    ),
    "include": ("{% include 'other.jinja' %}", "includes or imports no other template"),
    "import": ("{% import 'other.jinja' as other %}", "includes or imports no other template"),
    "a recursive macro": ("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", "recursed too deep"),
    "a syntax error": ("{% for %}", "TemplateSyntaxError: Expected an expression"),
    "Python's objects": ("{{ messages.__class__.__mro__ }}", "SecurityError"),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_template_that_would_take_memory_ends_in_one_value_error(name):
    template, match = HOSTILE[name]
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.monotonic()
    with pytest.raises(ValueError, match=match) as error:
        render_chat_template(template, MESSAGES)
    assert time.monotonic() - start < 10
    assert str(error.value).startswith("The chat template failed: ")
    assert "\n" not in str(error.value)
    # The caller's memory did not grow by the blow-up (the renderer's is capped at 1 GiB).
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown_kib < (template_sandbox.MEMORY_BYTES >> 10) // 4


@pytest.mark.slow  # the render's time bound itself: 5 s
def test_loops_of_loops_through_chat_end_within_the_time_bound(tmp_path):
    from keras_attn.models import from_gguf
    from tests.models.llama.test_gguf_tokenizer import _write

    loops = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"
    _write(tmp_path / "loops.gguf", template=loops)
    model = from_gguf(tmp_path / "loops.gguf")
    start = time.monotonic()
    with pytest.raises(ValueError, match=f"took more than {RENDER_SECONDS} s to render"):
        model.chat(MESSAGES, max_new_tokens=2)
    assert time.monotonic() - start < 10


def test_a_well_formed_template_renders_as_jinja_does():
    import jinja2

    template = (
        "{{ bos_token }}{% for m in messages %}<{{ m['role'] }}>{{ m['content'] | trim }}"
        "{% if not loop.last %}\n{% endif %}{% endfor %}"
        "{% if add_generation_prompt %}<assistant>{% endif %}"
    )
    messages = [{"role": "system", "content": " Be brief. "}, {"role": "user", "content": "Hé 🤗"}]
    expected = jinja2.Environment(trim_blocks=True, lstrip_blocks=True).from_string(template)
    assert render_chat_template(template, messages, bos="<s>") == expected.render(
        messages=messages, add_generation_prompt=True, bos_token="<s>", eos_token=""
    )
    with pytest.raises(TypeError, match="messages"):
        render_chat_template(template, [{"role": "user", "content": object()}])
    with pytest.raises(TypeError, match="chat template as a string"):
        render_chat_template(5, messages)
