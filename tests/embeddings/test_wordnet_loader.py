"""The offline WordNet loader over Debian's wordnet-base files.

References that do not come from the loader: the raw ``data.*`` lines (lex_filenum and
ss_type fields, parsed here), the ``lexnames(5WN)`` man page, and WordNet 3.0 facts
(82 115 noun synsets, 32 923 synsets with a usage example, dog.n.01 in noun.animal).
"""

from __future__ import annotations

import gzip
import os
import re
from pathlib import Path

import pytest

pytest.importorskip("nltk")

from neurips26.reproduce import _wordnet  # noqa: E402
from neurips26.reproduce._wordnet import (INSTALL_HINT, LEXNAMES, WordNetMissing, wordnet,  # noqa: E402
                                          wordnet_available)

ROOT = Path("/usr/share/wordnet")
needs_wordnet = pytest.mark.skipif(not wordnet_available(ROOT),
                                   reason=f"WordNet 3.0 is not in {ROOT}: {INSTALL_HINT}")


@pytest.fixture(scope="module")
def cached(tmp_path_factory):
    cache = tmp_path_factory.mktemp("wncache") / "wordnet-3.0"
    return wordnet(ROOT, cache=cache), cache


def test_missing_files_raise_with_the_install_command(tmp_path):
    (tmp_path / "data.noun").write_text("")
    with pytest.raises(WordNetMissing, match=re.escape(INSTALL_HINT)) as info:
        wordnet(tmp_path, cache=tmp_path / "cache")
    assert "index.noun" in str(info.value)
    assert not (tmp_path / "cache").exists()
    assert not wordnet_available(tmp_path)


def test_lexnames_match_the_man_page():
    page = Path("/usr/share/man/man5/lexnames.5WN.gz")
    if not page.is_file():
        pytest.skip("lexnames(5WN) man page not installed")
    rows = re.findall(r"^(\d\d)\t(\S+)", gzip.open(page, "rt").read(), flags=re.M)
    assert [(int(i), name) for i, name in rows] == [(i, s.split()[0]) for i, s in enumerate(LEXNAMES)]


@needs_wordnet
def test_lexnames_agree_with_every_synset_line():
    # each data line: offset lex_filenum ss_type ...; the category of the lexicographer
    # file must be the synset's part of speech (s = satellite adjective)
    category = {"n": 1, "v": 2, "a": 3, "s": 3, "r": 4}
    for pos in ("noun", "verb", "adj", "adv"):
        text = (ROOT / f"data.{pos}").read_text(encoding="utf8")
        fields = re.findall(r"^\d{8} (\d\d) ([nvasr]) ", text, flags=re.M)
        assert len(fields) > 3000
        bad = [(f, t) for f, t in set(fields) if int(LEXNAMES[int(f)].split()[1]) != category[t]]
        assert not bad, (pos, bad)


@needs_wordnet
def test_reader_answers_known_wordnet_facts(cached, monkeypatch):
    import nltk

    # the reader must never reach for nltk's downloadable corpus
    monkeypatch.setattr(nltk, "download", lambda *a, **k: pytest.fail("nltk.download called"))
    wn, _ = cached
    assert wn.get_version() == "3.0"
    dog = wn.synset("dog.n.01")
    assert dog.lexname() == "noun.animal"
    assert dog.min_depth() == 8
    assert "Canis" in dog.definition()
    assert dog.examples() == ["the dog barked all night"]
    assert dog.lemmas()[0].count() == 42  # SemCor tag count from cntlist.rev
    assert wn.synsets("entity")[0].min_depth() == 0
    assert wn.map_wn() is None
    assert sum(1 for _ in wn.all_synsets("n")) == 82115


@needs_wordnet
def test_cache_is_a_complete_private_copy(cached):
    _, cache = cached
    lex = (cache / "lexnames").read_text().splitlines()
    assert len(lex) == 45 and lex[6] == "06\tnoun.artifact\t1"
    for name in _wordnet._FILES:
        f = cache / name
        assert not f.is_symlink() and os.stat(f).st_nlink == 1
        assert f.stat().st_size == (ROOT / name).stat().st_size
    assert (cache / "NEURIPS26_STAMP").is_file()
    assert not list(cache.parent.glob(".wordnet-3.0.*.tmp"))  # no half-built folder left


@needs_wordnet
def test_symlinked_root_and_stale_cache(tmp_path, cached):
    # a root made of symlinks (as some installs are) still loads, as the cache holds copies
    linked = tmp_path / "linked"
    linked.mkdir()
    for f in ROOT.iterdir():
        if f.is_file():
            (linked / f.name).symlink_to(f)
    cache = tmp_path / "cache" / "wordnet-3.0"
    _wordnet._ensure_cache(linked, cache)
    assert not (cache / "data.noun").is_symlink()
    # a stamp that no longer matches the sources makes the cache be rebuilt, not trusted
    (cache / "NEURIPS26_STAMP").write_text("stale\n")
    (cache / "data.noun").write_text("truncated")
    _wordnet._ensure_cache(linked, cache)
    assert (cache / "data.noun").stat().st_size == (ROOT / "data.noun").stat().st_size
    # an intact cache is reused as it is
    before = (cache / "data.noun").stat().st_ino
    _wordnet._ensure_cache(linked, cache)
    assert (cache / "data.noun").stat().st_ino == before


@needs_wordnet
@pytest.mark.parametrize("mask", [0o002, 0o000])
def test_cache_is_private_whatever_the_umask(tmp_path, mask):
    # nltk 3.10.4 refuses a data root or file with a group or world write bit: under a CI
    # umask of 0002 a cache that left its modes to the umask could not be read (the
    # PermissionError was raised by the reader, inside the experiment's task)
    cache = tmp_path / "cache" / "wordnet-3.0"
    before = os.umask(mask)
    try:
        wn = wordnet(ROOT, cache=cache)
    finally:
        os.umask(before)
    assert wn.synset("dog.n.01").min_depth() == 8 and len(wn.synsets("run")) == 57
    for p in [cache, *cache.iterdir()]:
        assert p.stat().st_mode & 0o022 == 0, p
    # a cache whose stamp matches but that another account could write is rebuilt, not trusted
    os.chmod(cache / "data.noun", 0o666)
    _wordnet._ensure_cache(ROOT, cache)
    assert (cache / "data.noun").stat().st_mode & 0o777 == 0o644
