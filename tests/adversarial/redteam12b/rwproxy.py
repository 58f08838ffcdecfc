#!/usr/bin/env python3
"""Red team 12b: a reply-rewriting proxy on failproxy.py's codec (imported, not copied).

    rwproxy.py PORT_FILE UPSTREAM_PORT MODE[,MODE...]

Modes (each applies to every matching command, for the proxy's life):
  nofdb          buildInfo: drop ferretdbVersion/ferretdbFeatures (FerretDB presents itself as MongoDB)
  li13           listIndexes: answer {ok:0, code:13 Unauthorized} without forwarding
  li-unique-str  listIndexes: every index's `unique` absent -> unique: "no" (a string); present stays
  li-later       listIndexes: firstBatch emptied, cursor.id set to 42 (the rest "in a later batch")
  li-junk        listIndexes: firstBatch gets non-document elements (int, string) before the real ones
  ci-lie         createIndexes: numIndexesAfter = numIndexesBefore + 1 ("made it"), note dropped
"""
import asyncio, os, sys, time
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "integration"))
import failproxy as fp  # noqa: E402

MODES = set()

def rewrite(name, reply):
    if name.lower() == "buildinfo" and "nofdb" in MODES:
        fp.drop(reply, "ferretdbVersion"); fp.drop(reply, "ferretdbFeatures")
    if name == "listIndexes":
        cur = fp.get(reply, "cursor")
        if cur is not None:
            batch = fp.get(cur, "firstBatch")
            if "li-unique-str" in MODES and batch is not None:
                for _, kind, spec in batch:
                    if kind == 0x03 and fp.get(spec, "unique") is None and fp.get(spec, "name") != "_id_":
                        spec.append(["unique", 0x02, "no"])
            if "li-later" in MODES and batch is not None:
                batch[:] = []
                fp.put(cur, "id", 0x12, 42)
            if "li-junk" in MODES and batch is not None:
                batch[:] = [["x", 0x10, 7], ["y", 0x02, "program_1"]] + batch
                for i, item in enumerate(batch):
                    item[0] = str(i)
    if name == "createIndexes" and "ci-lie" in MODES:
        before = fp.get(reply, "numIndexesBefore")
        if before is not None:
            fp.put(reply, "numIndexesAfter", 0x10, int(before) + 1)
            fp.drop(reply, "note")
    return reply

async def one(self, message, opcode, body, server_reader, server_writer):
    doc, name, target = fp.command_of(opcode, body)
    if name == "listIndexes" and "li13" in MODES:
        fp.log(f"#{self.serial}: listIndexes -> 13")
        self.send(fp.answer(opcode, fp.error_doc(13, "rwproxy: not authorized on mongolock to execute command", [])), body)
        return True
    server_writer.write(message)
    await server_writer.drain()
    _, reply_to, reply_opcode, reply_body = await fp.read_message(server_reader)
    reply = fp.reply_doc(reply_opcode, reply_body)
    if reply is not None and name:
        reply_body = fp.with_doc(reply_opcode, reply_body, rewrite(name, reply))
    self.writer.write(fp.frame(self.proxy.serial * 1000 + 1, reply_to, reply_opcode, reply_body))
    await self.writer.drain()
    return True

fp.Connection.one = one

async def main(port_file, upstream, modes):
    MODES.update(modes.split(","))
    proxy = fp.Proxy(int(upstream), "")
    server = await asyncio.start_server(proxy.accept, "127.0.0.1", 0)
    with open(port_file + ".tmp", "w") as f:
        f.write(f"{server.sockets[0].getsockname()[1]}\n")
    os.rename(port_file + ".tmp", port_file)
    await asyncio.Event().wait()

if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
