"""Spool files: appends are never swallowed by a replay, and one replay runs at a time."""

import stat

from db.spool import append_lines, claimed_files


def test_lines_appended_while_a_replay_claims_the_spool_land_in_a_fresh_file(tmp_path):
    spool = tmp_path / "spool" / "spool-a.jsonl"
    append_lines(spool, ["first"])

    with claimed_files(spool.parent) as claimed:
        append_lines(spool, ["second"])
        claimed_text = [path.read_text() for path in claimed]

    assert claimed_text == ["first\n"]
    assert spool.read_text() == "second\n"


def test_only_one_replay_claims_files_at_a_time(tmp_path):
    directory = tmp_path / "spool"
    append_lines(directory / "spool-a.jsonl", ["record"])

    with claimed_files(directory) as first, claimed_files(directory) as second:
        pass

    assert len(first) == 1 and second == []


def test_a_claim_abandoned_by_a_crash_is_replayed_next_time(tmp_path):
    directory = tmp_path / "spool"
    directory.mkdir()
    abandoned = directory / "replaying-0123.jsonl"
    abandoned.write_text("record\n")

    with claimed_files(directory) as claimed:
        pass

    assert claimed == [abandoned]


def test_spool_files_are_private_to_the_service_user(tmp_path):
    spool = tmp_path / "spool" / "spool-a.jsonl"

    append_lines(spool, ["call content"])

    assert stat.S_IMODE(spool.stat().st_mode) == 0o600
    assert stat.S_IMODE(spool.parent.stat().st_mode) & 0o077 == 0
