#!/usr/bin/python3
"""The yardstick "plain PyMongo script": a MongoDB lock as a user would write it without mongolock.

    bench-pymongo-lock.py URI NAME [--wait] -- CMD [ARGS...]

One document per lock in the collection `pymongo_locks` (_id = NAME, the unique key), with an expiry
30 s ahead on this host's clock; a lock whose expiry has passed is taken over with one conditional
update. Without --wait a held lock exits 75; with it, the script polls every 100 ms (no queue, no
wake-ups). The command runs while the lock is held (no lease renewal, no guardian: a job longer than
30 s runs unprotected), then the lock is deleted by _id and owner. Exit: the command's status.
Used only by scripts/bench, to compare mongolock with what people write by hand. Runs with Debian's
/usr/bin/python3, where `scripts/setup --bench` installs python3-pymongo.
"""
import datetime
import os
import socket
import subprocess
import sys
import time

import pymongo
from pymongo.errors import DuplicateKeyError


def acquire(locks, name, owner, wait):
    while True:
        now = datetime.datetime.now(datetime.timezone.utc)
        expires = now + datetime.timedelta(seconds=30)
        try:
            locks.insert_one({"_id": name, "owner": owner, "expires": expires})
            return True
        except DuplicateKeyError:
            taken = locks.update_one({"_id": name, "expires": {"$lt": now}},
                                     {"$set": {"owner": owner, "expires": expires}})
            if taken.modified_count == 1:
                return True
        if not wait:
            return False
        time.sleep(0.1)


def main():
    args = sys.argv[1:]
    if len(args) < 4 or "--" not in args:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 64
    split = args.index("--")
    uri, name, options, command = args[0], args[1], args[2:split], args[split + 1:]
    client = pymongo.MongoClient(uri, w="majority", journal=True)
    locks = client["mongolock_bench"]["pymongo_locks"]
    owner = f"{socket.gethostname()}:{os.getpid()}"
    if not acquire(locks, name, owner, "--wait" in options):
        return 75
    try:
        return subprocess.call(command)
    finally:
        locks.delete_one({"_id": name, "owner": owner})
        client.close()


if __name__ == "__main__":
    sys.exit(main())
