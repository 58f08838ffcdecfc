#!/usr/bin/env python3
"""A renewal stalled on the server, then written after a newer one (issue 19's FerretDB residual).

    stallproxy.py PORT_FILE UPSTREAM_PORT SQLITE_FILE ARM_AT_S HOLD_S RELEASE_AFTER_S PART_AFTER_S

A loopback TCP proxy in front of FerretDB (SQLite backend) for one holder. The first lease renewal (a
findAndModify or update that sets renewed_at) seen ARM_AT_S after start is R1: the proxy takes SQLite's
write lock on SQLITE_FILE (BEGIN IMMEDIATE), forwards R1 (FerretDB reads the lock document; its write
waits for the lock) and 0.3 s later resets the client's side only: the holder sees a failed renewal
while R1 still runs on the server. Renewals that arrive within HOLD_S of R1 are reset unforwarded; the
first one after that (Rk) is forwarded (it reads too, and waits), and RELEASE_AFTER_S later the lock is
released: Rk tends to write first and be answered, and R1 then writes its older expiry back (on a server
whose updates read, then write). PART_AFTER_S after the release every connection is reset and new ones
refused: a partition, so the holder can no longer renew. Exits after 120 s. Standard library only.
"""
import socket
import sqlite3
import struct
import sys
import threading
import time

LINGER_RST = struct.pack("ii", 1, 0)
START = time.time()
port_file, upstream, db_file = sys.argv[1], int(sys.argv[2]), sys.argv[3]
arm_at, hold_s, release_after, partition_after = map(float, sys.argv[4:8])
state = {"phase": 0, "t1": None, "db": None, "refuse": False}
conns = []
conns_lock = threading.Lock()


def log(message):
    print(f"stallproxy {time.time() - START:8.3f} {message}", file=sys.stderr, flush=True)


def reset(sock):
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, LINGER_RST)
    except OSError:
        pass
    try:
        sock.close()
    except OSError:
        pass


def read_message(sock):
    header = b""
    while len(header) < 4:
        chunk = sock.recv(4 - len(header))
        if not chunk:
            return None
        header += chunk
    size = struct.unpack("<i", header)[0]
    body = header
    while len(body) < size:
        chunk = sock.recv(size - len(body))
        if not chunk:
            return None
        body += chunk
    return body


def is_renewal(message):
    # OP_MSG: 16-byte header, flags, section kind 0, the document's length, then its first element: the
    # command name. A renewal sets renewed_at (a release or a purge does not).
    if len(message) < 40 or b"renewed_at" not in message:
        return False
    return message[26:40] == b"findAndModify\0" and b"update\0" in message or message[26:33] == b"update\0"


def release_then_partition():
    time.sleep(release_after)
    state["db"].execute("COMMIT")
    log("SQLite write lock released")
    time.sleep(partition_after)
    state["refuse"] = True
    with conns_lock:
        for client, server in list(conns):
            reset(client)
            reset(server)
    log("partition: every connection reset, new ones refused")


def handle(client):
    server = socket.create_connection(("127.0.0.1", upstream))
    with conns_lock:
        conns.append((client, server))
    keep_server = [False]

    def server_to_client():
        try:
            while (message := read_message(server)) is not None:
                client.sendall(message)
        except OSError:
            pass
        if not keep_server[0]:
            reset(client)

    threading.Thread(target=server_to_client, daemon=True).start()
    try:
        while (message := read_message(client)) is not None:
            if is_renewal(message):
                now = time.time()
                if state["phase"] == 0 and now - START >= arm_at:
                    db = sqlite3.connect(db_file, timeout=10, isolation_level=None, check_same_thread=False)
                    db.execute("BEGIN IMMEDIATE")
                    state.update(db=db, t1=now, phase=1)
                    log("R1: SQLite write lock taken, R1 forwarded, the client's side reset in 0.3 s")
                    server.sendall(message)
                    keep_server[0] = True
                    time.sleep(0.3)
                    reset(client)
                    return
                if state["phase"] == 1:
                    if now - state["t1"] < hold_s:
                        log("a retry reset, not forwarded")
                        reset(client)
                        reset(server)
                        return
                    state["phase"] = 2
                    log("Rk forwarded")
                    threading.Thread(target=release_then_partition, daemon=True).start()
            server.sendall(message)
    except OSError:
        pass
    if not keep_server[0]:
        reset(server)


def main():
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    listener.settimeout(0.5)
    with open(port_file + ".tmp", "w") as f:
        f.write(str(listener.getsockname()[1]))
    import os
    os.rename(port_file + ".tmp", port_file)
    while time.time() - START < 120:
        try:
            client, _ = listener.accept()
        except socket.timeout:
            continue
        if state["refuse"]:
            reset(client)
            continue
        threading.Thread(target=handle, args=(client,), daemon=True).start()


if __name__ == "__main__":
    main()
