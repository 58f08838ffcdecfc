#!/usr/bin/env python3
"""Evaluates Locker::renew's run_ttl_ms filter ({run_ttl_ms: {$not: {$gt: TTL}}}) on the test server for the
values a document may carry (a run's, none, hand-edited). Usage: MONGOLOCK_URI=... filter_probe.py"""
import os, sys
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../../integration"))
import mongo  # noqa: E402

db, coll = "rt9probe", "locks"
mongo.command({"drop": coll, "$db": db})
values = {"run30s": 30000, "none": None, "str": "30000", "neg": -1, "zero": 0, "dbl": 30000.9, "huge": 9 * 10**18,
          "eq1s": 1000, "dbl1s": 1000.0}
docs = []
for k, v in values.items():
    d = {"_id": k, "program": k}
    if v is not None:
        d["run_ttl_ms"] = mongo.RawStr(v.encode()) if isinstance(v, str) else v
    docs.append(d)
r = mongo.command({"insert": coll, "documents": docs, "$db": db})
assert r.get("n") == len(docs), r
for ttl in (1000, 30000):
    r = mongo.command({"find": coll, "filter": {"run_ttl_ms": {"$not": {"$gt": ttl}}}, "$db": db})
    got = sorted(d["_id"] for d in r["cursor"]["firstBatch"])
    print(f"TTL {ttl}: matched {got}")
mongo.command({"dropDatabase": 1, "$db": db})
