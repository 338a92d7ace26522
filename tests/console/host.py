"""The real host for the console's browser tests: ``assignd serve`` on a
free loopback port with a temporary data dir, an admin token and a
read-only token, its admin API over urllib, and members that heartbeat
through the Python member client (``clients/python``)."""

import json
import os
import pathlib
import secrets
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "clients" / "python" / "src"))

from assignd import Listener, Member, MemberConfig  # noqa: E402

START_TIMEOUT_S = 60


class Host:
    """``assignd serve`` as a child process, stopped by :meth:`stop`."""

    def __init__(self, binary):
        self.dir = tempfile.TemporaryDirectory(prefix="assignd-console-")
        data = pathlib.Path(self.dir.name) / "data"
        data.mkdir()
        self.admin_token = "admin-" + secrets.token_hex(16)
        self.read_only_token = "read-only-" + secrets.token_hex(16)
        (data / "admin-token").write_text(self.admin_token + "\n")
        os.chmod(data / "admin-token", 0o600)
        read_only_file = pathlib.Path(self.dir.name) / "read-only-token"
        read_only_file.write_text(self.read_only_token + "\n")
        env = {k: v for k, v in os.environ.items() if not k.startswith("ASSIGND_")}
        self.process = subprocess.Popen(
            [
                str(binary), "serve", "--listen", "127.0.0.1:0", "--data-dir", str(data),
                "--read-only-token-file", str(read_only_file), "--shards", "8",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            text=True,
        )
        self.url = self._read_address()
        self.members = []

    def _read_address(self):
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            line = self.process.stdout.readline()
            if line.startswith("listening on "):
                return line.split()[-1]
            if line == "" and self.process.poll() is not None:
                break
        self.stop()
        raise RuntimeError("assignd serve did not print its address")

    def call(self, method, path, body=None, token=None):
        """The JSON answer of ``method path``; raises on an error status."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("authorization", f"Bearer {token or self.admin_token}")
        if data is not None:
            request.add_header("content-type", "application/json")
        with urllib.request.urlopen(request, timeout=10) as answer:
            text = answer.read()
        return json.loads(text) if text else None

    def status(self, method, path, token):
        """The status and error code of ``method path`` with ``token``."""
        try:
            self.call(method, path, token=token)
            return 200, None
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())["error"]["code"]

    def create_group(self, name, partitions):
        self.call("PUT", f"/v1/groups/{name}", {
            "topics": [{"name": "orders", "partitions": partitions}],
            "assignor": "sticky",
            "learners": "off",
            "heartbeat_interval_ms": 300,
            "expansion_timeout_ms": 200,
            "session_timeout_ms": 3000,
        })

    def start_member(self, group, name):
        config = MemberConfig(
            urls=self.url, group=group, topics=["orders"], member_name=name,
            endpoint=f"http://{name}.example:8080",
        )
        member = Member(config, Listener()).start()
        self.members.append(member)
        return member

    def wait_until(self, condition, what, timeout_s=30):
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if condition():
                return
            time.sleep(0.1)
        raise AssertionError(f"timed out waiting for {what}")

    def wait_stable(self, group, members):
        def stable():
            view = self.call("GET", f"/v1/groups/{group}")
            return view["state"] == "stable" and len(view["members"]) == members
        self.wait_until(stable, f"{group} stable with {members} members")

    def stop(self):
        for member in self.members:
            member.close()
        self.members.clear()
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.dir.cleanup()
