from datetime import timedelta
from pathlib import Path

import pytest

import cep_core
from lakecep.queries import (
    LiveArchiveQuery,
    PatternQuery,
    QueryDefinitionError,
    load_queries,
    load_query,
)


def test_shipped_queries_load_and_compile() -> None:
    queries = {q.id: q for q in load_queries()}
    assert isinstance(queries["rfid_abc"], PatternQuery)
    transit = queries["rfid_transit"]
    assert isinstance(transit, LiveArchiveQuery)
    assert transit.before == timedelta(hours=24)
    for query in queries.values():
        texts = [query.query] if isinstance(query, PatternQuery) else [query.live, query.archive]
        for text in texts:
            assert cep_core.compile_query(text).partition_by == ["object_id"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('id = "x"\nkind = "pattern"\n', "missing or empty string key 'query'"),
        ('id = "x"\nkind = "other"\nquery = "q"\n', "kind must be"),
        ('id = "x"\nkind = "live_archive"\nkey = "k"\n[live]\nquery = "q"\n'
         '[archive]\nquery = "q"\nbefore = "a while"\n', "not a duration"),
        ("id = \n", "not valid TOML"),
    ],
)
def test_invalid_definitions_name_file_and_key(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "q.toml"
    path.write_text(text)
    with pytest.raises(QueryDefinitionError) as err:
        load_query(path)
    assert message in str(err.value) and str(path) in str(err.value)


def test_duplicate_ids_rejected(tmp_path: Path) -> None:
    for name in ("a", "b"):
        (tmp_path / f"{name}.toml").write_text('id = "same"\nquery = "SELECT 1"\n')
    with pytest.raises(QueryDefinitionError, match="duplicate query ids"):
        load_queries(tmp_path)
