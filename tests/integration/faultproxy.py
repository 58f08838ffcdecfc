#!/usr/bin/env python3
"""A loopback TCP proxy that injects network faults between mongolock and the test server.
Standard library only (asyncio).

    faultproxy.py serve PORT_FILE UPSTREAM_PORT CONTROL_DIR
        Listens on 127.0.0.1 (a free port, written to PORT_FILE once it listens) and forwards every
        connection to 127.0.0.1:UPSTREAM_PORT. Takes commands, one a line, from the FIFO
        CONTROL_DIR/in and answers each with one line ("ok ..." or "error: ...") on the FIFO
        CONTROL_DIR/out once it has been applied (it creates the directory and both FIFOs; a shell
        can switch modes with builtins alone: `echo hold >&$in; read -r reply <&$out`). Logs
        connections and mode changes on stderr. Ends on SIGTERM or SIGINT.

    faultproxy.py ctl CONTROL_DIR COMMAND [ARG]
        Sends one command and prints the reply (exit 1 when the proxy refused the command). Commands:
          pass        forward everything (the start mode); what hold kept back is delivered now
          hold        blackhole: connections stay open (new ones are accepted) but nothing is
                      forwarded in either direction, as behind a network partition; the data is kept
                      and delivered in order on pass (as TCP retransmission would once the partition
                      heals); a connection accepted during hold reaches the server only then
          delay MS    forward each message (each chunk read, in practice one wire-protocol message)
                      MS milliseconds after it arrived, in each direction: a round trip takes 2*MS
          refuse      reset every new connection at once (a server that refuses connections)
          reset       reset every open connection now (RST to both sides); the mode is unchanged
          lag-first request|reply MS
                      the next connection accepted gets its first message in that direction (its
                      handshake's hello, or the hello's reply) MS milliseconds late; the rest passes:
                      a lopsided round trip that throws off the client's estimate of the server's
                      clock (a late request: the estimate runs ahead; a late reply: it lags)
          stale-renewal MS
                      a renewal written back late, as on a server whose updates read the document, then
                      write it back whole by _id (FerretDB v1): the next lease renewal (a request whose
                      filter has renewed_at: {$lt: ...}) is kept back, unanswered, and its client
                      connection reset MS milliseconds later (the holder sees an error: outcome unknown).
                      Right after the reply to the holder's next renewal has been forwarded, the kept one
                      is sent to the server on a connection of the proxy's own, its filter's $lt turned
                      into $gt: it matches the document the newer renewal wrote, as the kept renewal's
                      read would have matched it before that write, and writes its older expiry over the
                      newer one. Logs "stale renewal written back: n=N" (N documents matched). The mode
                      is unchanged; one renewal per command
          hold-remove the next request that deletes a lock document (a findAndModify with remove: true)
                      switches the mode to hold just before it is forwarded: it and everything after it
                      waits for pass (a release whose delete is on its way while others act). The mode is
                      unchanged until then; one delete per command
          status      print the mode and the number of open connections
"""
import asyncio
import os
import signal
import socket
import struct
import sys
import time

LINGER_RST = struct.pack("ii", 1, 0)  # SO_LINGER on, 0 s: close() sends RST


def log(message):
    print(f"faultproxy: {time.strftime('%H:%M:%S')}.{int(time.time() * 1000) % 1000:03d} {message}",
          file=sys.stderr, flush=True)


def reset(writer):
    sock = writer.get_extra_info("socket")
    try:
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, LINGER_RST)
    except OSError:
        pass
    writer.transport.abort()


REMOVE_TRUE = b"\x08remove\x00\x01"  # BSON: the boolean field remove: true of a findAndModify


def renewal_filter_at(message):
    """Offset of the "$lt" of a lease renewal's renewed_at filter in MESSAGE, or -1."""
    at = message.find(b"\x03renewed_at\x00")
    if at < 0:
        return -1
    lt = message.find(b"\x09$lt\x00", at, at + 40)
    return lt + 1 if lt >= 0 else -1


class Proxy:
    def __init__(self, upstream_port):
        self.upstream_port = upstream_port
        self.mode = "pass"
        self.delay_s = 0.0
        self.flowing = asyncio.Event()  # set unless mode == hold
        self.flowing.set()
        self.connections = set()  # open Connection objects
        self.serial = 0
        self.lag_first = None  # (direction, seconds) for the next connection accepted
        self.stale = None  # stale-renewal: {"reset_s": seconds, "kept": message or None}
        self.hold_remove = False  # hold-remove: hold from the next findAndModify remove on


    def set_mode(self, mode, delay_ms=0):
        self.mode = mode
        self.delay_s = delay_ms / 1000 if mode == "delay" else 0.0
        if mode == "hold":
            self.flowing.clear()
        else:
            self.flowing.set()

    async def accept(self, reader, writer):
        self.serial += 1
        conn = Connection(self, self.serial, reader, writer)
        conn.lag_first, self.lag_first = self.lag_first, None
        if self.mode == "refuse":
            log(f"#{conn.serial} refused (reset)")
            reset(writer)
            return
        self.connections.add(conn)
        try:
            await conn.run()
        finally:
            self.connections.discard(conn)

    def command(self, words):
        if words == ["pass"] or words == ["hold"] or words == ["refuse"]:
            self.set_mode(words[0])
        elif len(words) == 2 and words[0] == "delay" and words[1].isdigit():
            self.set_mode("delay", int(words[1]))
        elif words == ["reset"]:
            n = len(self.connections)
            for conn in list(self.connections):
                conn.reset()
            log(f"reset {n} connection(s)")
            return f"ok reset {n}"
        elif len(words) == 3 and words[0] == "lag-first" and words[1] in ("request", "reply") and words[2].isdigit():
            self.lag_first = (words[1], int(words[2]) / 1000)
            log(f"next connection: first {words[1]} {words[2]} ms late")
            return f"ok lag-first {words[1]} {words[2]}"
        elif len(words) == 2 and words[0] == "stale-renewal" and words[1].isdigit():
            self.stale = {"reset_s": int(words[1]) / 1000, "kept": None}
            log(f"stale-renewal: the next renewal is kept back, its client reset after {words[1]} ms")
            return f"ok stale-renewal {words[1]}"
        elif words == ["hold-remove"]:
            self.hold_remove = True
            log("hold-remove: the next delete (findAndModify remove) starts a hold")
            return "ok hold-remove"
        elif words == ["status"]:
            pass
        else:
            return f"error: unknown command {' '.join(words)!r}"
        mode = self.mode + (f" {int(self.delay_s * 1000)}" if self.mode == "delay" else "")
        if words != ["status"]:
            log(f"mode {mode}")
        return f"ok {mode} {len(self.connections)}"


class Connection:
    def __init__(self, proxy, serial, reader, writer):
        self.proxy = proxy
        self.serial = serial
        self.client = (reader, writer)
        self.server = None
        self.tasks = []
        self.was_reset = False
        self.lag_first = None  # (direction, seconds): its first message that way comes that late

    def reset(self):
        self.was_reset = True
        for _, writer in filter(None, (self.client, self.server)):
            reset(writer)
        for task in self.tasks:
            task.cancel()

    async def run(self):
        proxy = self.proxy
        log(f"#{self.serial} accepted ({proxy.mode})")
        await proxy.flowing.wait()  # during hold the connection is not even forwarded to the server
        if self.was_reset:
            return
        try:
            self.server = await asyncio.open_connection("127.0.0.1", proxy.upstream_port)
        except OSError as e:
            log(f"#{self.serial} upstream: {e}; reset")
            reset(self.client[1])
            return
        queue_up, queue_down = asyncio.Queue(), asyncio.Queue()
        self.tasks = [
            asyncio.ensure_future(self.read(self.client[0], queue_up)),
            asyncio.ensure_future(self.write(queue_up, self.server[1], self.lag_of("request"), "request")),
            asyncio.ensure_future(self.read(self.server[0], queue_down)),
            asyncio.ensure_future(self.write(queue_down, self.client[1], self.lag_of("reply"), "reply")),
        ]
        # The connection ends when one side closes (and what it sent before was delivered) or on reset.
        done, pending = await asyncio.wait(self.tasks[1::2], return_when=asyncio.FIRST_COMPLETED)
        for task in self.tasks:
            task.cancel()
        for _, writer in (self.client, self.server):
            writer.transport.abort()
        log(f"#{self.serial} closed")

    async def read(self, reader, queue):
        try:
            while True:
                data = await reader.read(65536)
                await queue.put((time.monotonic(), data))
                if not data:
                    return
        except (OSError, asyncio.IncompleteReadError):
            await queue.put((time.monotonic(), b""))

    def lag_of(self, direction):
        return self.lag_first[1] if self.lag_first and self.lag_first[0] == direction else 0.0

    def stale_renewal(self, direction, data):
        """stale-renewal: True when DATA (a request) is the renewal to keep back; notes the next one
        forwarded, and writes the kept one back once that one's reply has been forwarded."""
        stale = self.proxy.stale
        if stale is None:
            return False
        if direction == "request" and renewal_filter_at(data) >= 0:
            if stale["kept"] is None:
                stale["kept"] = data
                log(f"#{self.serial} stale-renewal: renewal kept back ({len(data)} bytes)")
                asyncio.get_running_loop().call_later(stale["reset_s"], self.reset)
                return True
            stale["next"] = self
        elif direction == "reply" and stale.get("next") is self:
            self.proxy.stale = None
            asyncio.ensure_future(write_back(self.proxy.upstream_port, stale["kept"]))
        return False

    async def write(self, queue, writer, first_lag=0.0, direction=None):
        proxy = self.proxy
        while True:
            arrived, data = await queue.get()
            lag, first_lag = first_lag, 0.0
            if lag:
                log(f"#{self.serial} first message this way held {int(lag * 1000)} ms")
            while True:
                await proxy.flowing.wait()
                wait = arrived + proxy.delay_s + lag - time.monotonic()
                if wait <= 0:
                    break
                await asyncio.sleep(wait)  # the mode may change meanwhile: look again
            if not data:
                return
            if direction == "request" and proxy.hold_remove and REMOVE_TRUE in data:
                proxy.hold_remove = False
                proxy.set_mode("hold")
                log(f"#{self.serial} hold-remove: a delete held ({len(data)} bytes); mode hold")
                await proxy.flowing.wait()
            if self.stale_renewal(direction, data):
                continue
            try:
                writer.write(data)
                await writer.drain()
            except OSError:
                return


async def write_back(upstream_port, message):
    """Sends the kept renewal MESSAGE (one OP_MSG) with its renewed_at filter's $lt turned into $gt on a
    new connection, and logs how many documents its reply says it matched."""
    at = renewal_filter_at(message)
    message = message[:at] + b"$gt" + message[at + 3:]
    n = "?"
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", upstream_port)
        writer.write(message)
        await writer.drain()
        header = await reader.readexactly(4)
        reply = header + await reader.readexactly(struct.unpack("<i", header)[0] - 4)
        key = reply.find(b"\x10n\x00")
        if key >= 0:
            n = struct.unpack("<i", reply[key + 3:key + 7])[0]
        writer.transport.abort()
    except (OSError, asyncio.IncompleteReadError) as e:
        log(f"stale-renewal: write-back failed: {e}")
    log(f"stale renewal written back: n={n}")


async def serve(port_file, upstream_port, control_dir):
    proxy = Proxy(upstream_port)
    server = await asyncio.start_server(proxy.accept, "127.0.0.1", 0)
    os.makedirs(control_dir, exist_ok=True)
    fifo_in, fifo_out = os.path.join(control_dir, "in"), os.path.join(control_dir, "out")
    for path in (fifo_in, fifo_out):
        if not os.path.exists(path):
            os.mkfifo(path, 0o600)
    # Read-write opens: neither blocks, and neither sees end-of-file when a controller goes away.
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
            os.write(out_fd, (proxy.command(line.decode().split()) + "\n").encode())

    loop = asyncio.get_running_loop()
    loop.add_reader(in_fd, on_command)
    port = server.sockets[0].getsockname()[1]
    with open(port_file + ".tmp", "w") as f:
        f.write(f"{port}\n")
    os.rename(port_file + ".tmp", port_file)
    log(f"listening on 127.0.0.1:{port}, forwarding to 127.0.0.1:{upstream_port}")
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    server.close()
    for conn in list(proxy.connections):
        conn.reset()
    return 0


def ctl(control_dir, words):
    try:
        with open(os.path.join(control_dir, "in"), "w") as fin, open(os.path.join(control_dir, "out")) as fout:
            fin.write(" ".join(words) + "\n")
            fin.flush()
            text = fout.readline().strip()
    except OSError as e:
        print(f"faultproxy.py: cannot reach the proxy at {control_dir}: {e}", file=sys.stderr)
        return 2
    print(text)
    return 0 if text.startswith("ok") else 1


def main(argv):
    if len(argv) == 5 and argv[1] == "serve" and argv[3].isdigit():
        return asyncio.run(serve(argv[2], int(argv[3]), argv[4]))
    if len(argv) >= 4 and argv[1] == "ctl":
        return ctl(argv[2], argv[3:])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
