"""A stand-in for llama-cpp-python's OpenAI-compatible server, the one both server tests start:
tests/test_local_model.py runs it as the "python" that LocalServer calls (``-c "import
llama_cpp.server"`` is its install check), tests/test_no_orphans.py as the ``llama_cpp.server``
package's ``__main__`` behind the real bootstrap. Never imported: its text is written out as
that script or module, and it runs only as ``__main__``.

``FAKE_LLAMA_MODE`` picks a behaviour: ok (answers every chat with "meeting"), die (exits while
loading), portrace (the first start finds its port taken), hang (never answers), stubborn
(ignores SIGTERM), busy (/v1/models waits while it "generates"), crash_on_prompt / crash_later
(a batched prompt, or the second one, kills it with SIGSEGV, as a native build on a VM that
forbids AMX), junk_on_prompt (an error body with 200 OK), hold (answers the start-up proof, then
holds every other chat "forever", as a server busy generating). With ``FAKE_LLAMA_PIDS`` set, its
pid is written into that folder (and "busy" once it holds a chat).
"""

import http.server
import json
import os
import signal
import sys
import time
from pathlib import Path

SOURCE = Path(__file__)


def _arg(args: list[str], name: str, default: str = "") -> str:
    return args[args.index(name) + 1] if name in args else default


def main(args: list[str]) -> None:
    if args[:2] == ["-c", "import llama_cpp.server"]:
        sys.exit(0)
    mode = os.environ.get("FAKE_LLAMA_MODE", "ok")
    pids = os.environ.get("FAKE_LLAMA_PIDS")
    # several models (pipeline.llm.local_model.ServedModel): llama-cpp-python's form
    if "--config_file" in args:
        with open(_arg(args, "--config_file"), encoding="utf-8") as fh:
            settings = json.load(fh)
        port, model = int(settings["port"]), settings["models"][0]["model"]
        aliases = [m["model_alias"] for m in settings["models"]]
    else:
        port, model, aliases = int(_arg(args, "--port")), _arg(args, "--model", "?"), ["fake"]
    if pids:
        open(os.path.join(pids, str(os.getpid())), "w").close()
    print("fake llama: loading", model, "as", ", ".join(aliases), flush=True)
    print("fake llama: openmp", os.environ.get("OMP_WAIT_POLICY"),
          os.environ.get("GOMP_SPINCOUNT"), flush=True)
    if mode == "die":
        print("error: failed to load model", flush=True)
        sys.exit(3)
    if mode == "portrace" and not os.path.exists(os.environ["FAKE_LLAMA_MARKER"]):
        open(os.environ["FAKE_LLAMA_MARKER"], "w").write(str(port))
        print("ERROR: [Errno 98] error while attempting to bind on address: address already in use",
              flush=True)
        sys.exit(1)
    if mode == "hang":
        time.sleep(60)
    if mode == "stubborn":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    served: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if mode == "busy" and self.path == "/v1/models" and served:
                time.sleep(30)  # like llama-cpp-python while it generates: /v1/models waits for the model
            served.append(self.path)
            body = json.dumps({"object": "list", "data": [{"id": a} for a in aliases]}).encode()
            self.send_response(200 if self.path in ("/v1/models", "/openapi.json") else 404)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["content-length"])))
            prompt = sum(len(m["content"].split()) for m in body["messages"])
            served.append(self.path)
            posts = served.count(self.path)
            print(f"fake llama: prompt of {prompt} words", flush=True)
            if mode == "hold" and body.get("max_tokens") != 4:  # not the proof prompt: generate "forever"
                if pids:
                    open(os.path.join(pids, "busy"), "w").close()
                time.sleep(600)
            if (mode == "crash_on_prompt" and prompt > 50) or (mode == "crash_later" and posts > 1):
                print("ggml: computing a batch", flush=True)
                os.kill(os.getpid(), signal.SIGSEGV)
                time.sleep(5)  # the signal lands on another thread a moment later
            if mode == "junk_on_prompt":
                reply: dict = {"error": "not today"}
            else:
                tokens = prompt * 4 // 3
                reply = {"id": "x", "object": "chat.completion", "model": "fake",
                         "choices": [{"index": 0, "message": {"role": "assistant", "content": "meeting"},
                                      "finish_reason": "stop"}],
                         "usage": {"prompt_tokens": tokens, "completion_tokens": 1,
                                   "total_tokens": tokens + 1}}
            data = json.dumps(reply).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()


if __name__ == "__main__":
    main(sys.argv[1:])
