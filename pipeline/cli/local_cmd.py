"""`unspecific local serve|status|stop`: the embedded llama.cpp server.

`serve` keeps one server up in the foreground (Ctrl-C stops it) and records it in a state file,
so every run started meanwhile uses it instead of starting its own.
"""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("local", help="the embedded local model (llama.cpp server): serve, status, stop")
    p.add_argument("action", choices=["serve", "status", "stop"], help="serve: run it in the foreground; "
                   "status: the model file and the server; stop: stop a running `local serve`")
    p.add_argument("--port", type=int, default=None, help="serve: port on 127.0.0.1 (default: a free one)")
    p.add_argument("--threads", type=int, default=None, help="serve: CPU threads (default 2)")
    p.add_argument("--ctx", type=int, default=None, help="serve: context length in tokens (default 8192)")
    p.add_argument("--json", action="store_true", help="status: print JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    return {"serve": serve, "status": status, "stop": stop}[args.action](args)


def serve(args: argparse.Namespace) -> int:
    import os
    import signal
    import time

    from pipeline.cli.common import console
    from pipeline.core.errors import LocalModelError, LocalServerDied
    from pipeline.core.processes import interrupt_on_signals
    from pipeline.llm import local_model as lm
    from pipeline.llm import model_file

    out = console()
    running = lm.running_server()
    if running is not None:
        raise LocalModelError(
            f"a local server is already running at {running['base_url']} (pid {running['owner_pid']}); "
            "stop it with `unspecific local stop`"
        )
    t0 = time.monotonic()
    fresh = not model_file.model_ready()
    with out.status("assembling the model file (once)..." if fresh else "checking the model file..."):
        model = model_file.model_path()
    if fresh:
        out.print(f"model assembled in {time.monotonic() - t0:.1f}s: {model}")
    server = lm.LocalServer(
        model=model,
        port=args.port,
        n_threads=args.threads or lm.N_THREADS,
        n_ctx=args.ctx or lm.N_CTX,
    )

    # `local stop` and service managers send SIGTERM, a closed terminal SIGHUP: stop the server in
    # order, as for Ctrl-C, within seconds. SIGINT too, explicitly: a shell starting us in the
    # background would have it ignored.
    interrupt_on_signals((signal.SIGTERM, signal.SIGHUP, signal.SIGINT))
    try:
        with out.status("starting the llama.cpp server..."):
            server.start()
        lm.write_state(server)
        proof = server.proof
        proved = f", answered a {proof.prompt_tokens}-token prompt in {proof.seconds:.1f}s" if proof else ""
        out.print(f"serving [bold]{server.base_url}[/] (model {model_file.MODEL_ALIAS}, started in "
                  f"{server.started_s:.1f}s{proved})")
        out.print(f"log: {server.log_path}\nruns started now use this server; Ctrl-C stops it")
        while (death := server.death(when="while serving")) is None:
            time.sleep(1.0)
        raise LocalServerDied(death)
    except KeyboardInterrupt:
        out.print("stopping the server...")
        return 0
    finally:
        server.stop()
        lm.clear_state(owner_pid=os.getpid())


def status(args: argparse.Namespace) -> int:
    import json

    from pipeline.cli.common import console
    from pipeline.llm import local_model as lm
    from pipeline.llm import model_file

    target = model_file.target_path()
    size = target.stat().st_size if target.exists() else None
    state = lm.read_state()
    running = lm.running_server()
    info = {
        "model_path": str(target),
        "model_bytes": size,
        "model_ok": size == model_file.MODEL_BYTES,
        "expected_bytes": model_file.MODEL_BYTES,
        "llama_cpp_installed": lm.llama_cpp_available(),
        "server": running["base_url"] if running else None,
        "server_pid": running["server_pid"] if running else None,
        "stale_state": state is not None and running is None,
    }
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    out = console()
    if size is None:
        out.print(f"model: not assembled yet (assembled on first use into {target})")
    elif info["model_ok"]:
        out.print(f"model: [green]OK[/] {target} ({size:,} bytes)")
    else:
        out.print(f"model: [red]wrong size[/] {target} ({size:,} bytes, expected "
                  f"{model_file.MODEL_BYTES:,}); "
                  "delete it and it is assembled again")
    out.print("llama-cpp-python: " + ("installed" if info["llama_cpp_installed"] else
                                      "[red]not installed[/] (pip install -e '.\\[local]')"))
    if running:
        out.print(f"server: [green]running[/] at {running['base_url']} (pid {running['server_pid']}, "
                  f"since {running.get('started_at', '?')})")
    else:
        out.print("server: not running" + (" (stale state file ignored)" if info["stale_state"] else "")
                  + "; runs start their own, or keep one up with `unspecific local serve`")
    return 0


def stop(args: argparse.Namespace) -> int:
    import os
    import signal
    import time

    from pipeline.cli.common import console
    from pipeline.core.processes import process_alive
    from pipeline.llm import local_model as lm

    out = console()
    # Only a recorded server that still answers is signalled: a stale file's pids may be reused.
    state = lm.running_server()
    if state is None:
        if lm.read_state() is not None:
            lm.clear_state()
            out.print("the recorded server was already gone; state file removed")
        else:
            out.print("no `local serve` server recorded; nothing to stop")
        return 0
    owner: int | None = state.get("owner_pid")
    server: int = state["server_pid"]  # running_server found this pid alive
    # Ask the serve process first: it stops the server in order and removes the state file.
    target = owner if owner is not None and process_alive(owner) else server
    os.kill(int(target), signal.SIGTERM)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and (process_alive(owner) or process_alive(server)):
        time.sleep(0.2)
    if process_alive(server):
        os.kill(int(server), signal.SIGKILL)
    lm.clear_state()
    out.print(f"stopped the server at {state.get('base_url')}")
    return 0
