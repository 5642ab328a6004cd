"""Chat templates (the Jinja templates GGUF files and Hugging Face tokenizers carry),
rendered in Jinja's immutable sandbox."""


def render_chat_template(template, messages, add_generation_prompt=True, bos=None, eos=None):
    """`template` (Jinja, as `transformers`' chat templates) rendered for `messages` in
    Jinja's immutable sandbox: a template from a file cannot reach Python's objects, and
    its loops are bounded (a `ValueError` names what went wrong)."""
    if not template:
        raise ValueError("This tokenizer has no chat template (its file carried none)")
    if not isinstance(messages, list | tuple) or not all(
        isinstance(m, dict) and isinstance(m.get("role"), str) and "content" in m for m in messages
    ):
        raise TypeError(
            "Expected `messages` as a list of {'role': str, 'content': str} dicts. "
            f"Received: {messages!r:.200}"
        )
    import jinja2
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    environment = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    environment.globals["raise_exception"] = raise_exception
    try:
        return environment.from_string(template).render(
            messages=list(messages),
            add_generation_prompt=add_generation_prompt,
            bos_token=bos or "",
            eos_token=eos or "",
        )
    except jinja2.exceptions.TemplateError as error:
        raise ValueError(f"The chat template failed: {error}") from None
