#!/usr/bin/env python3
"""Look at the test server directly, without mongolock (the integration suites use it to check what
mongolock stored). Standard library only: a minimal BSON codec and OP_MSG, no authentication.

    mongo.py doc NAME   the lock document of NAME as key=value lines (dates as epoch milliseconds,
                        ObjectIds as hex); exit 1 when there is none
    mongo.py count      number of documents in the collection (0 when it does not exist)
    mongo.py now        the server's clock (hello's localTime), epoch milliseconds
    mongo.py tickets NAME  the queue tickets of NAME (collection <collection>_queue), one
                        "seq process" line each, in seq order; expired ones too
    mongo.py ticket-expiries NAME  one "process expires_at" line per ticket of NAME (epoch ms), in seq order
    mongo.py insert-ticket NAME SEQ PROCESS SECONDS  insert a queue ticket of NAME with that seq and holder,
                        live for SECONDS from the server's clock: a waiter (or, seq < 0, a waiting
                        replacing run) as another client would have queued it
    mongo.py set NAME FIELD VALUE  set a string field of NAME's lock document to VALUE's bytes as given
                        (also invalid UTF-8): what another client could store; FIELD:int, FIELD:double
                        and FIELD:doc store VALUE as an int64, a double or the document {x: VALUE}
    mongo.py unset NAME FIELD...  remove these fields from NAME's lock document (an older version's)
    mongo.py runs [NAME]  the run history (collection <collection>_runs), of NAME or of every name, as one
                        JSON array, newest first (dates as epoch milliseconds)
    mongo.py insert-run KEY=VALUE...  insert a run document: KEY=text (its bytes as given, also invalid
                        UTF-8), KEY:int=N, KEY:date=EPOCH-MS, KEY:list=A,B (strings): what another client
                        (or an older run) could have stored; --times N first: N such documents
                        in one insert (KEY:date values then grow by 1 ms per document; "{i}" in a value
                        becomes the document's number)
    mongo.py unique-index SUFFIX FIELD  create a unique index on FIELD of collection <collection>SUFFIX
    mongo.py index SUFFIX NAME FIELD  create an index NAME on FIELD of <collection>SUFFIX, not unique (as an
                        operator's createIndex by hand)
    mongo.py index-on SUFFIX NAME FIELD...  the same on several fields, in that order
    mongo.py drop-index SUFFIX NAME  drop the index NAME of <collection>SUFFIX
    mongo.py indexes SUFFIX  the indexes of <collection>SUFFIX, one "name unique|plain" line each
    mongo.py remove NAME TOKEN  delete NAME's lock document if its token is TOKEN (as a release by another
                        client that knows the token: no guard, no wake-up event); exit 1 when none was deleted
    mongo.py drop       drop the collection, its _queue, _fences, _runs and _lastrun collections and the _events
                        collection in database <db>_events (missing is fine)
    mongo.py events     number of wake-up events (collection <collection>_events in database <db>_events)
    mongo.py insert-events N AGE_MS  insert N wake-up events {name: "old", t: now - AGE_MS + i}, i = 0..N-1,
                        creating their capped collection as mongolock does when it is missing
    mongo.py is-ferretdb  1 when the server is FerretDB (buildInfo.ferretdbVersion), else 0

Server: $MONGOLOCK_URI (mongodb://host:port[/...], no credentials); database $MONGOLOCK_DB (default
mongolock), collection $MONGOLOCK_COLLECTION (default locks). Errors exit 2.
"""
import json
import os
import re
import socket
import struct
import sys
import time


class Date:
    """A BSON UTC datetime, epoch milliseconds."""

    def __init__(self, ms):
        self.ms = ms


class RawStr:
    """A BSON string given as bytes, sent as they are (for planting what another client could store)."""

    def __init__(self, data):
        self.data = data


def cstring(s):
    return s.encode() + b"\0"


def encode(doc):
    out = b""
    for key, value in doc.items():
        if isinstance(value, bool):
            out += b"\x08" + cstring(key) + (b"\x01" if value else b"\x00")
        elif isinstance(value, int):
            out += b"\x12" + cstring(key) + struct.pack("<q", value)
        elif isinstance(value, float):
            out += b"\x01" + cstring(key) + struct.pack("<d", value)
        elif isinstance(value, Date):
            out += b"\x09" + cstring(key) + struct.pack("<q", value.ms)
        elif isinstance(value, RawStr):
            out += b"\x02" + cstring(key) + struct.pack("<i", len(value.data) + 1) + value.data + b"\0"
        elif isinstance(value, str):
            data = value.encode()
            out += b"\x02" + cstring(key) + struct.pack("<i", len(data) + 1) + data + b"\0"
        elif isinstance(value, dict):
            out += b"\x03" + cstring(key) + encode(value)
        elif isinstance(value, list):
            out += b"\x04" + cstring(key) + encode({str(i): v for i, v in enumerate(value)})
        else:
            raise TypeError(f"cannot encode {key}={value!r}")
    return struct.pack("<i", len(out) + 5) + out + b"\0"


def decode(data, pos=0):
    """Returns (dict, position after the document)."""
    (length,) = struct.unpack_from("<i", data, pos)
    end = pos + length - 1
    pos += 4
    doc = {}
    while pos < end:
        kind = data[pos]
        pos += 1
        key_end = data.index(b"\0", pos)
        key = data[pos:key_end].decode()
        pos = key_end + 1
        if kind == 0x01:
            (value,) = struct.unpack_from("<d", data, pos)
            pos += 8
        elif kind in (0x02, 0x0D, 0x0E):
            (n,) = struct.unpack_from("<i", data, pos)
            value = data[pos + 4 : pos + 3 + n].decode("utf-8", "replace")
            pos += 4 + n
        elif kind in (0x03, 0x04):
            value, pos = decode(data, pos)
            if kind == 0x04:
                value = list(value.values())
        elif kind == 0x05:
            (n,) = struct.unpack_from("<i", data, pos)
            value = data[pos + 5 : pos + 5 + n].hex()
            pos += 5 + n
        elif kind == 0x07:
            value = data[pos : pos + 12].hex()
            pos += 12
        elif kind == 0x08:
            value = data[pos] != 0
            pos += 1
        elif kind in (0x06, 0x0A, 0x7F, 0xFF):
            value = None
        elif kind == 0x09:
            (value,) = struct.unpack_from("<q", data, pos)
            pos += 8
        elif kind == 0x10:
            (value,) = struct.unpack_from("<i", data, pos)
            pos += 4
        elif kind in (0x11, 0x12):
            (value,) = struct.unpack_from("<q", data, pos)
            pos += 8
        elif kind == 0x13:
            value = data[pos : pos + 16].hex()
            pos += 16
        else:
            raise ValueError(f"unsupported BSON type 0x{kind:02x} for {key}")
        doc[key] = value
    return doc, end + 1


def die(message):
    print(f"mongo.py: {message}", file=sys.stderr)
    sys.exit(2)


def server_address():
    uri = os.environ.get("MONGOLOCK_URI", "")
    m = re.fullmatch(r"mongodb://([^@/,?]+):(\d+)(/.*)?", uri)
    if not m:
        die(f"MONGOLOCK_URI '{uri}' is not mongodb://host:port[/...] without credentials")
    return m.group(1), int(m.group(2))


def command(cmd):
    body = struct.pack("<I", 0) + b"\0" + encode(cmd)
    header = struct.pack("<iiii", 16 + len(body), 1, 0, 2013)  # OP_MSG
    with socket.create_connection(server_address(), timeout=10) as s:
        s.sendall(header + body)
        reply = b""
        while len(reply) < 4 or len(reply) < struct.unpack_from("<i", reply)[0]:
            chunk = s.recv(65536)
            if not chunk:
                die("the server closed the connection")
            reply += chunk
    doc, _ = decode(reply, 16 + 5)  # header, flagBits, section kind 0
    return doc


def command_while_locked(cmd, tries=50):
    """command(), sent again (100 ms apart) while FerretDB v1 SQLite answers "database is locked (517)": a
    tailable cursor open on the events database (another case's waiter, closing) keeps it from creating
    collections, and writes can meet it too (docs/compatibility.md). Nothing was done then."""
    for _ in range(tries - 1):
        reply = command(cmd)
        if "database is locked (517)" not in str(reply.get("errmsg", "")):
            return reply
        time.sleep(0.1)
    return command(cmd)


def main():
    db = os.environ.get("MONGOLOCK_DB") or "mongolock"
    coll = os.environ.get("MONGOLOCK_COLLECTION") or "locks"
    what = sys.argv[1] if len(sys.argv) > 1 else ""
    if what == "now":
        print(command({"hello": 1, "$db": "admin"})["localTime"])
    elif what == "count":
        reply = command({"find": coll, "filter": {}, "batchSize": 100000, "$db": db})
        if reply.get("ok") != 1.0:
            die(f"find failed: {reply}")
        print(len(reply["cursor"]["firstBatch"]))
    elif what == "doc" and len(sys.argv) == 3:
        reply = command({"find": coll, "filter": {"program": sys.argv[2]}, "$db": db})
        if reply.get("ok") != 1.0:
            die(f"find failed: {reply}")
        batch = reply["cursor"]["firstBatch"]
        if not batch:
            return 1
        for key, value in batch[0].items():
            print(f"{key}={value}")
    elif what == "tickets" and len(sys.argv) == 3:
        reply = command({"find": coll + "_queue", "filter": {"name": sys.argv[2]}, "sort": {"seq": 1},
                         "batchSize": 100000, "$db": db})
        if reply.get("ok") != 1.0:
            die(f"find failed: {reply}")
        for doc in reply["cursor"]["firstBatch"]:
            print(f"{doc['seq']} {doc['process']}")
    elif what == "ticket-expiries" and len(sys.argv) == 3:
        reply = command({"find": coll + "_queue", "filter": {"name": sys.argv[2]}, "sort": {"seq": 1},
                         "batchSize": 100000, "$db": db})
        if reply.get("ok") != 1.0:
            die(f"find failed: {reply}")
        for doc in reply["cursor"]["firstBatch"]:
            exp = doc["expires_at"]
            print(f"{doc['process']} {exp.ms if isinstance(exp, Date) else exp}")
    elif what == "insert-ticket" and len(sys.argv) == 6:
        now = command({"hello": 1, "$db": "admin"})["localTime"]
        now = now.ms if isinstance(now, Date) else int(now)
        doc = {"name": sys.argv[2], "seq": int(sys.argv[3]), "process": sys.argv[4], "since": Date(now),
               "expires_at": Date(now + int(float(sys.argv[5]) * 1000))}
        reply = command({"insert": coll + "_queue", "documents": [doc], "$db": db})
        if reply.get("ok") != 1.0 or reply.get("n") != 1:
            die(f"insert failed: {reply}")
    elif what == "set" and len(sys.argv) == 5:
        # set PROGRAM FIELD VALUE: what another client could store (VALUE's bytes as given, even invalid UTF-8)
        field, _, kind = sys.argv[3].partition(":")
        if kind == "int":
            value = int(sys.argv[4])
        elif kind == "double":
            value = float(sys.argv[4])
        elif kind == "doc":
            value = {"x": sys.argv[4]}
        else:
            value = RawStr(sys.argv[4].encode("utf-8", "surrogateescape"))
        reply = command({"update": coll, "updates": [{"q": {"program": sys.argv[2]},
                                                       "u": {"$set": {field: value}}}], "$db": db})
        if reply.get("ok") != 1.0 or reply.get("n") != 1:
            die(f"update failed: {reply}")
    elif what == "unset" and len(sys.argv) >= 4:
        # unset PROGRAM FIELD...: a document without these fields (an older version's, or another client's)
        reply = command({"update": coll, "updates": [{"q": {"program": sys.argv[2]},
                                                       "u": {"$unset": {f: "" for f in sys.argv[3:]}}}], "$db": db})
        if reply.get("ok") != 1.0 or reply.get("n") != 1:
            die(f"update failed: {reply}")
    elif what == "runs" and len(sys.argv) in (2, 3):
        filt = {"name": sys.argv[2]} if len(sys.argv) == 3 else {}
        reply = command({"find": coll + "_runs", "filter": filt, "sort": {"ended_at": -1, "_id": -1},
                         "batchSize": 100000, "$db": db})
        if reply.get("ok") != 1.0:
            die(f"find failed: {reply}")
        print(json.dumps(reply["cursor"]["firstBatch"]))
    elif what == "insert-run" and len(sys.argv) >= 3:
        args, times = sys.argv[2:], 1
        if args[0] == "--times" and len(args) >= 2:
            args, times = args[2:], int(args[1])
        docs = []
        for i in range(times):
            doc = {}
            for arg in args:
                key, _, value = arg.partition("=")
                key, _, kind = key.partition(":")
                value = value.replace("{i}", str(i))  # the document's number, for values that must differ
                if kind == "int":
                    doc[key] = int(value)
                elif kind == "date":
                    doc[key] = Date(int(value) + i)
                elif kind == "list":
                    doc[key] = value.split(",") if value else []
                else:
                    doc[key] = RawStr(value.encode("utf-8", "surrogateescape"))
            docs.append(doc)
        reply = command({"insert": coll + "_runs", "documents": docs, "$db": db})
        if reply.get("ok") != 1.0 or reply.get("n") != times:
            die(f"insert failed: {reply}")
    elif what == "unique-index" and len(sys.argv) == 4:
        reply = command({"createIndexes": coll + sys.argv[2], "$db": db,
                         "indexes": [{"key": {sys.argv[3]: 1}, "name": sys.argv[3] + "_unique", "unique": True}]})
        if reply.get("ok") != 1.0:
            die(f"createIndexes failed: {reply}")
    elif what == "index" and len(sys.argv) == 5:
        reply = command({"createIndexes": coll + sys.argv[2], "$db": db,
                         "indexes": [{"key": {sys.argv[4]: 1}, "name": sys.argv[3]}]})
        if reply.get("ok") != 1.0:
            die(f"createIndexes failed: {reply}")
    elif what == "index-on" and len(sys.argv) >= 5:
        reply = command({"createIndexes": coll + sys.argv[2], "$db": db,
                         "indexes": [{"key": {f: 1 for f in sys.argv[4:]}, "name": sys.argv[3]}]})
        if reply.get("ok") != 1.0:
            die(f"createIndexes failed: {reply}")
    elif what == "drop-index" and len(sys.argv) == 4:
        reply = command({"dropIndexes": coll + sys.argv[2], "index": sys.argv[3], "$db": db})
        if reply.get("ok") != 1.0:
            die(f"dropIndexes failed: {reply}")
    elif what == "indexes" and len(sys.argv) == 3:
        reply = command({"listIndexes": coll + sys.argv[2], "$db": db})
        if reply.get("ok") != 1.0:
            die(f"listIndexes failed: {reply}")
        for spec in reply["cursor"]["firstBatch"]:
            print(spec["name"], "unique" if spec.get("unique") else "plain")
    elif what == "remove" and len(sys.argv) == 4:
        reply = command({"delete": coll, "$db": db,
                         "deletes": [{"q": {"program": sys.argv[2], "token": sys.argv[3]}, "limit": 1}]})
        if reply.get("ok") != 1.0:
            die(f"delete failed: {reply}")
        if reply.get("n") != 1:
            return 1
    elif what == "drop":
        for name in (coll, coll + "_queue", coll + "_fences", coll + "_runs", coll + "_lastrun"):
            command({"drop": name, "$db": db})
        command({"drop": coll + "_events", "$db": db + "_events"})
    elif what == "events":
        reply = command({"find": coll + "_events", "filter": {}, "batchSize": 100000, "$db": db + "_events"})
        if reply.get("ok") != 1.0:
            die(f"find failed: {reply}")
        print(len(reply["cursor"]["firstBatch"]))
    elif what == "insert-events" and len(sys.argv) == 4:
        reply = command_while_locked({"create": coll + "_events", "capped": True, "size": 1 << 20, "max": 100,
                                      "$db": db + "_events"})
        if reply.get("ok") != 1.0 and reply.get("code") != 48:  # 48: NamespaceExists
            die(f"create failed: {reply}")
        now = command({"hello": 1, "$db": "admin"})["localTime"]
        now = now.ms if isinstance(now, Date) else int(now)
        count, age = int(sys.argv[2]), int(sys.argv[3])
        docs = [{"name": "old", "t": now - age + i} for i in range(count)]
        reply = command_while_locked({"insert": coll + "_events", "documents": docs, "$db": db + "_events"})
        if reply.get("ok") != 1.0 or reply.get("n") != count:
            die(f"insert failed: {reply}")
    elif what == "is-ferretdb":
        print(1 if "ferretdbVersion" in command({"buildInfo": 1, "$db": "admin"}) else 0)
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (OSError, ValueError, KeyError, struct.error) as e:
        die(f"{type(e).__name__}: {e}")
