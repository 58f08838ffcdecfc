#!/usr/bin/env python3
"""tests/integration/failproxy.py with one more action, for red team 10 (target 2): a lying primary.

    fail MATCH WHEN error-after CODE [label|nolabel]
        forward the command, wait for the server's reply (the write is applied), drop that reply and answer
        the client {ok: 0, code: CODE} instead (label RetryableWriteError as failproxy's `error`). What a
        client sees when a primary applies a write and steps down (or a mongos loses the shard's answer)
        before it replies with an election's code.

Everything else (serve, the FIFO commands, --rs) is failproxy.py's, unchanged (imported, not copied).
"""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "integration"))
import failproxy as fp  # noqa: E402

_add_rule = fp.Proxy.add_rule


def add_rule(self, words):
    if len(words) >= 5 and words[3] == "error-after":
        label = None
        if len(words) > 5:
            label = words[5] == "label"
        rule_words = words[:3] + ["delay", "0"]
        result = _add_rule(self, rule_words)
        rule = self.rules[-1]
        rule.action, rule.arg, rule.label = "error-after", int(words[4]), label
        return result
    return _add_rule(self, words)


async def one(self, message, opcode, body, server_reader, server_writer):
    proxy = self.proxy
    doc, name, target = fp.command_of(opcode, body)
    if proxy.blackout or proxy.silenced or time.monotonic() < proxy.blackout_until:
        return await _one(self, message, opcode, body, server_reader, server_writer)
    # Peek: only an error-after rule is handled here; any other goes to failproxy's one() untouched.
    rule = None
    if doc is not None:
        for r in proxy.rules:
            if r.applies(name, target, doc):
                rule = r
                break
    if rule is None or rule.action != "error-after":
        return await _one(self, message, opcode, body, server_reader, server_writer)
    proxy.rule_for(name, target, doc)  # consume it (times N)
    server_writer.write(message)
    await server_writer.drain()
    _, reply_to, reply_opcode, reply_body = await fp.read_message(server_reader)
    applied = fp.reply_doc(reply_opcode, reply_body)
    fp.log(f"#{self.serial}: {name} on {target or '-'}: error-after {rule.arg} (the server answered "
           f"ok={fp.get(applied or [], 'ok')} n={fp.get(applied or [], 'n')}; the client gets {rule.arg})")
    label = rule.label if rule.label is not None else (rule.arg in fp.RETRYABLE_CODES and fp.retryable_write(name, doc))
    errmsg = f"lyingproxy: {fp.CODE_NAMES.get(rule.arg, 'error')} (applied)"
    self.send(fp.answer(opcode, fp.error_doc(rule.arg, errmsg, ["RetryableWriteError"] if label else [])), body)
    return True


_one = fp.Connection.one
fp.Proxy.add_rule = add_rule
fp.Connection.one = one

if __name__ == "__main__":
    sys.exit(fp.main(sys.argv))
