"""Chat templates (the Jinja templates GGUF files and Hugging Face tokenizers carry),
rendered in Jinja's immutable sandbox in a process with bounded memory and time."""

# The longest a template may take to render, the process's start (about 0.1 s) included.
RENDER_SECONDS = 5


def render_chat_template(template, messages, add_generation_prompt=True, bos=None, eos=None):
    """`template` (Jinja, as `transformers`' chat templates) rendered for `messages` in
    Jinja's immutable sandbox, in a process of its own (`template_sandbox`) whose memory
    is capped at 1 GiB and its time at `RENDER_SECONDS`: a template from a file cannot
    reach Python's objects, nor take the caller's memory or time.

    Raises:
        ValueError: no template, or one that failed, took too much memory or time, or
            wrote more than `template_sandbox.MAX_CHARACTERS` characters (named).
        TypeError: `messages` is not a list of `{"role": str, "content": ...}` dicts.
    """
    import json
    import pathlib
    import subprocess
    import sys

    from keras_attn.data import template_sandbox

    if not template:
        raise ValueError("This tokenizer has no chat template (its file carried none)")
    if not isinstance(template, str):
        raise TypeError(f"Expected the chat template as a string. Received: {template!r:.100}")
    if not isinstance(messages, list | tuple) or not all(
        isinstance(m, dict) and isinstance(m.get("role"), str) and "content" in m for m in messages
    ):
        raise TypeError(
            "Expected `messages` as a list of {'role': str, 'content': str} dicts. "
            f"Received: {messages!r:.200}"
        )
    try:
        request = json.dumps(
            {
                "template": template,
                "messages": list(messages),
                "add_generation_prompt": bool(add_generation_prompt),
                "bos_token": bos or "",
                "eos_token": eos or "",
            }
        )
    except (TypeError, ValueError) as error:
        raise TypeError(
            f"Expected `messages` of strings, numbers, lists and dicts ({error})"
        ) from None
    source = pathlib.Path(template_sandbox.__file__).read_text(encoding="utf-8")
    try:
        done = subprocess.run(
            [sys.executable, "-c", source],
            input=request.encode("utf-8"),
            capture_output=True,
            timeout=RENDER_SECONDS,
            env=_sandbox_environment(),
        )
    except subprocess.TimeoutExpired:
        raise ValueError(
            f"The chat template failed: it took more than {RENDER_SECONDS} s to render"
        ) from None
    except OSError as error:  # an interpreter that cannot be started (embedded Python)
        raise ValueError(
            f"The chat template could not be rendered: {sys.executable!r} did not start "
            f"({error.strerror or error})"
        ) from None
    try:
        answer = json.loads(done.stdout)
    except ValueError:
        answer = None
    if not isinstance(answer, dict) or not isinstance(answer.get("text", answer.get("error")), str):
        answer = {"error": f"its process ended with status {done.returncode} and no answer"}
    if "text" not in answer:
        raise ValueError(f"The chat template failed: {answer['error']}")
    return answer["text"]


def _sandbox_environment():
    """The caller's environment, with Jinja's and MarkupSafe's folders on PYTHONPATH
    (where a caller found them on `sys.path` alone)."""
    import os
    import pathlib

    import jinja2
    import markupsafe

    folders = [str(pathlib.Path(m.__file__).parent.parent) for m in (jinja2, markupsafe)]
    path = os.pathsep.join(dict.fromkeys(folders + [os.environ.get("PYTHONPATH", "")]))
    return dict(os.environ, PYTHONPATH=path.rstrip(os.pathsep))


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
