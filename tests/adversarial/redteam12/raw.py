#!/usr/bin/env python3
"""Send one raw command to $MONGOLOCK_URI's server (database $MONGOLOCK_DB, default mongolock), reusing
tests/integration/mongo.py's BSON codec. The command is a Python expression (dict); Int32(n) makes an
int32, Long(n) an int64 (mongo.py encodes int as int64), floats are doubles.
    raw.py "{'createIndexes': 'c', 'indexes': [{'key': {'program': 1.0}, 'name': 'p', 'unique': True}]}"
"""
import os, struct, sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "integration"))
import mongo  # noqa: E402

class Int32(int):
    pass

_orig = mongo.encode
def encode(doc):
    out = b""
    for key, value in doc.items():
        if isinstance(value, Int32):
            out += b"\x10" + mongo.cstring(key) + struct.pack("<i", int(value))
        elif isinstance(value, dict):
            out += b"\x03" + mongo.cstring(key) + encode(value)
        elif isinstance(value, list):
            out += b"\x04" + mongo.cstring(key) + encode({str(i): v for i, v in enumerate(value)})
        else:
            out += _orig({key: value})[4:-1]
    return struct.pack("<i", len(out) + 5) + out + b"\0"
mongo.encode = encode

def run(cmd):
    cmd = dict(cmd)
    cmd["$db"] = os.environ.get("MONGOLOCK_DB") or "mongolock"
    return mongo.command(cmd)

if __name__ == "__main__":
    print(run(eval(sys.argv[1], {"Int32": Int32, "Long": int})))
