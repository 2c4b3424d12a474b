"""AsyncBayesOpt's journal survives a crash in the middle of a write (issue 22, section 1).

A crash can cut the journal anywhere: at every byte offset of its last two records (and, by
hypothesis, anywhere after the header, which is written atomically), resuming twice must keep
every evaluation whose result line was complete, exactly once, re-run the ones whose result
was cut, never glue two records onto one line, and leave a journal the next resume reads
without repairs. The objective and the proposer are cheap (no GP) so that every offset runs."""

import json
import warnings
from concurrent.futures import Executor, Future

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("botorch")
from neurips26.bayesopt import AsyncBayesOpt, RandomProposer, SearchSpace  # noqa: E402
from neurips26.bayesopt.async_bo import JOURNAL_FORMAT, JournalWarning  # noqa: E402

BOUNDS = torch.tensor([[-1.0, -1.0], [1.0, 1.0]], dtype=torch.float64)
SPACE = SearchSpace(BOUNDS)


class InlineExecutor(Executor):
    """Runs each call at submit: a deterministic executor without threads."""

    def submit(self, fn, /, *args, **kwargs):
        fut = Future()
        try:
            fut.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # noqa: BLE001
            fut.set_exception(exc)
        return fut


def bowl(x):
    return float(-((x - 0.3) ** 2).sum())


def run(path, max_evals, seed, n_workers=2, calls=None):
    def objective(x):
        if calls is not None:
            calls.append(tuple(x.tolist()))
        return bowl(x)

    bo = AsyncBayesOpt(objective, SPACE, RandomProposer(SPACE, seed=seed), InlineExecutor(), n_workers=n_workers,
                       journal=path, model_factory=lambda X, Y: None, n_init=3)
    return bo.run(max_evals=max_evals)


_BASE: dict = {}


def base_journal(tmp_path_factory, n_evals=6, n_workers=2) -> bytes:
    key = (n_evals, n_workers)
    if key not in _BASE:
        path = tmp_path_factory.mktemp("base") / "j.jsonl"
        run(path, n_evals, seed=0, n_workers=n_workers)
        _BASE[key] = path.read_bytes()
    return _BASE[key]


def complete_state(prefix: bytes):
    """What a crash that left ``prefix`` has durably recorded: {id: x} submitted and
    {id: (x, y)} finished (complete lines, plus a last line that is a whole record)."""
    lines = prefix.split(b"\n")
    tail = lines.pop()
    records = []
    for line in lines[1:] + [tail]:
        try:
            records.append(json.loads(line))
        except ValueError:
            assert line is tail, "only the last line can be torn here"
    submitted, finished = {}, {}
    for r in records:
        if r["event"] == "submit":
            submitted[r["id"]] = r["x"]
        elif r["id"] in submitted:
            finished[r["id"]] = (submitted[r["id"]], r["y"])
    return submitted, finished


def check_resumes(path, prefix: bytes, first_evals: int):
    path.write_bytes(prefix)
    submitted, finished = complete_state(prefix)
    torn = _tail_is_torn(prefix)
    lost = {i: x for i, x in submitted.items() if i not in finished}
    calls = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res1 = run(path, first_evals + 2, seed=1, calls=calls)
    journal_warnings = [w for w in caught if issubclass(w.category, JournalWarning)]
    assert res1.skipped_records == int(torn) and len(journal_warnings) == int(torn)
    assert len(res1.Y) + len(res1.failed) == first_evals + 2
    xs1 = [tuple(x) for x in res1.X.tolist()]
    for x, y in finished.values():  # nothing finished is lost, duplicated, or evaluated again
        assert xs1.count(tuple(x)) == 1 and tuple(x) not in calls
        assert float(res1.Y[xs1.index(tuple(x))]) == y
    for x in lost.values():  # what was running when the driver died runs once more
        assert calls.count(tuple(x)) == 1
    after1 = check_file(path)
    for i, (x, y) in finished.items():
        assert after1[i] == y
    # the second resume needs no repair and keeps everything
    with warnings.catch_warnings():
        warnings.simplefilter("error", JournalWarning)
        res2 = run(path, first_evals + 4, seed=2)
    assert res2.skipped_records == 0 and len(res2.Y) + len(res2.failed) == first_evals + 4
    xs2 = [tuple(x) for x in res2.X.tolist()]
    assert all(xs2.count(x) == 1 for x in xs1)
    after2 = check_file(path)
    assert all(after2[i] == y for i, y in after1.items())


def _tail_is_torn(prefix: bytes) -> bool:
    """Whether the crash cut a record (rather than between records or after a whole one)."""
    tail = prefix.rsplit(b"\n", 1)[-1]
    if not tail:
        return False
    try:
        json.loads(tail)
        return False
    except ValueError:
        return True


def check_file(path) -> dict:
    """Every line of the journal a whole JSON record, the header first, at most one result
    per id, each after its submit; returns {id: y} of the results."""
    data = path.read_bytes()
    assert data.endswith(b"\n")
    lines = [json.loads(line) for line in data.split(b"\n")[:-1]]
    assert lines[0] == {"event": "journal", "format": JOURNAL_FORMAT, "version": 1, "dim": 2}
    seen, results = set(), {}
    for r in lines[1:]:
        if r["event"] == "submit":
            seen.add(r["id"])
        else:
            assert r["id"] in seen and r["id"] not in results
            results[r["id"]] = r["y"]
    return results


def test_truncated_at_every_offset_of_the_last_two_records(tmp_path, tmp_path_factory):
    data = base_journal(tmp_path_factory)
    ends = [i + 1 for i, b in enumerate(data) if b == ord("\n")]
    start = ends[-3]  # the beginning of the second-to-last record
    assert len(ends) >= 5 and len(data) - start > 100
    for offset in range(start, len(data) + 1):
        check_resumes(tmp_path / f"j{offset}.jsonl", data[:offset], first_evals=6)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n_evals=st.integers(1, 7), n_workers=st.integers(1, 3), where=st.floats(0.0, 1.0))
def test_random_crash_points(tmp_path_factory, n_evals, n_workers, where):
    data = base_journal(tmp_path_factory, n_evals, n_workers)
    header_end = data.index(b"\n") + 1  # the header is written atomically: a crash cannot cut it
    offset = header_end + round(where * (len(data) - header_end))
    path = tmp_path_factory.mktemp("crash") / "j.jsonl"
    check_resumes(path, data[:offset], first_evals=n_evals)


def _legacy_lines(n=4):
    """A journal of the previous version: records, no header."""
    out = []
    for i in range(n):
        x = [0.1 * i, -0.1 * i]
        out.append({"event": "submit", "id": i, "x": x, "initial": True, "time": 0.0})
        out.append({"event": "result", "id": i, "status": "ok", "y": bowl(torch.tensor(x)), "error": None,
                    "time": 0.0})
    return out


def test_a_journal_of_the_previous_version_is_upgraded(tmp_path):
    path = tmp_path / "old.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in _legacy_lines()))
    calls = []
    res = run(path, 6, seed=1, calls=calls)
    assert len(res.Y) == 6 and len(calls) == 2 and res.skipped_records == 0
    assert [0.2, -0.2] in res.X.tolist()
    assert len(check_file(path)) == 6  # now with a header in front


def test_the_glued_journal_of_the_old_bug_resumes(tmp_path):
    """The previous version glued the next record onto a torn line, then raised KeyError on
    every later resume. Such a journal now resumes: the glued line is skipped and counted,
    the evaluation it finished runs again."""
    lines = [json.dumps(r) for r in _legacy_lines(3)]
    glued = '{"event": "result", "id": 2, "sta' + lines[-1]  # result 2 torn, then written again
    text = "\n".join(lines[:-1] + [glued]) + "\n" + json.dumps(
        {"event": "result", "id": 7, "status": "ok", "y": 1.0, "error": None}) + "\n"  # no submit 7
    path = tmp_path / "glued.jsonl"
    path.write_text(text)
    calls = []
    with pytest.warns(JournalWarning, match=r"skipped 2 record"):
        res = run(path, 4, seed=1, calls=calls)
    assert res.skipped_records == 2 and len(res.Y) == 4
    assert calls[0] == (0.2, -0.2)  # id 2's result was lost in the glue: it runs again
    with pytest.warns(JournalWarning, match=r"skipped 2 record"):  # the skipped lines stay, counted again
        res = run(path, 5, seed=2)  # and the journal keeps working
    assert len(res.Y) == 5 and res.skipped_records == 2


def test_broken_lines_and_orphans_are_skipped_and_counted(tmp_path):
    lines = [json.dumps(r) for r in _legacy_lines(3)]
    header = json.dumps({"event": "journal", "format": JOURNAL_FORMAT, "version": 1, "dim": 2})
    bad = ["{not json", json.dumps({"event": "result", "id": 11, "status": "ok", "y": 0.0}),
           json.dumps({"event": "submit", "id": 12, "x": [0.1]}),  # wrong dimension
           json.dumps({"event": "result", "id": 1, "status": "ok", "y": 5.0}),  # a second result of id 1
           "\x00\x01 binary"]
    path = tmp_path / "j.jsonl"
    path.write_text("\n".join([header] + lines[:3] + bad[:3] + lines[3:] + bad[3:]) + "\n")
    with pytest.warns(JournalWarning, match="skipped 5 record"):
        res = run(path, 3, seed=1)
    assert res.skipped_records == 5 and len(res.Y) == 3
    assert sorted(res.Y.tolist()) == sorted(r["y"] for r in _legacy_lines(3) if r["event"] == "result")


def test_a_file_that_is_not_a_journal_is_refused_and_left_alone(tmp_path):
    for text in ["shopping list\nmilk\n", '{"a": 1}\n', "no newline at all"]:
        path = tmp_path / "notes.txt"
        path.write_text(text)
        with pytest.raises(ValueError, match=r"notes\.txt is not an AsyncBayesOpt journal"):
            run(path, 2, seed=0)
        assert path.read_text() == text


def test_an_empty_file_or_a_torn_first_write_starts_a_journal(tmp_path):
    for text in ["", '{"event": "submit", "id": 0, "x": [0.1']:
        path = tmp_path / "j.jsonl"
        path.write_text(text)
        res = run(path, 3, seed=0)
        assert len(res.Y) == 3 and len(check_file(path)) == 3
