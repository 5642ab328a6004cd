"""`keras-attn chat` in a pseudo-terminal: replies stream (pieces arrive before the reply
ends), hostile messages (10^6 characters, bytes that are no UTF-8, a template in the
system message) get one error line or a bounded reply, Ctrl-D and Ctrl-C end it with
status 0; the flags are checked before any model loads."""

import fcntl
import os
import pathlib
import pty
import select
import signal
import subprocess
import sys
import termios
import time

import pytest

from tests.training.runs import ROOT, environment

pytest.importorskip("gguf")


def _model(folder):
    from tests.models.llama.gguf_files import write_text_llama_gguf

    return write_text_llama_gguf(folder / "model.gguf")


def _own_terminal():
    """In the child: a session of its own whose controlling terminal is its stdin, and
    SIGINT neither blocked nor ignored, as a shell starts a command (both are inherited
    across `exec`: a test worker's state must not decide what Ctrl-C does)."""
    os.setsid()
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGINT])
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _signal_masks(pid):
    """Each thread's blocked, ignored and caught signals (/proc), for a failure message."""
    lines = []
    for task in sorted(pathlib.Path(f"/proc/{pid}/task").glob("*")):
        try:
            status = (task / "status").read_text().splitlines()
        except OSError:
            continue
        keep = [
            line
            for line in status
            if line.startswith(("Name", "SigPnd", "SigBlk", "SigIgn", "SigCgt"))
        ]
        lines.append(f"{task.name}: " + " ".join(line.replace("\t", "") for line in keep))
    return "\n".join(lines)


class Terminal:
    """`keras-attn chat ARGS` on a pseudo-terminal: what it writes, with arrival times."""

    def __init__(self, *args):
        self.master, slave = pty.openpty()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "keras_attn.cli.main", "chat", *map(str, args)],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            cwd=ROOT,
            # A process that does not end: SIGABRT prints each thread's Python stack.
            env=environment(PYTHONFAULTHANDLER="1"),
            preexec_fn=_own_terminal,  # the terminal's Ctrl-C reaches this process
        )
        os.close(slave)
        self.chunks = []  # (time, bytes)

    def read_until(self, marker, timeout=240):
        """Everything written until `marker` appears after what was read before
        (`None`: until the process ends or `timeout` passes)."""
        start = len(self.text())
        deadline = time.monotonic() + timeout
        while marker is None or marker not in self.text()[start:]:
            if time.monotonic() >= deadline:
                assert marker is None, self.text()[-2000:]
                break
            ready, _, _ = select.select([self.master], [], [], 1)
            if ready:
                try:
                    data = os.read(self.master, 65536)
                except OSError:  # the process ended and closed the terminal
                    break
                self.chunks.append((time.monotonic(), data))
        return self.text()[start:]

    def text(self):
        return b"".join(data for _, data in self.chunks).decode("utf-8", "replace")

    def send(self, data):
        for start in range(0, len(data), 4096):  # a terminal's input buffer is small
            os.write(self.master, data[start : start + 4096])

    def wait(self, timeout=120):
        """The exit status; a process still running after `timeout` seconds (a loaded
        machine takes a few) fails the test with where its threads were."""
        try:
            code = self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            masks = _signal_masks(self.process.pid)
            self.process.send_signal(signal.SIGABRT)
            self.process.wait(timeout=30)
            self.read_until(None, timeout=5)  # what it wrote, the stacks among it
            written = self.text().split("\nExtension modules:")[0]  # the stacks, not the list
            pytest.fail(
                f"no exit {timeout} s after the last key; its threads' signals:\n{masks}\n"
                f"it wrote:\n{written[-6000:]}"
            )
        os.close(self.master)
        return code


@pytest.mark.slow  # two sessions of a small model: about 40 s
def test_chat_streams_replies_in_a_terminal_and_ends_on_ctrl_d_and_ctrl_c(tmp_path):
    path = _model(tmp_path)
    terminal = Terminal(path, "--max-new-tokens", "24")
    terminal.read_until("> ")
    terminal.send(b"caf\xe9 \xff\n")  # bytes that are no UTF-8: one error line
    assert "error: the message is not UTF-8" in terminal.read_until("> ")
    # A message: the reply comes in pieces, the first well before the last.
    terminal.send(b"the theme\n")
    sent = time.monotonic()
    reply = terminal.read_until("> ")
    arrivals = [t for t, data in terminal.chunks if t > sent and data.strip(b"> \r\n")]
    assert len(arrivals) >= 3 and arrivals[-1] - arrivals[0] > 0.05, arrivals
    assert "error" not in reply and reply.strip("> \r\n")
    terminal.send(b"\x04")  # Ctrl-D at the prompt
    assert terminal.wait() == 0

    terminal = Terminal(path)
    terminal.read_until("> ")
    terminal.send(b"\x03")  # Ctrl-C at the prompt
    assert terminal.wait() == 0
    assert "Traceback" not in terminal.text()


@pytest.mark.slow  # a model read and a reply decoded: out of `make test-fast`
def test_hostile_messages_get_one_error_line_or_a_bounded_reply(tmp_path, capsys):
    """10^6 characters (refused before tokenizing: a terminal would cut the line at 4 KB,
    a pipe does not), bytes that are no UTF-8, and a template in the system message (text,
    not code): the conversation goes on, and ends at the end of input with status 0."""
    import io

    from keras_attn.cli.chat import build_parser, converse, settings
    from keras_attn.models import from_gguf

    model = from_gguf(_model(tmp_path))
    template = "{{ 7 * 7 }}{% for x in range(10**9) %}x{% endfor %}<|im_end|>"
    args = build_parser().parse_args(["--max-new-tokens", "8", "--system", template])
    typed = io.BytesIO(b"a" * 10**6 + b"\n" + b"caf\xe9\n" + b"the theme\n")
    out = io.StringIO()
    assert converse(model, args, settings(args), typed, out) == 0
    errors = capsys.readouterr().err.strip().splitlines()
    assert len(errors) == 2
    assert errors[0].startswith("error: a message of 1000000 characters does not fit")
    assert errors[1].startswith("error: the message is not UTF-8")
    replies = [r for r in out.getvalue().split("> ") if r.strip()]
    assert len(replies) == 1 and len(replies[0]) < 8 * 16  # eight tokens at most


@pytest.mark.slow  # a model read: out of `make test-fast`
def test_the_conversation_keeps_to_the_context_and_the_system_message(tmp_path):
    """The oldest turns leave first, the system message stays, and the template's text in
    a message is rendered as text."""
    from keras_attn.cli.chat import fitted
    from keras_attn.models import from_gguf

    model = from_gguf(_model(tmp_path))
    system = {"role": "system", "content": "{{ 7 * 7 }}"}
    turns = [{"role": r, "content": "the theme " * 12} for r in ("user", "assistant") * 4]
    kept = fitted(model, [system, *turns], max_new_tokens=32)
    assert kept[0] == system and 1 < len(kept) < 9 and kept[1:] == turns[9 - len(kept) :]
    prompt = model.preprocessor.tokenizer.apply_chat_template(kept, add_generation_prompt=True)
    assert "{{ 7 * 7 }}" in prompt and "49" not in prompt
    assert fitted(model, [system, {"role": "user", "content": "the " * 200}], 32) is None


@pytest.mark.parametrize(
    "flags, expected",
    [
        (["--top-k", "5"], "give --temperature above 0"),
        (["--temperature", "-1"], "argument --temperature"),
        (["--max-new-tokens", "10000000"], "argument --max-new-tokens"),
        (["--stop", ""], "stop_strings"),
        (["no-such-file.gguf"], "no such file"),
    ],
)
def test_bad_flags_are_one_error_line(flags, expected, capsys):
    from keras_attn.cli import main as cli

    with pytest.raises(SystemExit) as exit:
        cli.main(["chat", *flags])
    lines = capsys.readouterr().err.strip().splitlines()
    assert (
        exit.value.code != 0 and expected in lines[-1] and lines[-1].startswith(("error", "keras"))
    )
