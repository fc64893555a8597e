"""A sandbox runtime the agent-sandbox SDK (`k8s-agent-sandbox`) can drive: the SDK's workload
API over HTTP, standard library only, so it runs with any python3 >= 3.8.

    GET  /                  health: {"status": "ok", "message": ...}
    POST /execute           {"command", "timeout_seconds"?} -> {"stdout", "stderr",
                            "exit_code", "timed_out"}; the command runs under /bin/sh -c
    POST /upload            multipart/form-data, field "file"; its filename is the path
    GET  /download/{path}   the file's bytes (application/octet-stream), 404 if not a file
    GET  /list/{path}       [{"name", "size", "type": "file"|"directory", "mod_time"}]
    GET  /exists/{path}     {"exists": bool}

Paths are relative to the root directory: $SANDBOX_ROOT, else the working directory (under
`rouse up`, the sandbox's first volume or its scratch directory). A path that resolves outside
the root (`..`, an absolute path, a symlink leading out) is refused with 400.

Listens on $PORT bound to 127.0.0.1 when PORT is set (Rouse's local runtimes pass it), else on
0.0.0.0:8888 (a pod). Commands run with the runtime's own environment.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import urllib.parse
from email.parser import BytesParser
from email.policy import HTTP
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ROOT = os.path.realpath(os.environ.get("SANDBOX_ROOT") or os.getcwd())
# Uploads are parsed in memory: bound them (bytes).
MAX_UPLOAD = int(os.environ.get("SANDBOX_MAX_UPLOAD_BYTES", str(256 * 1024 * 1024)))
# A command's output is kept in memory too: bound each stream (bytes).
MAX_OUTPUT = int(os.environ.get("SANDBOX_MAX_OUTPUT_BYTES", str(16 * 1024 * 1024)))
# Exit code reported for a command killed at its time limit, as `timeout(1)` does.
TIMED_OUT_EXIT = 124
CHUNK = 64 * 1024


class Refused(Exception):
    """A request the runtime answers with an error status and a message."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status
        self.message = message


def resolve(relative):
    """The absolute path of a root-relative path, refused when it leaves the root."""
    relative = urllib.parse.unquote(relative)
    if "\x00" in relative:
        raise Refused(HTTPStatus.BAD_REQUEST, "path contains NUL")
    full = os.path.realpath(os.path.join(ROOT, relative.lstrip("/")))
    if full != ROOT and not full.startswith(ROOT + os.sep):
        raise Refused(HTTPStatus.BAD_REQUEST, "path leaves the sandbox root: " + relative)
    return full


def run(command, timeout):
    """Runs a shell command in the root; kills its whole process group at the time limit."""
    proc = subprocess.Popen(
        ["/bin/sh", "-c", command],
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    timed_out = False
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
    decode = lambda b: b[:MAX_OUTPUT].decode("utf-8", errors="replace")
    stderr = decode(err)
    if timed_out:
        stderr += "Command timed out after %g seconds\n" % timeout
    return {
        "stdout": decode(out),
        "stderr": stderr,
        "exit_code": TIMED_OUT_EXIT if timed_out else proc.returncode,
        "timed_out": timed_out,
    }


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "rouse-sandbox-runtime/1"

    def log_message(self, fmt, *args):
        sys.stderr.write("%s %s\n" % (self.address_string(), fmt % args))

    def reply(self, status, body, content_type="application/json"):
        data = json.dumps(body).encode() if content_type == "application/json" else body
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def body(self, limit):
        """The request body (Content-Length or chunked), refused above `limit` bytes."""
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            parts, total = [], 0
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    return b"".join(parts)
                total += size
                if total > limit:
                    raise Refused(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, "body too large")
                parts.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        if length > limit:
            raise Refused(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, "body too large")
        return self.rfile.read(length)

    def handle_one_request(self):
        try:
            super().handle_one_request()
        except Refused as refused:
            self.reply(refused.status, {"message": refused.message})
            self.close_connection = True

    def route(self, prefix):
        """The rest of the path after `prefix`, or None when the path does not start so."""
        path = urllib.parse.urlsplit(self.path).path
        if path == prefix.rstrip("/") or path.startswith(prefix):
            return path[len(prefix):]
        return None

    def do_HEAD(self):
        self.do_GET()

    def do_GET(self):
        if urllib.parse.urlsplit(self.path).path == "/":
            return self.reply(200, {"status": "ok", "message": "Sandbox Runtime is active."})
        rest = self.route("/download/")
        if rest is not None:
            return self.download(resolve(rest or "."))
        rest = self.route("/list/")
        if rest is not None:
            return self.listing(resolve(rest or "."))
        rest = self.route("/exists/")
        if rest is not None:
            return self.reply(200, {"exists": os.path.exists(resolve(rest or "."))})
        self.reply(404, {"message": "Not found"})

    def do_POST(self):
        path = urllib.parse.urlsplit(self.path).path
        if path == "/execute":
            return self.execute()
        if path == "/upload":
            return self.upload()
        self.reply(404, {"message": "Not found"})

    def execute(self):
        try:
            request = json.loads(self.body(1024 * 1024) or b"{}")
            command = request["command"]
            timeout = request.get("timeout_seconds")
            timeout = None if timeout is None else float(timeout)
        except (ValueError, KeyError, TypeError) as err:
            raise Refused(HTTPStatus.UNPROCESSABLE_ENTITY, "bad execute request: %s" % err)
        if not isinstance(command, str):
            raise Refused(HTTPStatus.UNPROCESSABLE_ENTITY, "command must be a string")
        try:
            self.reply(200, run(command, timeout))
        except OSError as err:
            self.reply(200, {"stdout": "", "stderr": "Failed to execute command: %s" % err,
                             "exit_code": 1, "timed_out": False})

    def upload(self):
        content_type = self.headers.get("Content-Type", "")
        if not content_type.startswith("multipart/form-data"):
            raise Refused(HTTPStatus.BAD_REQUEST, "expected multipart/form-data")
        head = ("Content-Type: %s\r\nMIME-Version: 1.0\r\n\r\n" % content_type).encode()
        message = BytesParser(policy=HTTP).parsebytes(head + self.body(MAX_UPLOAD))
        part = next((p for p in message.iter_parts()
                     if p.get_param("name", header="content-disposition") == "file"), None)
        if part is None or not part.get_filename():
            raise Refused(HTTPStatus.BAD_REQUEST, "no multipart field 'file' with a filename")
        name = part.get_filename()
        target = resolve(name)
        if target == ROOT or os.path.isdir(target):
            raise Refused(HTTPStatus.BAD_REQUEST, "not a file path: " + name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "wb") as out:
            out.write(part.get_payload(decode=True) or b"")
        self.reply(200, {"message": "File '%s' uploaded successfully." % name})

    def download(self, full):
        if not os.path.isfile(full):
            return self.reply(404, {"message": "File not found"})
        with open(full, "rb") as src:
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(os.fstat(src.fileno()).st_size))
            self.end_headers()
            if self.command != "HEAD":
                shutil.copyfileobj(src, self.wfile, CHUNK)

    def listing(self, full):
        if not os.path.isdir(full):
            return self.reply(404, {"message": "Directory not found"})
        entries = []
        with os.scandir(full) as it:
            for entry in sorted(it, key=lambda e: e.name):
                try:
                    stat = entry.stat(follow_symlinks=False)
                except OSError:
                    continue  # removed while listing
                is_dir = entry.is_dir(follow_symlinks=False)
                entries.append({"name": entry.name, "size": 0 if is_dir else stat.st_size,
                                "type": "directory" if is_dir else "file",
                                "mod_time": stat.st_mtime})
        self.reply(200, entries)


def main():
    port = os.environ.get("PORT")
    address = ("127.0.0.1", int(port)) if port else ("0.0.0.0", 8888)
    server = ThreadingHTTPServer(address, Handler)
    server.daemon_threads = True
    # A stop is SIGTERM: leave serve_forever and exit 0.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    sys.stderr.write("sandbox runtime on %s:%d, root %s\n" % (address[0], address[1], ROOT))
    server.serve_forever()


if __name__ == "__main__":
    main()
