"""What a read kept and left out: `Problem` (one bad row), `ReadReport`, `ReadError`."""

import collections
import dataclasses
import logging

from keras_attn.api_export import keras_attn_export
from keras_attn.errors import UserInputError

logger = logging.getLogger("keras_attn.data")


class ReadError(UserInputError):
    """A file that cannot be read at all (no usable header, not JSON, unknown format);
    the message names the file. A bad *row* is never an error: it goes in the report."""


@dataclasses.dataclass
class Problem:
    """One bad row: where it is and why it was left out."""

    file: str
    line: int
    reason: str

    def __str__(self):
        return f"{self.file}:{self.line}: {self.reason}"


@keras_attn_export("keras_attn.data.ReadReport", serializable=False)
@dataclasses.dataclass
class ReadReport:
    """What a reader kept and what it left out, with file and line of each bad row.

    Every row read is either kept or left out with a `Problem`, so
    `num_kept + num_left_out == num_read` (blank lines are not rows).

    Args:
        file: the file read.
        num_read: rows (examples) read.
        num_kept: rows that became examples.
        problems: a `Problem` (`file`, `line`, `reason`) per row left out.

    Call arguments:
        None: a record; `summary()` gives the counts by reason, `str()` adds a line
            per distinct reason: its count and first line numbers.

    Example:

    >>> from keras_attn.data.readers import Problem, ReadReport
    >>> report = ReadReport("reviews.csv", num_read=3, num_kept=2,
    ...                     problems=[Problem("reviews.csv", 4, "empty text")])
    >>> report.summary()
    'reviews.csv: kept 2 of 3 rows; left out 1 (empty text: 1)'
    """

    file: str
    num_read: int = 0
    num_kept: int = 0
    problems: list = dataclasses.field(default_factory=list)

    @property
    def num_left_out(self):
        return len(self.problems)

    def leave_out(self, line, reason):
        """Records a row read and left out at `line` for `reason`."""
        self.num_read += 1
        self.problems.append(Problem(self.file, line, reason))

    def finish(self, num_kept, log=True):
        """Ends a read that kept `num_kept` rows (`leave_out` counted the others) and
        logs the summary if `log`; returns the report."""
        self.num_kept = num_kept
        self.num_read += num_kept
        if log:
            self.log()
        return self

    def counts(self):
        """Rows left out, by reason (the reason's text up to its first colon)."""
        return collections.Counter(p.reason.split(":")[0] for p in self.problems)

    def summary(self):
        text = f"{self.file}: kept {self.num_kept} of {self.num_read} rows"
        if self.problems:
            reasons = ", ".join(f"{reason}: {n}" for reason, n in self.counts().most_common())
            text += f"; left out {self.num_left_out} ({reasons})"
        return text

    def __str__(self, limit=10):
        """The summary, then one line per distinct reason (up to `limit`) with its count
        and its first three line numbers: a reason repeated on a thousand rows is one
        line, not a thousand."""
        lines_of = {}
        for problem in self.problems:
            lines_of.setdefault(problem.reason, []).append(problem.line)
        text = [self.summary()]
        for reason, at in list(lines_of.items())[:limit]:
            line = f"  {self.file}:{at[0]}: {reason}"  # the first, as editors link it
            if len(at) > 1:
                first = ", ".join(str(n) for n in at[:3]) + (", ..." if len(at) > 3 else "")
                line += f" ({len(at):,} rows: lines {first})"
            text.append(line)
        if len(lines_of) > limit:
            text.append(f"  ... and {len(lines_of) - limit} other reasons")
        return "\n".join(text)

    def log(self):
        (logger.warning if self.problems else logger.info)("%s", self)
