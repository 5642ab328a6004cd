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


class ChatTokenizerMixin:
    """What a GGUF file's tokenizer adds to keras-hub's (`ByteLevelBPETokenizer`,
    `GGUFSentencePieceTokenizer`): its start, end and padding tokens, as keras-hub's
    special tokens (`start_token_id`, ...), and its chat template."""

    def _set_chat_tokens(self, start_token, end_token, pad_token, chat_template):
        """Before keras-hub's `__init__`, which looks the tokens' ids up."""
        self.chat_template = chat_template
        for name, token in (
            ("start_token", start_token),
            ("end_token", end_token),
            ("pad_token", pad_token),
        ):
            if token is not None:
                self._add_special_token(token, name)

    def apply_chat_template(self, messages, add_generation_prompt=True):
        """The prompt text of a conversation, as the model's chat template (the Jinja
        template its file carries) writes it.

        Args:
            messages: a list of `{"role": ..., "content": ...}` dicts.
            add_generation_prompt: end with the assistant's turn opened.

        Returns:
            The prompt string.
        """
        return render_chat_template(
            self.chat_template,
            messages,
            add_generation_prompt,
            getattr(self, "start_token", None),
            getattr(self, "end_token", None),
        )

    def _chat_config(self):
        """The `get_config` entries of `_set_chat_tokens`'s arguments."""
        return {
            "start_token": getattr(self, "start_token", None),
            "end_token": getattr(self, "end_token", None),
            "pad_token": getattr(self, "pad_token", None),
            "chat_template": self.chat_template,
        }
