"""Questions, contexts and answer spans from SQuAD-style JSON (v1.1 and v2.0)."""

import dataclasses
import json

from keras_attn.api_export import keras_attn_export
from keras_attn.data.readers.lines import read_all, text_problem
from keras_attn.data.readers.report import ReadError, ReadReport


@keras_attn_export("keras_attn.data.SpanQAData", serializable=False)
@dataclasses.dataclass
class SpanQAData:
    """Examples for `BertSpanQA`: questions, contexts and answer spans.

    Answer positions are UTF-8 byte offsets into the context (what
    tensorflow-text's offsets count); `answer_starts == -1` marks an unanswerable
    question (SQuAD 2.0).

    Args:
        ids: the question ids.
        questions: list of strings.
        contexts: list of strings.
        answers: the first answer text of each question (`""` if none).
        answer_starts: byte offset of the answer's start in its context.
        answer_ends: byte offset just past the answer's end.
        report: the `ReadReport` of the read.

    Call arguments:
        None: a record; `dataset()` gives a `tf.data.Dataset` of dicts.

    Example:

    >>> from keras_attn.data import SpanQAData
    >>> data = SpanQAData(["q1"], ["Who?"], ["Ann sang."], ["Ann"], [0], [3])
    >>> data.contexts[0].encode()[data.answer_starts[0]:data.answer_ends[0]].decode()
    'Ann'
    """

    ids: list
    questions: list
    contexts: list
    answers: list
    answer_starts: list
    answer_ends: list
    report: ReadReport = None

    def __len__(self):
        return len(self.ids)

    def dataset(self):
        import tensorflow as tf

        return tf.data.Dataset.from_tensor_slices(
            {
                "question": self.questions,
                "context": self.contexts,
                "answer_start": tf.constant(self.answer_starts, tf.int32),
                "answer_end": tf.constant(self.answer_ends, tf.int32),
            }
        )


@keras_attn_export("keras_attn.data.read_squad")
def read_squad(path, log=True):
    """Reads SQuAD-style JSON (`data` -> `paragraphs` -> `qas`), v1.1 or v2.0.

    Character offsets (`answer_start`) are checked against the context and turned
    into byte offsets. Questions with an empty question text, no answer (unless
    `is_impossible`), an answer that does not match the context at its offset, a
    byte that is not UTF-8, or entries not laid out as SQuAD's are left out and
    reported; the "line" of a problem is the 1-based number of the question in file
    order (JSON has no useful line numbers), its id included. A file that is not
    JSON at all raises a `ValueError` naming the file and the position.

    Args:
        path: the JSON file (optionally `.bz2`/`.gz`/`.xz`).
        log: log the report's summary.

    Returns:
        A `SpanQAData`.

    Example:

    >>> import json, pathlib, tempfile
    >>> from keras_attn.data import read_squad
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "dev.json"
    >>> qas = [
    ...     {"id": "1", "question": "Who sang?", "answers": [{"text": "Zoë", "answer_start": 0}]},
    ...     {"id": "2", "question": "Who?", "answers": [{"text": "Bob", "answer_start": 0}]},
    ... ]
    >>> squad = {"data": [{"paragraphs": [{"context": "Zoë sang.", "qas": qas}]}]}
    >>> _ = path.write_text(json.dumps(squad))
    >>> data = read_squad(path, log=False)
    >>> data.answers, data.answer_ends
    (['Zoë'], [4])
    >>> [(p.line, p.reason) for p in data.report.problems]
    [(2, "answer does not match the context: id '2', 'Bob' at 0")]
    """
    report = ReadReport(str(path))
    text, failure = read_all(path)
    if failure:
        raise ReadError(f"{path}: {failure}")
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        raise ReadError(
            f"{path}: not JSON: {error.msg} (line {error.lineno}, column {error.colno})"
        ) from None
    if not isinstance(document, dict) or not isinstance(document.get("data", []), list):
        raise ReadError(
            f"{path}: expected SQuAD's layout, an object whose 'data' is a list of articles"
        )
    data = SpanQAData([], [], [], [], [], [], report)
    number = 0
    for index, article in enumerate(document.get("data", [])):
        paragraphs = article.get("paragraphs") if isinstance(article, dict) else None
        if not isinstance(paragraphs, list):
            report.leave_out(number + 1, f"not SQuAD: article {index} has no list of paragraphs")
            continue
        for paragraph in paragraphs:
            context = paragraph.get("context", "") if isinstance(paragraph, dict) else None
            qas = paragraph.get("qas", []) if isinstance(paragraph, dict) else None
            if not isinstance(context, str) or not isinstance(qas, list):
                report.leave_out(
                    number + 1,
                    f"not SQuAD: a paragraph of article {index} has no context "
                    "string and list of questions",
                )
                continue
            for qa in qas:
                number += 1
                example, problem = _question(qa, context, number)
                if problem:
                    report.leave_out(number, problem)
                    continue
                for values, field in zip(
                    example,
                    (
                        data.ids,
                        data.questions,
                        data.contexts,
                        data.answers,
                        data.answer_starts,
                        data.answer_ends,
                    ),
                    strict=True,
                ):
                    field.append(values)
    report.finish(len(data.ids), log)
    return data


def _question(qa, context, number):
    """`((id, question, context, answer, byte start, byte end), None)` or `(None, problem)`."""
    if not isinstance(qa, dict):
        return None, "not SQuAD: a question that is not an object"
    qid, question = qa.get("id", f"#{number}"), qa.get("question", "")
    answers = qa.get("answers") or []
    if not isinstance(question, str) or not isinstance(answers, list):
        return None, f"not SQuAD: id {qid!r} has no question string and list of answers"
    impossible = bool(qa.get("is_impossible", False))
    if not question.strip() or not context.strip():
        return None, f"empty text: id {qid!r}"
    if not answers and not impossible:
        return None, f"no answer: id {qid!r}"
    answer, start = "", -1
    if answers:
        first = answers[0] if isinstance(answers[0], dict) else {}
        answer, start = first.get("text", ""), first.get("answer_start", -1)
        if (
            not isinstance(answer, str)
            or not answer
            or not isinstance(start, int)
            or isinstance(start, bool)
            or start < 0
            or context[start : start + len(answer)] != answer
        ):
            return None, f"answer does not match the context: id {qid!r}, {answer!r} at {start}"
    problem = text_problem({"the question": question, "the context": context, "the answer": answer})
    if problem:
        return None, f"{problem} (id {qid!r})"
    if not answers:
        return (qid, question, context, "", -1, -1), None
    byte_start = len(context[:start].encode("utf-8"))
    return (
        qid,
        question,
        context,
        answer,
        byte_start,
        byte_start + len(answer.encode("utf-8")),
    ), None
