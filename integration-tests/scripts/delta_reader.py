"""An independent reader of the lake's Delta tables, for the tests.

For every table directory given, it lists the table's files twice, independently of Octant:
  - by following the Delta protocol itself: the newest checkpoint named by
    `_delta_log/_last_checkpoint` (a Parquet file, read with DuckDB), then every JSON commit
    after it in version order, replaying `add` and `remove` actions (paths URL-decoded);
  - with PyPI `deltalake` (delta-rs's Python build), `DeltaTable.file_uris()`;
and reads the listed files with DuckDB: rows, distinct (topic, partition, offset), distinct
systems and dates. Prints one JSON object: table → what it found.

With DELTA_READER_MATCH=COLUMN=VALUE it also counts the rows with that value in the listed
files ("matching") and in every Parquet file under the table's directory, listed or not
("matching_on_disk": what an erasure must leave at zero). The `erasures` table (no Kafka
columns) is read as its records.

PYTHONPATH must hold DuckDB (.octant/python) and deltalake (.octant/delta).
Usage: python3 delta_reader.py LAKE TABLE...
"""

import json
import os
import sys
import urllib.parse

import duckdb
from deltalake import DeltaTable


def replay(table_dir):
    log = os.path.join(table_dir, "_delta_log")
    if not os.path.isdir(log):
        return None, {}
    files, txns, start = {}, {}, -1
    last = os.path.join(log, "_last_checkpoint")
    if os.path.exists(last):
        with open(last) as f:
            cp = json.load(f)
        start = cp["version"]
        name = os.path.join(log, f"{start:020d}.checkpoint.parquet")
        for add, remove, txn in duckdb.sql(f"SELECT add, remove, txn FROM read_parquet('{name}')").fetchall():
            if add is not None:
                files[urllib.parse.unquote(add["path"])] = True
            if remove is not None:
                files.pop(urllib.parse.unquote(remove["path"]), None)
            if txn is not None:
                txns[txn["appId"]] = txn["version"]
    versions = sorted(int(n[:20]) for n in os.listdir(log) if n.endswith(".json") and n[:20].isdigit())
    for v in versions:
        if v <= start:
            continue
        with open(os.path.join(log, f"{v:020d}.json")) as f:
            for line in f:
                if not line.strip():
                    continue
                action = json.loads(line)
                if "add" in action:
                    files[urllib.parse.unquote(action["add"]["path"])] = True
                elif "remove" in action:
                    files.pop(urllib.parse.unquote(action["remove"]["path"]), None)
                elif "txn" in action:
                    txns[action["txn"]["appId"]] = action["txn"]["version"]
    return sorted(os.path.join(table_dir, p) for p in files), txns


def main():
    lake, tables = sys.argv[1], sys.argv[2:]
    out = {}
    for t in tables:
        table_dir = os.path.join(lake, t)
        files, txns = replay(table_dir)
        if files is None:
            out[t] = None
            continue
        by_deltalake = sorted(urllib.parse.unquote(u.removeprefix("file://")) for u in DeltaTable(table_dir).file_uris())
        found = {"files": files, "deltalake_files": by_deltalake, "txns": txns, "rows": 0, "distinct_offsets": 0, "systems": 0, "dates": 0}
        if t == "erasures":
            listed = "[" + ", ".join("'" + f.replace("'", "''") + "'" for f in files) + "]"
            rel = duckdb.sql(f"SELECT erased_by, reason, predicate, tables, rows FROM read_parquet({listed})")
            found["records"] = [dict(zip(rel.columns, r)) for r in rel.fetchall()] if files else []
            out[t] = found
            continue
        match = os.environ.get("DELTA_READER_MATCH")
        if match:
            column, value = match.split("=", 1)
            on_disk = sorted(os.path.join(d, n) for d, _, names in os.walk(table_dir) if "_delta_log" not in d
                             for n in names if n.endswith(".parquet"))
            for key, paths in (("matching", files), ("matching_on_disk", on_disk)):
                found[key] = 0
                for path in paths:
                    rel = duckdb.sql(f"SELECT * FROM read_parquet('{path}')")
                    if column in rel.columns:
                        found[key] += duckdb.execute(f"SELECT count(*) FROM read_parquet(?) WHERE {column} = ?", [path, value]).fetchone()[0]
            found["files_on_disk"] = len(on_disk)
        if files:
            listed = "[" + ", ".join("'" + f.replace("'", "''") + "'" for f in files) + "]"
            q = (f"SELECT count(*), count(DISTINCT (kafka_topic, kafka_partition, kafka_offset)), count(DISTINCT system_id), "
                 f"count(DISTINCT date) FROM read_parquet({listed}, hive_partitioning = true)")
            found["rows"], found["distinct_offsets"], found["systems"], found["dates"] = duckdb.sql(q).fetchone()
        out[t] = found
    print(json.dumps(out))


main()
