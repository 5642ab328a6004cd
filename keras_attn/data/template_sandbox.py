"""The process that renders a chat template: `chat_templates.render_chat_template` runs
this file's source with `python -c` and hands it the template and the messages as JSON
on standard input; it answers `{"text": ...}` or `{"error": ...}` as JSON.

It imports Jinja and the standard library only (never keras_attn, whose `__init__`
imports Keras). Before it reads its input it caps its own address space at
`MEMORY_BYTES` and its CPU time at `CPU_SECONDS`: whatever a template computes (a loop
of loops, a string of ten billion characters, a number of ten billion digits, a
doubling namespace) ends in a `MemoryError` or in the kernel ending it, never in the
user's process running out of memory. The caller bounds the wall-clock time too.
Jinja's immutable sandbox keeps the template away from Python's objects; `*` and `**`
are intercepted so that the commonest blow-ups are named at once, and the text it
writes is cut off past `MAX_CHARACTERS` by refusing it.
"""

import json
import math
import sys

MEMORY_BYTES = 1 << 30
CPU_SECONDS = 5
MAX_CHARACTERS = 1 << 22  # a prompt's text: about a million tokens
MAX_INT_BITS = 1 << 16  # an integer a template computes


def _limit_resources():
    try:
        import resource
    except ImportError:  # not on Windows: the caller's timeout still holds
        return
    for limit, value in ((resource.RLIMIT_AS, MEMORY_BYTES), (resource.RLIMIT_CPU, CPU_SECONDS)):
        soft, hard = resource.getrlimit(limit)
        value = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(limit, (value, hard))


class _TooLarge(Exception):
    pass


def _environment():
    import jinja2
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class BoundedSandbox(ImmutableSandboxedEnvironment):
        """Jinja's immutable sandbox whose `*` and `**` refuse results past the bounds."""

        intercepted_binops = frozenset(["*", "**"])

        def call_binop(self, context, operator, left, right):
            if operator == "*":
                for sequence, count in ((left, right), (right, left)):
                    if isinstance(sequence, str | list | tuple) and isinstance(count, int):
                        if len(sequence) * max(count, 0) > MAX_CHARACTERS:
                            raise _TooLarge(
                                f"{len(sequence)} items times {count} is more than {MAX_CHARACTERS}"
                            )
                if isinstance(left, int) and isinstance(right, int):
                    if left.bit_length() + right.bit_length() > MAX_INT_BITS:
                        raise _TooLarge(f"a product of more than {MAX_INT_BITS} bits")
            if operator == "**" and isinstance(left, int) and isinstance(right, int):
                if abs(left) > 1 and right > 0 and right * math.log2(abs(left)) > MAX_INT_BITS:
                    raise _TooLarge(f"{left} ** {right} has more than {MAX_INT_BITS} bits")
            return super().call_binop(context, operator, left, right)

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    class NoOtherTemplates(jinja2.BaseLoader):
        def get_source(self, environment, name):
            raise jinja2.exceptions.TemplateError(
                f"a chat template includes or imports no other template (asked for {name!r})"
            )

    environment = BoundedSandbox(trim_blocks=True, lstrip_blocks=True, loader=NoOtherTemplates())
    environment.globals["raise_exception"] = raise_exception
    return environment


def render(request):
    """`{"text": ...}` or `{"error": ...}` for one request."""
    try:
        template = _environment().from_string(request["template"])
        pieces, length = [], 0
        for piece in template.generate(
            messages=request["messages"],
            add_generation_prompt=request["add_generation_prompt"],
            bos_token=request["bos_token"],
            eos_token=request["eos_token"],
        ):
            length += len(piece)
            if length > MAX_CHARACTERS:
                raise _TooLarge(f"its text passed {MAX_CHARACTERS} characters")
            pieces.append(piece)
        return {"text": "".join(pieces)}
    except _TooLarge as error:
        return {"error": f"too large: {error}"}
    except MemoryError:
        return {"error": f"it needed more than {MEMORY_BYTES >> 20} MiB of memory"}
    except RecursionError:
        return {"error": "it recursed too deep"}
    except Exception as error:  # a template's own error, or Jinja's: named, one line
        first = (str(error).strip().splitlines() or [""])[0][:300]
        return {"error": f"{type(error).__name__}: {first}"}


def main():
    _limit_resources()
    request = json.loads(sys.stdin.buffer.read().decode("utf-8"))
    answer = render(request)
    sys.stdout.write(json.dumps(answer, ensure_ascii=True))


if __name__ == "__main__":
    main()
