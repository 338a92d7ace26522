#!/usr/bin/env python3
"""Memory and cache cost of module uploads that do not stay.

Starts `ASSIGND serve` on a scratch data dir and, with a component given as
COMPONENT, makes CYCLES uploads of distinct bytes (the component with a
custom section naming the cycle) each deleted again, then REFUSED uploads
of distinct bytes under a name already taken. Prints the server's RSS and
the size of DATA_DIR/cache after a warm-up and after each phase.

    python3 host/benches/module_cycles.py ASSIGND COMPONENT [CYCLES] [REFUSED]
"""
import json, os, shutil, subprocess, sys, tempfile, urllib.request

TOKEN = "module-cycles-token-0123"


def leb(n):
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def variant(component, i):
    """The component with a custom section `cycle` holding `i`: new bytes,
    the same module."""
    name = b"cycle"
    body = leb(len(name)) + name + i.to_bytes(8, "little")
    return component + b"\x00" + leb(len(body)) + body


def call(base, method, path, body=None, content="application/json"):
    request = urllib.request.Request(base + path, data=body, method=method)
    request.add_header("authorization", "Bearer " + TOKEN)
    if body is not None:
        request.add_header("content-type", content)
    try:
        with urllib.request.urlopen(request) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def rss_kib(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])


def cache_kib(data_dir):
    total = 0
    for root, _, files in os.walk(os.path.join(data_dir, "cache")):
        total += sum(os.path.getsize(os.path.join(root, f)) for f in files)
    return total // 1024


def main():
    binary, component_path = sys.argv[1], sys.argv[2]
    cycles = int(sys.argv[3]) if len(sys.argv) > 3 else 100
    refused = int(sys.argv[4]) if len(sys.argv) > 4 else 100
    component = open(component_path, "rb").read()
    data_dir = tempfile.mkdtemp(prefix="module-cycles-")
    server = subprocess.Popen(
        [binary, "serve", "--listen", "127.0.0.1:0", "--data-dir", data_dir],
        env=dict(os.environ, ASSIGND_ADMIN_TOKEN=TOKEN),
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        base = server.stdout.readline().strip().removeprefix("listening on ")

        def upload(bytes_, name, version):
            return call(base, "POST", f"/v1/assignors?name={name}&version={version}",
                        bytes_, "application/wasm")

        def cycle(i):
            status, answer = upload(variant(component, i), "cycle", str(i))
            assert status == 201, (status, answer)
            module = json.loads(answer)["id"]
            status, answer = call(base, "DELETE", f"/v1/assignors/{module}")
            assert status == 204, (status, answer)

        def report(what):
            print(f"{what:<34} rss {rss_kib(server.pid):>8} KiB   cache {cache_kib(data_dir):>8} KiB")

        for i in range(20):
            cycle(1_000_000 + i)
        report("after 20 warm-up cycles")
        for i in range(cycles):
            cycle(i)
        report(f"after {cycles} upload+delete cycles")
        status, answer = upload(component, "taken", "1")
        assert status == 201, (status, answer)
        for i in range(refused):
            status, answer = upload(variant(component, 2_000_000 + i), "taken", "1")
            assert status == 409, (status, answer)
        report(f"after {refused} refused (name taken)")
    finally:
        server.kill()
        server.wait()
        shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
