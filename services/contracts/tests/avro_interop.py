#!/usr/bin/env python3
"""The independent Avro implementation of Octant's interoperability tests: fastavro.

Reads a request (JSON) on stdin, answers JSON on stdout:

  {"schemas_dir": DIR,                       every .avsc under it, current and released
   "write": [{"file": F, "json": VALUE, "confluent_id": N}, ...],
   "read":  ["<hex of an Octant single-object record>", ...]}

  -> {"fastavro": VERSION,
      "canonical": {path: parsing canonical form},      fastavro.schema.to_parsing_canonical_form
      "fingerprint": {path: hex},                       CRC-64-AVRO, header byte order
      "written": [{"single_object": hex, "confluent": hex, "plain": hex}, ...],
      "read": [{"path": schema path the fingerprint named, "json": VALUE}, ...]}

VALUE is Octant's JSON of a record (the schema's field names; bytes as arrays of numbers,
timestamps as epoch milliseconds). Writing converts it to fastavro's datum (bytes objects) and
writes with fastavro's schemaless writer; single-object and Confluent headers are built from
fastavro's own fingerprint and the given id. Reading looks the fingerprint up among fastavro's
fingerprints of every schema file and decodes with fastavro's schemaless reader, then converts
back (datetimes to epoch milliseconds, bytes to arrays).
"""
import datetime
import io
import json
import os
import struct
import sys

import fastavro
from fastavro.schema import fingerprint, parse_schema, to_parsing_canonical_form


def load_schemas(root):
    out = {}
    for dirpath, _, files in os.walk(root):
        for f in sorted(files):
            if f.endswith(".avsc"):
                path = os.path.relpath(os.path.join(dirpath, f), root).replace(os.sep, "/")
                with open(os.path.join(dirpath, f)) as fh:
                    out[path] = json.load(fh)
    return out


def convert(schema, value, named, ns, to_avro):
    """Walks VALUE along SCHEMA: bytes <-> lists of numbers, datetimes -> epoch ms."""
    if isinstance(schema, str):
        if schema in named:
            return convert(named[schema], value, named, ns, to_avro)
        if "." not in schema and ns and f"{ns}.{schema}" in named:
            return convert(named[f"{ns}.{schema}"], value, named, ns, to_avro)
        if schema == "bytes" and value is not None:
            return bytes(value) if to_avro else list(value)
        return value
    if isinstance(schema, list):
        if value is None:
            return None
        branches = [b for b in schema if b != "null"]
        assert len(branches) == 1, f"only [null, T] unions occur in Octant's schemas: {schema}"
        return convert(branches[0], value, named, ns, to_avro)
    t = schema["type"]
    if isinstance(t, (dict, list)):
        return convert(t, value, named, ns, to_avro)
    if t in ("record", "error"):
        name = schema["name"]
        sns = schema.get("namespace", ns) if "." not in name else name.rsplit(".", 1)[0]
        full = name if "." in name else (f"{sns}.{name}" if sns else name)
        named[full] = schema
        return {f["name"]: convert(f["type"], value.get(f["name"]) if to_avro else value[f["name"]], named, sns, to_avro)
                for f in schema["fields"]} if value is not None else None
    if t in ("enum", "fixed"):
        name = schema["name"]
        sns = schema.get("namespace", ns)
        named[name if "." in name else f"{sns}.{name}"] = schema
        return value
    if t == "array":
        return [convert(schema["items"], v, named, ns, to_avro) for v in value]
    if t == "map":
        return {k: convert(schema["values"], v, named, ns, to_avro) for k, v in value.items()}
    if not to_avro and isinstance(value, datetime.datetime):
        return round(value.timestamp() * 1000)
    if t == "bytes" and value is not None:
        return bytes(value) if to_avro else list(value)
    return value


def main():
    req = json.load(sys.stdin)
    raw = load_schemas(req["schemas_dir"])
    parsed = {p: parse_schema(s, _force=True) for p, s in raw.items()}
    canonical = {p: to_parsing_canonical_form(s) for p, s in raw.items()}
    fps = {p: fingerprint(canonical[p], "CRC-64-AVRO") for p in raw}
    by_fp = {}
    for p, fp in fps.items():
        # Current schemas win over an identical released copy.
        if fp not in by_fp or not p.startswith("released/"):
            by_fp[fp] = p

    written = []
    for w in req.get("write", []):
        path = w["file"]
        datum = convert(raw[path], w["json"], {}, "", True)
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, parsed[path], datum)
        plain = buf.getvalue()
        written.append({
            "single_object": (b"\xc3\x01" + bytes.fromhex(fps[path]) + plain).hex(),
            "confluent": (b"\x00" + struct.pack(">I", w["confluent_id"]) + plain).hex(),
            "plain": plain.hex(),
        })

    read = []
    for h in req.get("read", []):
        b = bytes.fromhex(h)
        if b[:2] != b"\xc3\x01":
            raise SystemExit(f"not a single-object record: {h[:20]}")
        path = by_fp.get(b[2:10].hex())
        if path is None:
            read.append({"path": None, "json": None})
            continue
        datum = fastavro.schemaless_reader(io.BytesIO(b[10:]), parsed[path], None)
        read.append({"path": path, "json": convert(raw[path], datum, {}, "", False)})

    json.dump({"fastavro": fastavro.__version__, "canonical": canonical, "fingerprint": fps,
               "written": written, "read": read}, sys.stdout)


if __name__ == "__main__":
    main()
