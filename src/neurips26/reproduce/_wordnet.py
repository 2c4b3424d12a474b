"""WordNet 3.0 through nltk, read from Debian's ``wordnet-base`` files, offline.

nltk's own ``wordnet`` corpus is a download; the Debian package (``apt-get install
wordnet-base``) ships the same WordNet 3.0 database in ``/usr/share/wordnet``. nltk 3.10
cannot read that folder as it stands:

- the package lacks ``lexnames`` (the 45 lexicographer-file names, printed in the
  ``lexnames(5WN)`` man page), which the reader loads in its constructor;
- nltk's path sandbox only opens files under a root on ``nltk.data.path`` and refuses
  symlinked or hard-linked files, and a system folder is neither a data root nor under
  our control;
- nltk 3.10.4's sandbox also refuses a data root, or any file under it, that another
  account could write (a group or world write bit), whatever the process's umask made
  of the copy;
- the reader's ``map_wn`` compares its version with nltk's downloadable ``wordnet`` and,
  as they differ by name, tries to load that download.

So :func:`wordnet` copies the files once into a private cache folder (atomically: a
reader sees either no folder or a complete one; mode 0755 for the folder and 0644 for
its files, set explicitly so that a umask of 0002 or 0000 does not make nltk refuse
them), writes ``lexnames`` there, adds the
cache to ``nltk.data.path`` and builds a reader whose ``map_wn`` returns ``None``. The
cache is ``$NEURIPS26_CACHE/wordnet-3.0`` (default ``~/.cache/neurips26``).

``index.sense`` is not in the package either: sense-key look-ups
(``lemma_from_key``) do not work; everything else used here (synsets, hypernym paths,
``min_depth``, definitions, examples, ``Lemma.count`` from ``cntlist.rev``) does.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import threading
import warnings
from pathlib import Path

from .._atomic import atomic_directory
from .._cache import cache_root

__all__ = ["wordnet", "wordnet_available", "WordNetMissing", "LEXNAMES", "INSTALL_HINT"]

DEFAULT_ROOT = Path("/usr/share/wordnet")
INSTALL_HINT = "apt-get install wordnet-base"

# the files nltk's reader opens that Debian ships (index.sense it opens only on demand)
_FILES = ("cntlist.rev", "index.noun", "index.verb", "index.adj", "index.adv",
          "data.noun", "data.verb", "data.adj", "data.adv",
          "noun.exc", "verb.exc", "adj.exc", "adv.exc")

# lexnames(5WN): file number, lexicographer file, syntactic category (1 noun, 2 verb,
# 3 adjective, 4 adverb). Numbers are the lex_filenum field of every data.* line.
LEXNAMES = (
    "adj.all 3", "adj.pert 3", "adv.all 4", "noun.Tops 1", "noun.act 1", "noun.animal 1",
    "noun.artifact 1", "noun.attribute 1", "noun.body 1", "noun.cognition 1",
    "noun.communication 1", "noun.event 1", "noun.feeling 1", "noun.food 1", "noun.group 1",
    "noun.location 1", "noun.motive 1", "noun.object 1", "noun.person 1",
    "noun.phenomenon 1", "noun.plant 1", "noun.possession 1", "noun.process 1",
    "noun.quantity 1", "noun.relation 1", "noun.shape 1", "noun.state 1",
    "noun.substance 1", "noun.time 1", "verb.body 2", "verb.change 2", "verb.cognition 2",
    "verb.communication 2", "verb.competition 2", "verb.consumption 2", "verb.contact 2",
    "verb.creation 2", "verb.emotion 2", "verb.motion 2", "verb.perception 2",
    "verb.possession 2", "verb.social 2", "verb.stative 2", "verb.weather 2", "adj.ppl 3",
)
assert len(LEXNAMES) == 45

# bump when the cache's content changes, so an old cache is rebuilt rather than trusted
_CACHE_VERSION = "2"  # 2: modes set explicitly (1 left them to the umask)
_DIR_MODE, _FILE_MODE = 0o755, 0o644
_lock = threading.Lock()


class WordNetMissing(RuntimeError):
    """WordNet's database files are not installed; the message gives the install command."""


def _lexnames_text() -> str:
    return "".join(f"{i:02d}\t{name.split()[0]}\t{name.split()[1]}\n" for i, name in enumerate(LEXNAMES))


def _cache_root() -> Path:
    return cache_root()


def _missing(root: Path) -> list[str]:
    return [name for name in _FILES if not (root / name).is_file()]


def wordnet_available(root: str | os.PathLike = DEFAULT_ROOT) -> bool:
    """True where every database file the reader needs is in ``root``."""
    return not _missing(Path(root))


def _source_stamp(root: Path) -> str:
    # size and mtime of every source file: a reinstalled package rebuilds the cache
    return "\n".join([_CACHE_VERSION, str(root.resolve())]
                     + [f"{n} {(root / n).stat().st_size} {int((root / n).stat().st_mtime)}" for n in _FILES]) + "\n"


@contextlib.contextmanager
def _process_lock(path: Path):
    # two processes of one sweep (ctx.map with --jobs N) may build the cache at once
    import fcntl

    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _not_private(cache: Path) -> list[Path]:
    # what nltk's sandbox would refuse: an entry owned by another account (root's are
    # trusted) or carrying a group or world write bit
    bad = []
    for p in [cache, *cache.iterdir()]:
        st = p.lstat()
        if st.st_uid not in (os.geteuid(), 0) or st.st_mode & 0o022 or p.is_symlink():
            bad.append(p)
    return bad


def _intact(cache: Path, stamp: str) -> bool:
    marker = cache / "NEURIPS26_STAMP"
    try:
        return marker.is_file() and marker.read_text() == stamp and not _not_private(cache)
    except OSError:
        return False


def _ensure_cache(root: Path, cache: Path) -> Path:
    stamp = _source_stamp(root)
    if _intact(cache, stamp):
        return cache
    lock = cache.with_name(f".{cache.name}.lock")
    try:
        with _process_lock(lock):
            if not _intact(cache, stamp):  # else another process built it meanwhile
                _build_cache(root, cache, stamp)
    except OSError as exc:
        raise OSError(
            f"cannot build the WordNet cache in {cache} ({exc.strerror or exc}); point $NEURIPS26_CACHE "
            f"at a writable folder of your own") from exc
    bad = _not_private(cache)
    if bad:  # built by another account: nltk would refuse to read it
        raise PermissionError(
            f"nltk will not read the WordNet cache {cache}: {bad[0]} is owned by another account or "
            f"writable by others; remove the folder or point $NEURIPS26_CACHE elsewhere")
    return cache


def _build_cache(root: Path, cache: Path, stamp: str) -> None:
    with atomic_directory(cache, overwrite=True) as tmp:
        for name in _FILES:
            # copyfile makes a new regular file (nltk refuses symlinks and hard links)
            shutil.copyfile(root / name, tmp / name)
        (tmp / "lexnames").write_text(_lexnames_text())
        # the stamp goes last: its presence means the folder is complete
        (tmp / "NEURIPS26_STAMP").write_text(stamp)
        # nltk refuses group- or world-writable data; the umask decided the modes so far
        for f in tmp.iterdir():
            os.chmod(f, _FILE_MODE)
        os.chmod(tmp, _DIR_MODE)


def _reader_class():
    from nltk.corpus.reader.wordnet import WordNetCorpusReader

    class DebianWordNetReader(WordNetCorpusReader):
        """nltk's reader without the mapping to nltk's downloadable ``wordnet``: this
        database is WordNet 3.0 itself, and the mapping is only for multilingual data."""

        def map_wn(self, version="wordnet"):
            return None

    return DebianWordNetReader


@functools.lru_cache(maxsize=None)
def _load(root: str, cache: str):
    import nltk

    path = _ensure_cache(Path(root), Path(cache))
    # nltk's sandbox opens files only under a data root; resolve() because it compares
    # resolved paths, and the cache itself may sit under a symlinked home
    entry = str(path.resolve())
    if entry not in nltk.data.path:
        nltk.data.path.append(entry)
    with warnings.catch_warnings():
        # "multilingual functions are not available": no OMW data, by design
        warnings.filterwarnings("ignore", message=".*multilingual.*")
        return _reader_class()(entry, None)


def wordnet(root: str | os.PathLike = DEFAULT_ROOT, cache: str | os.PathLike | None = None):
    """nltk's WordNet 3.0 reader over Debian's ``wordnet-base`` files.

    Parameters
    ----------
    root : folder holding ``data.noun``, ``index.noun``, ... (default ``/usr/share/wordnet``).
    cache : folder for the private copy nltk reads (default ``$NEURIPS26_CACHE/wordnet-3.0``,
        ``$NEURIPS26_CACHE`` defaulting to ``~/.cache/neurips26``). Built once, atomically.

    Returns
    -------
    ``nltk.corpus.reader.wordnet.WordNetCorpusReader``: ``synsets``, ``synset``,
    ``all_synsets``, hypernym paths, ``Lemma.count()``; one reader per (root, cache) per
    process.

    Raises
    ------
    WordNetMissing : the files are not in ``root``; the message gives the install command.
    """
    root = Path(root)
    missing = _missing(root)
    if missing:
        raise WordNetMissing(
            f"WordNet 3.0 is not installed in {root} (missing: {', '.join(missing)}); "
            f"install it with `{INSTALL_HINT}` (Debian/Ubuntu, as root)")
    cache = Path(cache) if cache is not None else _cache_root() / "wordnet-3.0"
    with _lock:  # one copy per process even if two threads ask at once
        return _load(str(root.resolve()), str(cache.expanduser().absolute()))
