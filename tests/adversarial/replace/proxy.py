#!/usr/bin/env python3
# proxy.py LISTEN_PORT TARGET_PORT DELAY_MS : TCP proxy delaying server->client bytes by DELAY_MS
import asyncio, sys, time
LP, TP, D = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]) / 1000
async def pipe(r, w, delay):
    q = asyncio.Queue()
    async def reader():
        while True:
            data = await r.read(65536)
            await q.put((time.monotonic() + delay, data))
            if not data: return
    async def writer():
        while True:
            t, data = await q.get()
            dt = t - time.monotonic()
            if dt > 0: await asyncio.sleep(dt)
            if not data:
                try: w.close()
                except Exception: pass
                return
            w.write(data); await w.drain()
    await asyncio.gather(reader(), writer(), return_exceptions=True)
async def handle(cr, cw):
    sr, sw = await asyncio.open_connection('127.0.0.1', TP)
    await asyncio.gather(pipe(cr, sw, 0), pipe(sr, cw, D), return_exceptions=True)
async def main():
    s = await asyncio.start_server(handle, '127.0.0.1', LP)
    async with s: await s.serve_forever()
asyncio.run(main())
