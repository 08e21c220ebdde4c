"""A loopback server that streams tokens as fast as it can: what the client's capacity is measured
against (:mod:`tuner.loadgen._capacity`).

It answers SGLang's ``/generate`` and OpenAI's ``/v1/completions`` and ``/v1/chat/completions``
with one SSE event a token, each event in its own write, ending with ``data: [DONE]``; ``GET
/health`` answers 200. Standard library only, so :data:`SOURCE` runs on any host with Python 3
(``python3 -c SOURCE --port N``, bound to 127.0.0.1): on a remote host, the tuner's client reaches
it through the same SSH forward it reaches the inference server through. It prints ``PORT <n>``
once it listens and stops on SIGTERM.
"""

from __future__ import annotations

__all__ = ["SOURCE"]

SOURCE = r"""
import asyncio, json, signal, sys

def _tokens(body, path):
    if path == "/generate":
        return int((body.get("sampling_params") or {}).get("max_new_tokens", 16)), "sglang"
    return int(body.get("max_tokens") or 16), "chat" if path.endswith("chat/completions") else "openai"

def _event(kind, sent, total, text):
    if kind == "sglang":
        event = {"text": text, "meta_info": {"id": "r", "prompt_tokens": 1, "completion_tokens": sent,
                 "finish_reason": {"type": "length"} if sent == total else None}}
    else:
        choice = {"index": 0, "finish_reason": "length" if sent == total else None}
        choice["delta" if kind == "chat" else "text"] = {"content": " w"} if kind == "chat" else " w"
        event = {"object": "chunk", "choices": [choice],
                 "usage": {"prompt_tokens": 1, "completion_tokens": sent, "total_tokens": sent + 1}}
    data = b"data: " + json.dumps(event).encode() + b"\n\n"
    return b"%x\r\n%s\r\n" % (len(data), data)

async def _serve(reader, writer):
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, path = lines[0].split(" ")[:2]
            length = 0
            for line in lines[1:]:
                name, _, value = line.partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value)
            body = json.loads(await reader.readexactly(length)) if length else {}
            if method != "POST":
                payload = b'{"ok": true}' if path == "/health" else b'{"error": "not found"}'
                status = b"200 OK" if path == "/health" else b"404 Not Found"
                writer.write(b"HTTP/1.1 " + status + b"\r\nContent-Type: application/json\r\n"
                             b"Content-Length: %d\r\n\r\n%s" % (len(payload), payload))
                await writer.drain()
                continue
            total, kind = _tokens(body, path.split("?")[0])
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                         b"Transfer-Encoding: chunked\r\n\r\n")
            text = ""
            for sent in range(1, total + 1):
                text += " w" if kind == "sglang" else ""
                writer.write(_event(kind, sent, total, text))
                await writer.drain()
            writer.write(b"e\r\ndata: [DONE]\n\n\r\n0\r\n\r\n")
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError, OSError, ValueError):
        pass
    finally:
        writer.close()

async def _main(port):
    server = await asyncio.start_server(_serve, "127.0.0.1", port, backlog=4096)
    print("PORT", server.sockets[0].getsockname()[1], flush=True)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    async with server:
        await stop.wait()

asyncio.run(_main(int(sys.argv[sys.argv.index("--port") + 1]) if "--port" in sys.argv else 0))
"""
