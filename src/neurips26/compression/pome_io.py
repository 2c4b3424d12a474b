"""POME over checkpoints on disk: streams tensor by tensor, writes atomically.

A run writes its output into a temporary sibling, ``.{name}.XXXXXXXX.tmp`` (a file, or a
folder for a model folder; ``XXXXXXXX`` is :mod:`tempfile`'s random name), and renames it
into place at the end. A run killed hard (SIGKILL, a power cut) leaves that temporary
behind; the next run of the same output removes it. A run holds an exclusive ``flock``
on its temporary while it writes, so a temporary of a run still in progress is never
taken for a stale one.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
from pathlib import Path
from typing import Callable, Iterator, Unpack

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: no advisory locks
    fcntl = None  # type: ignore[assignment]

from .._atomic import atomic_directory, atomic_open
from .pome import (
    DEFAULT_TARGETS,
    PomeOptions,
    PomeReport,
    Targets,
    check_pome_options,
    check_same_keys,
    edit_tensor,
    match_targets,
)
from .safetensors_io import CheckpointLayout, SafetensorsFile, StreamingWriter

__all__ = ["pome_checkpoint", "total_bytes", "remove_stale_temporaries"]

Callback = Callable[[str, int, bool], None]


def total_bytes(path: str | os.PathLike) -> int:
    """Bytes of tensor data in a checkpoint (for sizing a progress bar)."""
    with CheckpointLayout(path) as layout:
        return sum(f.tensors[n].nbytes for f in layout.files for n in f.tensors)


def _lock(fd: int) -> None:
    """Hold an exclusive advisory lock on an open temporary while it is written (released
    when the descriptor closes, also when the process is killed)."""
    if fcntl is not None:
        fcntl.flock(fd, fcntl.LOCK_EX)


@contextlib.contextmanager
def _locked_directory(path: Path) -> Iterator[None]:
    fd = os.open(path, os.O_RDONLY)
    try:
        _lock(fd)
        yield
    finally:
        os.close(fd)


def _temporary_pattern(out: Path) -> re.Pattern[str]:
    # exactly what neurips26._atomic's atomic_open / atomic_directory create for ``out``:
    # tempfile.mkstemp / mkdtemp(prefix=".{name}.", suffix=".tmp"), whose random part is
    # 8 characters of "abcdefghijklmnopqrstuvwxyz0123456789_"
    return re.compile(rf"\.{re.escape(out.name)}\.[a-z0-9_]{{8}}\.tmp")


def remove_stale_temporaries(out: str | os.PathLike) -> list[str]:
    """Remove the temporaries that an earlier, killed run writing ``out`` left beside it
    (``.{name}.XXXXXXXX.tmp`` files or folders, the names :mod:`neurips26._atomic` gives
    them), except those that a live run still holds locked. Returns the removed paths."""
    out = Path(out)
    if not out.parent.is_dir():
        return []
    pattern = _temporary_pattern(out)
    removed = []
    for path in sorted(out.parent.iterdir()):
        if not pattern.fullmatch(path.name) or path.is_symlink():
            continue
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            continue
        try:
            if fcntl is not None:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError:  # a run in progress holds it
                    continue
            if path.is_dir():
                shutil.rmtree(path)
            else:
                path.unlink()
            removed.append(str(path))
        except OSError:
            continue
        finally:
            os.close(fd)
    return removed


def _write_file(
    src: SafetensorsFile,
    pre: CheckpointLayout,
    dest: Path,
    selected: Callable[[str], bool],
    kwargs: dict,
    report: PomeReport,
    callback: Callback | None,
) -> None:
    layout = [(n, i.dtype, i.shape) for n, i in src.tensors.items()]
    with atomic_open(dest) as fh:
        _lock(fh.fileno())
        writer = StreamingWriter(fh, layout, metadata=src.metadata)
        for name, info in src.tensors.items():
            edit = selected(name) and len(info.shape) >= 2 and info.torch_dtype.is_floating_point
            if edit:
                out, report.edited[name] = edit_tensor(pre.read(name), src.read(name), name, **kwargs)
                writer.write(name, out)
            else:
                if selected(name):
                    report.skipped[name] = "not a floating-point matrix"
                # Untouched tensors are copied as raw bytes: bit-identical by construction.
                writer.write(name, src.raw(name))
            if callback is not None:
                callback(name, info.nbytes, edit)
        writer.close()


def pome_checkpoint(
    pretrained: str | os.PathLike,
    finetuned: str | os.PathLike,
    out: str | os.PathLike,
    targets: Targets = DEFAULT_TARGETS,
    *,
    overwrite: bool = False,
    callback: Callback | None = None,
    **options: Unpack[PomeOptions],
) -> PomeReport:
    """Apply POME to two checkpoints on disk and write the edited one to ``out``.

    ``pretrained`` and ``finetuned`` are each a ``.safetensors`` file or a Hugging Face
    model folder (single file or shards with ``model.safetensors.index.json``; the two
    may be sharded differently). The output mirrors the fine-tuned layout: the same
    shard names, the folder's other files (config, tokenizer, index) copied as they
    are. Only one tensor pair is in memory at a time. Tensors not edited are copied
    byte for byte. The output appears only once it is complete (written to a
    temporary sibling, then renamed). ``callback(name, nbytes, edited)`` is called
    after each tensor. ``options`` are :func:`~neurips26.compression.apply_pome`'s
    (``rank``, ``rank_ratio``, ``scale``, ``gain``, ``svd_method``; :class:`PomeOptions`),
    checked before any file is opened. Temporaries that a killed earlier run of the same
    ``out`` left behind are removed once the inputs have been checked (listed in the
    report's ``stale_removed``).

    Raises (before anything is written): TypeError / ValueError for bad options (named),
    FileNotFoundError for a missing checkpoint or shard, ValueError for a broken shard
    index or safetensors header (naming the file and what is wrong), for checkpoints that
    disagree (naming the tensor) and for NaN / Inf in an edited tensor (naming it; found
    while writing, so the temporary output is removed and ``out`` is left as it was),
    FileExistsError for an existing ``out`` without ``overwrite``.
    """
    kwargs = check_pome_options(options)
    out = Path(out)
    for src in (pretrained, finetuned):
        if out.resolve() == Path(src).resolve():
            raise ValueError(f"output {out} would overwrite input {src}")
    if out.exists() and not overwrite:
        raise FileExistsError(f"output {out} exists; pass overwrite=True (CLI: --overwrite) to replace it")
    selected = match_targets(targets)
    report = PomeReport()
    with CheckpointLayout(pretrained) as pre, CheckpointLayout(finetuned) as ft:
        check_same_keys(pre.where, ft.where)
        # Check every pair before any work, so a mismatch fails in a second, not hours in.
        for name in ft.where:
            a, b = pre.info(name), ft.info(name)
            if a.shape != b.shape or a.dtype != b.dtype:
                raise ValueError(
                    f"tensor {name!r}: pretrained {a.dtype}{list(a.shape)} vs fine-tuned {b.dtype}{list(b.shape)}"
                )
        if not any(selected(n) for n in ft.where):
            raise ValueError(f"no tensor matched the targets; first names: {list(ft.where)[:5]}")
        if not ft.is_folder:
            if out.suffix != ".safetensors":
                raise ValueError(f"output {out}: a single-file checkpoint must be written to a .safetensors path")
            if out.exists() and overwrite and out.is_dir():
                raise ValueError(f"output {out} is a folder, the input is a file")
            report.stale_removed = remove_stale_temporaries(out)
            _write_file(ft.files[0], pre, out, selected, kwargs, report, callback)
        else:
            report.stale_removed = remove_stale_temporaries(out)
            with atomic_directory(out, overwrite=overwrite) as tmp, _locked_directory(tmp):
                for f in ft.files:
                    _write_file(f, pre, tmp / f.path.name, selected, kwargs, report, callback)
                for extra in ft.extra_files:
                    shutil.copy2(extra, tmp / extra.name)
    return report
