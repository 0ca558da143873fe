"""Reading a crash_writer oracle and checking a recovered database against it.

Every acknowledged operation must be reflected (a SIGKILL loses nothing the
writer handed to the OS, synced or not); the one operation in flight at the
kill may be entirely present or entirely absent, never partly. Once checked,
the in-flight operation's fate is appended to the oracle ({"resolved": n,
"applied": bool}) so that the next cycle builds on what the database holds.
"""

from __future__ import annotations

import json


def load(oracle_path: str):
    """(acknowledged ops in order, the in-flight op or None, highest op id)."""
    intents = {}
    order = []
    acked = set()
    with open(oracle_path, "rb") as f:
        for raw in f:
            try:
                line = json.loads(raw)
            except ValueError:
                continue  # a line cut by the kill
            if "ack" in line:
                acked.add(line["ack"])
            elif "resolved" in line:
                if line["applied"]:
                    acked.add(line["resolved"])
                else:
                    order.remove(line["resolved"])
            else:
                intents[line["op"]] = line
                order.append(line["op"])
    done = [intents[n] for n in order if n in acked]
    pending = [intents[n] for n in order if n not in acked]
    assert len(pending) <= 1, f"more than one operation in flight: {pending}"
    return done, (pending[0] if pending else None), (order[-1] if order else 0)


def apply(model: dict, op: dict) -> None:
    for key_hex, value_hex in op["items"]:
        key = bytes.fromhex(key_hex)
        if value_hex is None:
            model.pop(key, None)
        else:
            model[key] = bytes.fromhex(value_hex)


def verify(db, oracle_path: str) -> tuple[int, bool]:
    """Assert the database matches the oracle; returns (ops verified, whether
    the in-flight op was found applied)."""
    done, pending, _ = load(oracle_path)
    model: dict = {}
    for op in done:
        apply(model, op)
    actual = dict(db.scan())
    if actual == model:
        applied = False
    else:
        assert pending is not None, _describe(actual, model)
        with_pending = dict(model)
        apply(with_pending, pending)
        assert actual == with_pending, _describe(actual, with_pending)
        applied = True
    if pending is not None:
        with open(oracle_path, "a") as f:
            f.write(json.dumps({"resolved": pending["op"], "applied": applied}) + "\n")
    return len(done), applied


def _describe(actual: dict, expected: dict) -> str:
    missing = sorted(set(expected) - set(actual))[:5]
    extra = sorted(set(actual) - set(expected))[:5]
    wrong = sorted(k for k in set(actual) & set(expected) if actual[k] != expected[k])[:5]
    return f"database differs from oracle: missing {missing}, unexpected {extra}, wrong values {wrong}"
