#!/usr/bin/env python3
"""A loopback wire-protocol proxy in front of the test server that answers as a MongoDB replica set does
during an election: the errors of MongoDB's own test fail point `failCommand` (errorCode with the error
labels the server sets, closeConnection, writeConcernError, blockTimeMS), a primary that stops answering,
hello answered as a secondary. Standard library only (asyncio, its own BSON codec).

    failproxy.py serve PORT_FILE UPSTREAM_PORT CONTROL_DIR [--rs NAME]
        Listens on 127.0.0.1 (a free port, written to PORT_FILE once it listens) and forwards every
        connection to 127.0.0.1:UPSTREAM_PORT, one message at a time (a request, then its reply: how a
        driver uses a connection; no exhaust cursors, no compression). With --rs NAME every hello reply
        presents the server as the primary of replica set NAME whose only member is the proxy (setName,
        hosts, me, primary, topologyVersion, electionId, setVersion, logicalSessionTimeoutMinutes), so
        that a client with ?replicaSet=NAME discovers a replica set and its retryable writes (one retry
        on a retryable error) are in play. Takes commands, one a line, from the FIFO CONTROL_DIR/in and
        answers each with one line ("ok ..." or "error: ...") on CONTROL_DIR/out once it is applied (the
        shell helper `proxy` of faults.sh works with it). Logs every rule that fired on stderr.

    Commands (MATCH: a command name, e.g. insert, delete, update, findAndModify, hello; NAME/COLL to
    match only commands on collections whose name contains COLL, e.g. insert/locks_queue; NAME:FIELD (or
    NAME/COLL:FIELD) only commands with that top-level field, e.g. findAndModify:remove (a release) or
    findAndModify:update (a renewal); * any command but hello; several MATCHes joined by commas). WHEN: `times N` (the next N matching
    commands) or `for MS` (those arriving within MS ms from now):
      fail MATCH WHEN error CODE [label|nolabel] [msg TEXT...]
                  answer with {ok: 0, code: CODE, codeName, errmsg} without forwarding; the label
                  RetryableWriteError is set as MongoDB 4.4+ sets it (the code is a retryable one and the
                  command is a retryable write: it carries a txnNumber), `label` / `nolabel` force it;
                  `msg TEXT` makes the rest of the line the errmsg (e.g. what FerretDB's SQLite backend
                  says when it refuses a write: "database is locked (517)")
      fail MATCH WHEN close-before
                  close the connection (RST) without forwarding: the command was not applied
      fail MATCH WHEN close-after
                  forward it, wait for the server's reply, then close the connection (RST): applied, the
                  client cannot know
      fail MATCH WHEN lose-reply
                  forward it and drop the server's reply; the connection stays open and silent (a reply
                  lost: the client waits for it until its own timeout)
      fail MATCH WHEN wce CODE
                  forward it and add writeConcernError {code: CODE} to the server's reply (with the label
                  RetryableWriteError at the top level for a retryable write and a retryable CODE)
      fail MATCH WHEN hang
                  never forward it, never answer (a primary that stopped answering, no reset)
      fail MATCH WHEN delay MS
                  forward it MS ms late (blockTimeMS)
      secondary MS
                  for MS ms every hello reply says the server is a secondary (isWritablePrimary false,
                  secondary true, primary unknown) and every write is refused with 10107
                  NotWritablePrimary: an election in progress
      blackout MS [MATCH]
                  a silent failover: at once (or when the next MATCH command arrives) every open
                  connection stops answering for good (no reset; what it is sent is dropped) and new
                  connections are accepted but not answered until MS ms have passed; then the new
                  primary (the server) answers them
      clear       drop every rule (the open blackout's old connections stay silent)
      status      print the number of open connections and the rules left
"""
import asyncio
import os
import signal
import socket
import struct
import sys
import time

LINGER_RST = struct.pack("ii", 1, 0)  # SO_LINGER on, 0 s: close() sends RST
OP_REPLY, OP_QUERY, OP_MSG = 1, 2004, 2013

# Error codes of an election and their names (MongoDB's error_codes.yml).
CODE_NAMES = {
    6: "HostUnreachable", 7: "HostNotFound", 64: "WriteConcernFailed", 89: "NetworkTimeout",
    91: "ShutdownInProgress", 189: "PrimarySteppedDown", 262: "ExceededTimeLimit",
    9001: "SocketException", 10107: "NotWritablePrimary", 11600: "InterruptedAtShutdown",
    11602: "InterruptedDueToReplStateChange", 13435: "NotPrimaryNoSecondaryOk", 13436: "NotPrimaryOrSecondary",
}
# Codes for which MongoDB 4.4+ labels a retryable write's error RetryableWriteError (the retryable writes
# spec, "Determining Retryable Errors").
RETRYABLE_CODES = {6, 7, 89, 91, 189, 262, 9001, 10107, 11600, 11602, 13435, 13436}
WRITE_COMMANDS = {"insert", "update", "delete", "findAndModify", "findandmodify"}


def log(message):
    print(f"failproxy: {time.strftime('%H:%M:%S')}.{int(time.time() * 1000) % 1000:03d} {message}",
          file=sys.stderr, flush=True)


# --- BSON: documents as lists of (key, type, value); types not interpreted keep their raw bytes --------

class Raw:
    def __init__(self, data):
        self.data = data


FIXED = {0x01: 8, 0x07: 12, 0x09: 8, 0x11: 8, 0x12: 8, 0x13: 16, 0x06: 0, 0x0A: 0, 0x7F: 0, 0xFF: 0}


def decode(data, at=0):
    """The document at `at` of `data` as a list of [key, type, value]."""
    size = struct.unpack_from("<i", data, at)[0]
    end, at, out = at + size - 1, at + 4, []
    while at < end:
        kind = data[at]
        key_end = data.index(b"\0", at + 1)
        key = data[at + 1:key_end].decode()
        at = key_end + 1
        if kind in (0x03, 0x04):
            n = struct.unpack_from("<i", data, at)[0]
            value, at = decode(data, at), at + n
        elif kind == 0x02:
            n = struct.unpack_from("<i", data, at)[0]
            value, at = data[at + 4:at + 3 + n].decode("utf-8", "replace"), at + 4 + n
        elif kind == 0x08:
            value, at = data[at] == 1, at + 1
        elif kind == 0x10:
            value, at = struct.unpack_from("<i", data, at)[0], at + 4
        elif kind == 0x12:
            value, at = struct.unpack_from("<q", data, at)[0], at + 8
        elif kind == 0x01:
            value, at = struct.unpack_from("<d", data, at)[0], at + 8
        elif kind in FIXED:
            value, at = Raw(data[at:at + FIXED[kind]]), at + FIXED[kind]
        elif kind == 0x05:
            n = struct.unpack_from("<i", data, at)[0]
            value, at = Raw(data[at:at + 5 + n]), at + 5 + n
        elif kind in (0x0D, 0x0E):
            n = struct.unpack_from("<i", data, at)[0]
            value, at = Raw(data[at:at + 4 + n]), at + 4 + n
        elif kind == 0x0B:
            e1 = data.index(b"\0", at)
            e2 = data.index(b"\0", e1 + 1)
            value, at = Raw(data[at:e2 + 1]), e2 + 1
        else:
            raise ValueError(f"BSON type {kind:#x} not supported")
        out.append([key, kind, value])
    return out


def encode(doc):
    out = b""
    for key, kind, value in doc:
        k = key.encode() + b"\0"
        if isinstance(value, Raw):
            body = value.data
        elif kind in (0x03, 0x04):
            body = encode(value)
        elif kind == 0x02:
            b = value.encode()
            body = struct.pack("<i", len(b) + 1) + b + b"\0"
        elif kind == 0x08:
            body = b"\x01" if value else b"\x00"
        elif kind == 0x10:
            body = struct.pack("<i", value)
        elif kind == 0x12:
            body = struct.pack("<q", value)
        elif kind == 0x01:
            body = struct.pack("<d", value)
        else:
            raise ValueError(f"cannot encode BSON type {kind:#x}")
        out += bytes([kind]) + k + body
    return struct.pack("<i", len(out) + 5) + out + b"\0"


def get(doc, key, default=None):
    for k, _, v in doc:
        if k == key:
            return v
    return default


def put(doc, key, kind, value):
    for item in doc:
        if item[0] == key:
            item[1], item[2] = kind, value
            return
    doc.append([key, kind, value])


def drop(doc, key):
    doc[:] = [item for item in doc if item[0] != key]


def array(values, kind):
    return [[str(i), kind, v] for i, v in enumerate(values)]


# --- wire messages ---------------------------------------------------------------------------------

async def read_message(reader):
    header = await reader.readexactly(16)
    length, request_id, response_to, opcode = struct.unpack("<iiii", header)
    body = await reader.readexactly(length - 16)
    return request_id, response_to, opcode, body


def frame(request_id, response_to, opcode, body):
    return struct.pack("<iiii", len(body) + 16, request_id, response_to, opcode) + body


def command_of(opcode, body):
    """(command document, its name, the collection it names) of a request; (None, "", "") when unknown."""
    try:
        if opcode == OP_MSG:
            doc = decode(body, 5) if body[4] == 0 else None
        elif opcode == OP_QUERY:
            name_end = body.index(b"\0", 4)
            doc = decode(body, name_end + 9)
        else:
            doc = None
    except (ValueError, IndexError, struct.error):
        doc = None
    if not doc:
        return None, "", ""
    name, kind, target = doc[0]
    return doc, name, target if kind == 0x02 else ""


def reply_doc(opcode, body):
    if opcode == OP_MSG and body[4] == 0:
        return decode(body, 5)
    if opcode == OP_REPLY:
        return decode(body, 20)
    return None


def with_doc(opcode, body, doc):
    if opcode == OP_MSG:
        return struct.pack("<I", 0) + b"\0" + encode(doc)
    return body[:16] + struct.pack("<i", 1) + encode(doc)  # OP_REPLY: flags, cursor, from, number


def answer(request_opcode, doc):
    """(opcode, body) of a reply with `doc` to a request of `request_opcode`."""
    if request_opcode == OP_QUERY:
        return OP_REPLY, struct.pack("<iqii", 0, 0, 0, 1) + encode(doc)
    return OP_MSG, struct.pack("<I", 0) + b"\0" + encode(doc)


# --- rules -----------------------------------------------------------------------------------------

class Rule:
    def __init__(self, matches, times, until, action, arg, label, message=None):
        self.matches, self.times, self.until = matches, times, until
        self.action, self.arg, self.label, self.message = action, arg, label, message

    def applies(self, name, target, doc):
        if self.until is not None and time.monotonic() >= self.until:
            return False
        for m in self.matches:
            m, _, field = m.partition(":")
            cmd, _, coll = m.partition("/")
            if (cmd == "*" and name not in ("hello", "isMaster", "ismaster")) or cmd.lower() == name.lower():
                if (not coll or coll in target) and (not field or get(doc or [], field) is not None):
                    return True
        return False

    def spent(self):
        return (self.times is not None and self.times <= 0) or (
            self.until is not None and time.monotonic() >= self.until)


def error_doc(code, message, labels):
    doc = [["ok", 0x01, 0.0], ["errmsg", 0x02, message], ["code", 0x10, code],
           ["codeName", 0x02, CODE_NAMES.get(code, "Error")]]
    if labels:
        doc.append(["errorLabels", 0x04, array(labels, 0x02)])
    return doc


def retryable_write(name, doc):
    return name in WRITE_COMMANDS and get(doc, "txnNumber") is not None


class Proxy:
    def __init__(self, upstream_port, rs_name):
        self.upstream_port = upstream_port
        self.rs_name = rs_name
        self.me = ""
        self.rules = []
        self.connections = set()
        self.serial = 0
        self.secondary_until = 0.0
        self.blackout = None  # {"ms": MS, "matches": [...]} armed, waiting for its command
        self.blackout_until = 0.0
        self.silenced = set()  # connections that stopped answering for good
        self.process_id = Raw(os.urandom(12))
        self.counter = 0

    # --- control ---

    def command(self, words):
        try:
            return self.apply(words)
        except (ValueError, IndexError) as e:
            return f"error: {' '.join(words)!r}: {e}"

    def apply(self, words):
        if words and words[0] == "fail":
            return self.add_rule(words[1:])
        if len(words) == 2 and words[0] == "secondary":
            self.secondary_until = time.monotonic() + int(words[1]) / 1000
            self.counter += 1
            log(f"hello answers 'secondary' and writes fail with 10107 for {words[1]} ms")
            return f"ok secondary {words[1]}"
        if len(words) in (2, 3) and words[0] == "blackout":
            self.blackout = {"ms": int(words[1]), "matches": words[2].split(",") if len(words) == 3 else []}
            if not self.blackout["matches"]:
                self.start_blackout()
            else:
                log(f"blackout of {words[1]} ms armed for the next {words[2]}")
            return f"ok blackout {words[1]}"
        if words == ["clear"]:
            self.rules.clear()
            self.secondary_until = self.blackout_until = 0.0
            self.blackout = None
            return "ok clear"
        if words == ["status"]:
            return f"ok {len(self.connections)} connection(s), {len(self.rules)} rule(s)"
        return f"error: unknown command {' '.join(words)!r}"

    def add_rule(self, words):
        matches = words[0].split(",")
        times = until = None
        if words[1] == "times":
            times = int(words[2])
        elif words[1] == "for":
            until = time.monotonic() + int(words[2]) / 1000
        else:
            raise ValueError("expected 'times N' or 'for MS'")
        action, rest = words[3], words[4:]
        arg, label, message = None, None, None
        if action in ("error", "wce", "delay"):
            arg = int(rest[0])
            extra = rest[1:]
            if action == "error" and extra and extra[0] in ("label", "nolabel"):
                label = extra.pop(0) == "label"
            if action == "error" and extra and extra[0] == "msg" and len(extra) > 1:
                message = " ".join(extra[1:])
            elif action == "error" and extra:
                raise ValueError(f"unexpected {' '.join(extra)!r}: expected label, nolabel or msg TEXT")
        elif action not in ("close-before", "close-after", "lose-reply", "hang"):
            raise ValueError(f"unknown action {action!r}")
        self.rules.append(Rule(matches, times, until, action, arg, label, message))
        log(f"rule: {' '.join(words)}")
        return f"ok rule {len(self.rules)}"

    def start_blackout(self):
        ms = self.blackout["ms"]
        self.blackout = None
        self.blackout_until = time.monotonic() + ms / 1000
        self.silenced |= set(self.connections)
        self.counter += 1
        log(f"blackout: {len(self.connections)} open connection(s) silent for good, new ones answered in {ms} ms")

    def rule_for(self, name, target, doc):
        for rule in self.rules:
            if rule.applies(name, target, doc):
                if rule.times is not None:
                    rule.times -= 1
                self.rules = [r for r in self.rules if not r.spent()]
                return rule
        self.rules = [r for r in self.rules if not r.spent()]
        return None

    # --- hello ---

    def hello(self, doc):
        """The hello reply `doc` as this replica set's member answers it."""
        if not self.rs_name:
            return doc
        secondary = time.monotonic() < self.secondary_until
        for key in ("isWritablePrimary", "ismaster"):
            if get(doc, key) is not None:
                put(doc, key, 0x08, not secondary)
        put(doc, "secondary", 0x08, secondary)
        put(doc, "setName", 0x02, self.rs_name)
        put(doc, "setVersion", 0x10, 1)
        put(doc, "hosts", 0x04, array([self.me], 0x02))
        put(doc, "me", 0x02, self.me)
        if secondary:
            drop(doc, "primary")
            drop(doc, "electionId")
        else:
            put(doc, "primary", 0x02, self.me)
            put(doc, "electionId", 0x07, Raw(b"\x7f\xff\xff\xff" + struct.pack(">q", self.counter)))
        put(doc, "topologyVersion", 0x03, [["processId", 0x07, self.process_id], ["counter", 0x12, self.counter]])
        if get(doc, "logicalSessionTimeoutMinutes") is None:
            put(doc, "logicalSessionTimeoutMinutes", 0x10, 30)
        return doc

    async def accept(self, reader, writer):
        self.serial += 1
        conn = Connection(self, self.serial, reader, writer)
        log(f"#{self.serial} accepted")
        self.connections.add(conn)
        try:
            await conn.run()
        finally:
            self.connections.discard(conn)
            self.silenced.discard(conn)


def reset(writer):
    sock = writer.get_extra_info("socket")
    try:
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, LINGER_RST)
    except OSError:
        pass
    writer.transport.abort()


class Connection:
    def __init__(self, proxy, serial, reader, writer):
        self.proxy, self.serial = proxy, serial
        self.reader, self.writer = reader, writer

    async def run(self):
        try:
            server_reader, server_writer = await asyncio.open_connection("127.0.0.1", self.proxy.upstream_port)
        except OSError as e:
            log(f"#{self.serial}: upstream: {e}")
            reset(self.writer)
            return
        try:
            while True:
                request_id, response_to, opcode, body = await read_message(self.reader)
                if not await self.one(frame(request_id, response_to, opcode, body), opcode, body, server_reader,
                                      server_writer):
                    return
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            pass
        finally:
            reset(server_writer)
            if not self.writer.is_closing():
                self.writer.close()

    async def silent(self):
        """Reads and drops everything the client sends, until it closes the connection."""
        while await self.reader.read(65536):
            pass
        return False

    async def one(self, message, opcode, body, server_reader, server_writer):
        """Handles one request; False once the connection is done."""
        proxy = self.proxy
        doc, name, target = command_of(opcode, body)
        if proxy.blackout and Rule(proxy.blackout["matches"], None, None, "", None, None).applies(name, target, doc):
            proxy.start_blackout()
        if self in proxy.silenced:
            log(f"#{self.serial}: {name or opcode} dropped (silent after the blackout)")
            return await self.silent()
        while time.monotonic() < proxy.blackout_until:
            await asyncio.sleep(min(0.01, proxy.blackout_until - time.monotonic()))
        if self in proxy.silenced:
            return await self.silent()
        is_hello = name in ("hello", "isMaster", "ismaster")
        rule = proxy.rule_for(name, target, doc) if doc is not None else None
        if rule is None and not is_hello and name in WRITE_COMMANDS and time.monotonic() < proxy.secondary_until:
            rule = Rule([], None, None, "error", 10107, None)
        if rule is not None:
            log(f"#{self.serial}: {name} on {target or '-'}: {rule.action}{'' if rule.arg is None else f' {rule.arg}'}")
            if rule.action == "error":
                label = rule.label if rule.label is not None else (
                    rule.arg in RETRYABLE_CODES and retryable_write(name, doc))
                errmsg = rule.message or f"failproxy: {CODE_NAMES.get(rule.arg, 'error')}"
                self.send(answer(opcode, error_doc(rule.arg, errmsg,
                                                   ["RetryableWriteError"] if label else [])), body)
                return True
            if rule.action == "close-before":
                reset(self.writer)
                return False
            if rule.action == "hang":
                return await self.silent()
            if rule.action == "delay":
                await asyncio.sleep(rule.arg / 1000)
        server_writer.write(message)
        await server_writer.drain()
        _, reply_to, reply_opcode, reply_body = await read_message(server_reader)
        if rule is not None and rule.action == "close-after":
            reset(self.writer)
            return False
        if rule is not None and rule.action == "lose-reply":
            return await self.silent()
        reply = reply_doc(reply_opcode, reply_body)
        if reply is not None and is_hello:
            reply_body = with_doc(reply_opcode, reply_body, proxy.hello(reply))
        elif reply is not None and rule is not None and rule.action == "wce":
            put(reply, "writeConcernError", 0x03, [["code", 0x10, rule.arg],
                                                   ["codeName", 0x02, CODE_NAMES.get(rule.arg, "Error")],
                                                   ["errmsg", 0x02, "failproxy: write concern not satisfied"]])
            if rule.arg in RETRYABLE_CODES and retryable_write(name, doc):
                put(reply, "errorLabels", 0x04, array(["RetryableWriteError"], 0x02))
            reply_body = with_doc(reply_opcode, reply_body, reply)
        self.writer.write(frame(proxy.serial * 1000 + 1, reply_to, reply_opcode, reply_body))
        await self.writer.drain()
        return True

    def send(self, reply, request_body):
        opcode, body = reply
        self.writer.write(frame(self.proxy.serial * 1000 + 2, 0, opcode, body))


async def serve(port_file, upstream_port, control_dir, rs_name):
    proxy = Proxy(upstream_port, rs_name)
    server = await asyncio.start_server(proxy.accept, "127.0.0.1", 0)
    os.makedirs(control_dir, exist_ok=True)
    fifo_in, fifo_out = os.path.join(control_dir, "in"), os.path.join(control_dir, "out")
    for path in (fifo_in, fifo_out):
        if not os.path.exists(path):
            os.mkfifo(path, 0o600)
    # Read-write opens (as faultproxy.py): neither blocks, and neither sees end-of-file when a controller
    # goes away.
    in_fd = os.open(fifo_in, os.O_RDWR | os.O_NONBLOCK)
    out_fd = os.open(fifo_out, os.O_RDWR)
    pending = b""

    def on_command():
        nonlocal pending
        try:
            pending += os.read(in_fd, 4096)
        except BlockingIOError:
            return
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            words = line.decode().split()
            if words:
                os.write(out_fd, (proxy.command(words) + "\n").encode())

    loop = asyncio.get_running_loop()
    loop.add_reader(in_fd, on_command)
    port = server.sockets[0].getsockname()[1]
    proxy.me = f"127.0.0.1:{port}"
    with open(port_file + ".tmp", "w") as f:
        f.write(f"{port}\n")
    os.rename(port_file + ".tmp", port_file)
    log(f"listening on {proxy.me}, upstream 127.0.0.1:{upstream_port}" + (f", replica set {rs_name}" if rs_name else ""))
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    server.close()
    return 0


def main(argv):
    if len(argv) >= 5 and argv[1] == "serve":
        rs_name = argv[6] if len(argv) == 7 and argv[5] == "--rs" else ""
        return asyncio.run(serve(argv[2], int(argv[3]), argv[4], rs_name))
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
