"""Whole-space results are computed once per checkpoint and package source, then read (encdec.whole_space)."""

from __future__ import annotations

import json

from encdec import data, whole_space


def test_a_result_is_computed_once_then_read(tmp_path, monkeypatch):
    monkeypatch.setenv("ENCDEC_CACHE", str(tmp_path))
    calls = []

    def compute():
        calls.append(1)
        return [{"name": "intact", "right": 19602, "error": None}]

    first = whole_space.cached("probe", "modern", (data,), compute)
    second = whole_space.cached("probe", "modern", (data,), compute)
    assert first == second and len(calls) == 1
    (written,) = tmp_path.glob("probe-modern-*.json")
    assert json.loads(written.read_text()) == first


def test_the_key_follows_the_checkpoint_and_the_source():
    assert whole_space.key("modern", (data,)) != whole_space.key("historical", (data,))
    assert whole_space.key("modern", (data,)) != whole_space.key("modern", (data, whole_space))


def test_an_unwritable_cache_only_costs_the_computation(tmp_path, monkeypatch):
    blocked = tmp_path / "file"
    blocked.write_text("")
    monkeypatch.setenv("ENCDEC_CACHE", str(blocked / "sub"))  # below a file: cannot be made
    assert whole_space.cached("probe", "modern", (data,), lambda: [1, 2]) == [1, 2]
