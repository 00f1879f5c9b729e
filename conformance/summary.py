"""Human-readable dump of spans.pb / logs.pb (OTLP ExportTrace/LogsServiceRequest).

Usage (inside a venv that has opentelemetry-proto):
    python summary.py DIR [DIR ...]      # writes DIR/spans.summary.txt for each
"""

from __future__ import annotations

import sys
from pathlib import Path

TRUNC = 200


def _any_value(v) -> str:
    kind = v.WhichOneof("value")
    if kind is None:
        return "<empty>"
    if kind == "string_value":
        return repr(v.string_value)
    if kind == "bool_value":
        return "true" if v.bool_value else "false"
    if kind == "int_value":
        return str(v.int_value)
    if kind == "double_value":
        return repr(v.double_value)
    if kind == "bytes_value":
        return "bytes:" + v.bytes_value.hex()
    if kind == "array_value":
        return "[" + ", ".join(_any_value(x) for x in v.array_value.values) + "]"
    if kind == "kvlist_value":
        return "{" + ", ".join(f"{kv.key}: {_any_value(kv.value)}" for kv in v.kvlist_value.values) + "}"
    return str(v)


def _trunc(s: str) -> str:
    s = s.replace("\n", "\\n")
    return s if len(s) <= TRUNC else s[:TRUNC] + f"...(+{len(s) - TRUNC} chars)"


def _attrs(attrs, indent: str) -> list[str]:
    return [f"{indent}{kv.key} = {_trunc(_any_value(kv.value))}" for kv in attrs]


KIND = {0: "UNSPECIFIED", 1: "INTERNAL", 2: "SERVER", 3: "CLIENT", 4: "PRODUCER", 5: "CONSUMER"}
STATUS = {0: "UNSET", 1: "OK", 2: "ERROR"}


def summarize_spans(data: bytes) -> str:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    req = ExportTraceServiceRequest()
    req.ParseFromString(data)
    out: list[str] = []
    spans = []
    for rs in req.resource_spans:
        out.append("RESOURCE schema_url=%r" % rs.schema_url)
        out.extend(_attrs(rs.resource.attributes, "  "))
        for ss in rs.scope_spans:
            for sp in ss.spans:
                spans.append((ss, sp))
    # group by trace, order by start time, print as a tree
    traces: dict[bytes, list] = {}
    for ss, sp in spans:
        traces.setdefault(sp.trace_id, []).append((ss, sp))
    names = {sp.span_id: sp.name for _, sp in spans}
    out.append(f"TOTAL spans={len(spans)} traces={len(traces)}")
    for ti, (tid, items) in enumerate(sorted(traces.items(), key=lambda kv: min(s.start_time_unix_nano for _, s in kv[1]))):
        out.append("")
        out.append(f"=== TRACE #{ti + 1} trace_id={tid.hex()} spans={len(items)}")
        by_parent: dict[bytes, list] = {}
        ids = {sp.span_id for _, sp in items}
        for ss, sp in items:
            p = sp.parent_span_id if sp.parent_span_id in ids else b""
            by_parent.setdefault(p, []).append((ss, sp))

        def emit(parent: bytes, depth: int):
            for ss, sp in sorted(by_parent.get(parent, []), key=lambda x: (x[1].start_time_unix_nano, x[1].name)):
                ind = "  " * depth
                pname = names.get(sp.parent_span_id, "-") if sp.parent_span_id else "<root>"
                dur_ms = (sp.end_time_unix_nano - sp.start_time_unix_nano) / 1e6
                out.append(f"{ind}- SPAN {sp.name!r} span_id={sp.span_id.hex()} parent={sp.parent_span_id.hex() or '-'} ({pname})")
                out.append(f"{ind}    kind={KIND.get(sp.kind, sp.kind)} status={STATUS.get(sp.status.code, sp.status.code)}"
                           + (f" status_message={_trunc(repr(sp.status.message))}" if sp.status.message else "")
                           + f" duration_ms={dur_ms:.1f}")
                out.append(f"{ind}    scope={ss.scope.name!r} version={ss.scope.version!r} scope_schema_url={ss.schema_url!r}")
                if ss.scope.attributes:
                    out.extend(_attrs(ss.scope.attributes, ind + "      scope_attr "))
                out.append(f"{ind}    attributes ({len(sp.attributes)}):")
                out.extend(_attrs(sorted(sp.attributes, key=lambda kv: kv.key), ind + "      "))
                for ev in sp.events:
                    out.append(f"{ind}    EVENT {ev.name!r}")
                    out.extend(_attrs(ev.attributes, ind + "      "))
                for ln in sp.links:
                    out.append(f"{ind}    LINK trace={ln.trace_id.hex()} span={ln.span_id.hex()}")
                emit(sp.span_id, depth + 1)

        emit(b"", 0)
    return "\n".join(out) + "\n"


def summarize_logs(data: bytes) -> str:
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

    req = ExportLogsServiceRequest()
    req.ParseFromString(data)
    out = []
    n = 0
    for rl in req.resource_logs:
        for sl in rl.scope_logs:
            for lr in sl.log_records:
                n += 1
                body = _trunc(_any_value(lr.body)) if lr.HasField("body") else "<none>"
                out.append(f"- LOG event_name={lr.event_name!r} scope={sl.scope.name!r} version={sl.scope.version!r} "
                           f"schema_url={sl.schema_url!r} trace_id={lr.trace_id.hex()} span_id={lr.span_id.hex()} "
                           f"severity={lr.severity_text or lr.severity_number}")
                out.append(f"    body = {body}")
                out.extend(_attrs(lr.attributes, "    "))
    return f"\n\n##### LOG RECORDS ({n})\n" + "\n".join(out) + "\n"


def write_summary(d: Path) -> Path:
    d = Path(d)
    text = summarize_spans((d / "spans.pb").read_bytes())
    if (d / "logs.pb").exists():
        text += summarize_logs((d / "logs.pb").read_bytes())
    p = d / "spans.summary.txt"
    p.write_text(text)
    return p


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        print(write_summary(Path(arg)))
