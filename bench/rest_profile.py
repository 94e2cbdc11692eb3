"""In-process profile of one REST request shape (issue 13's single-message produce by default).

``PYTHONPATH=. .venv/bin/python -m bench.rest_profile [-n 3000] [--top 25] [--sort tottime]``

Setup (not timed) as :mod:`bench.rest`: a name server and a broker as subprocesses, a fresh SQLite database in a
temp dir (``migrate``), a superuser and its API token. Then, in this process, the console's WSGI application
(``console.wsgi.application``, what gunicorn serves) is called directly with a prepared WSGI environ for
``POST /api/v1/topics/<topic>/messages/`` with ``Authorization: Token <key>`` and a ``--body-size`` UTF-8 body:
no HTTP server and no socket on the console side, so the figures are the application's own CPU and wait per
request (the SDK's send to the broker is real). Every reply is checked (201, one result).

Prints the mean wall time per request over ``-n`` requests without the profiler, then the same number under
cProfile, with the ``--top`` entries by ``--sort``. One thread, one request at a time: a profile, not a load
test (see :mod:`bench.rest` for that).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import random
import sys
import time
from collections.abc import Callable
from typing import Any

from bench.rest import ROOT, Stack, text_body


def make_call(app: Callable[..., Any], topic: str, token: str, body: str) -> Callable[[], None]:
    payload = json.dumps({"messages": [{"body": body, "body_encoding": "utf-8"}]}).encode()
    path = f"/api/v1/topics/{topic}/messages/"

    def call() -> None:
        environ = {"REQUEST_METHOD": "POST", "PATH_INFO": path, "QUERY_STRING": "", "SERVER_NAME": "127.0.0.1",
                   "SERVER_PORT": "8000", "SERVER_PROTOCOL": "HTTP/1.1", "REMOTE_ADDR": "127.0.0.1",
                   "HTTP_HOST": "127.0.0.1:8000", "HTTP_AUTHORIZATION": f"Token {token}",
                   "HTTP_ACCEPT": "application/json", "CONTENT_TYPE": "application/json",
                   "CONTENT_LENGTH": str(len(payload)), "wsgi.input": io.BytesIO(payload),
                   "wsgi.url_scheme": "http", "wsgi.errors": sys.stderr, "wsgi.multithread": True,
                   "wsgi.multiprocess": True, "wsgi.run_once": False, "wsgi.version": (1, 0)}
        status: list[str] = []
        chunks = app(environ, lambda s, h, exc_info=None: status.append(s))
        out = b"".join(chunks)
        if hasattr(chunks, "close"):
            chunks.close()
        if not status[0].startswith("201") or len(json.loads(out)["results"]) != 1:
            raise RuntimeError(f"{status[0]}: {out[:300]!r}")

    return call


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.rest_profile", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=3000, help="requests per pass (3000)")
    parser.add_argument("--body-size", type=int, default=1024, help="message body bytes (1024)")
    parser.add_argument("--top", type=int, default=30, help="profile entries printed (30)")
    parser.add_argument("--sort", default="tottime", help="pstats sort key (tottime; cumulative is useful too)")
    parser.add_argument("--no-cprofile", action="store_true",
                        help="timed passes only (e.g. under py-spy: py-spy record -r 500 -f raw -o FILE -- ...)")
    parser.add_argument("--out", default="", help="also dump the raw profile to this file (pstats format)")
    parser.add_argument("--passes", type=int, default=3, help="unprofiled passes, each timed (3)")
    args = parser.parse_args(argv)

    stack = Stack()
    try:
        stack.start_broker()
        stack._manage("migrate", "--noinput")
        from bench.rest import TOKEN_SCRIPT
        out = stack._manage("shell", "-c", TOKEN_SCRIPT)
        token = next(line.split("=", 1)[1] for line in out.splitlines() if line.startswith("TOKEN="))
        os.environ.update({k: v for k, v in stack.env.items() if k not in ("PYTHONPATH",)})
        sys.path.insert(0, str(ROOT))
        from broker_core.client import AdminClient
        admin = AdminClient(stack.namesrv).start()
        admin.create_topic("BenchRestProfile", 4, 4)
        admin.shutdown()
        from console.wsgi import application
        call = make_call(application, "BenchRestProfile", token, text_body(args.body_size, random.Random(1)))
        for _ in range(50):  # connections, route, producer
            call()
        for p in range(args.passes):
            t0 = time.perf_counter()
            cpu0 = time.process_time()
            for _ in range(args.n):
                call()
            wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
            print(f"pass {p + 1}: {wall / args.n * 1000:.3f} ms wall, {cpu / args.n * 1000:.3f} ms CPU of this "
                  f"process per request ({args.n} requests, load {os.getloadavg()[0]:.1f})", flush=True)
        if args.no_cprofile:
            return 0
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(args.n):
            call()
        prof.disable()
        if args.out:
            prof.dump_stats(args.out)
        stats = pstats.Stats(prof)
        stats.sort_stats(args.sort).print_stats(args.top)
    finally:
        stack.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
