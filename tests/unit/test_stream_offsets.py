"""jobs.streaming.ends_inside_commit on offset files as Delta 4 writes them (the lines below
were copied from a real checkpoint: a table with commits v0 (3 files) and v1 (2 files)
read with maxFilesPerTrigger=1 from its start, then commit v2 (3 files) and v3 (1 file)).
The batch's end offset is the file's last line; gold holds its window watermark in a
batch that ends inside a silver commit (docs/architecture.md, "Late events")."""

from __future__ import annotations

from pathlib import Path

import pytest

from lakecep.jobs.streaming import ends_inside_commit

HEADER = ('v1\n{"batchWatermarkMs":0,"batchTimestampMs":1795917884267,"conf":'
          '{"spark.sql.shuffle.partitions":"4"}}\n')
TABLE = "ba36fb4d-acf7-4955-8582-b13c1286b986"


def _offset(version: int, index: int, starting: bool, source_version: int = 1) -> str:
    return (f'{{"sourceVersion":{source_version},"reservoirId":"{TABLE}",'
            f'"reservoirVersion":{version},"index":{index},'
            f'"isStartingVersion":{str(starting).lower()}}}')


@pytest.mark.parametrize(("offset", "inside"), [
    # the initial snapshot (v0 + v1 = 5 files) one file per batch: inside it until its end,
    # which is the start of version 2
    (_offset(1, 0, True), True),
    (_offset(1, 3, True), True),
    (_offset(2, -1, False), False),
    # commit v2 (3 files) one file per batch: (2, 0), (2, 1), then the start of v3
    (_offset(2, 0, False), True),
    (_offset(2, 1, False), True),
    (_offset(3, -1, False), False),
    # two files per batch over v2 + v3: (2, 1), then v2's last file and v3 -> start of v4
    (_offset(4, -1, False), False),
    # Delta's in-memory base index (-100, never written by Delta 4 but accepted)
    (_offset(4, -100, False, 3), False),
    # a metadata-change index (schema tracking): not a commit's start
    (_offset(4, -20, False, 3), True),
])
def test_a_batch_ends_inside_a_commit_unless_its_offset_is_a_versions_start(
        tmp_path: Path, offset: str, inside: bool) -> None:
    (tmp_path / "offsets").mkdir()
    (tmp_path / "offsets" / "7").write_text(HEADER + offset)
    assert ends_inside_commit(tmp_path, 7) is inside
    assert ends_inside_commit(str(tmp_path), 7) is inside


def test_the_batchs_own_offset_file_is_read(tmp_path: Path) -> None:
    (tmp_path / "offsets").mkdir()
    (tmp_path / "offsets" / "0").write_text(HEADER + _offset(0, 2, False))
    (tmp_path / "offsets" / "1").write_text(HEADER + _offset(1, -1, False) + "\n")
    assert ends_inside_commit(tmp_path, 0)
    assert not ends_inside_commit(tmp_path, 1)
    with pytest.raises(FileNotFoundError):
        ends_inside_commit(tmp_path, 2)
