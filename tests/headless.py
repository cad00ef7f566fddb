"""Drive headless Chromium over the DevTools protocol on a pipe (--remote-debugging-pipe): stdlib only.

    with Browser() as b:
        page = b.open("file:///.../timeline.html", width=1400, height=900)
        status = page.wait_for("window.__mpigraph && (window.__mpigraph.ok || window.__mpigraph.errors.length)")
        page.screenshot("shot.png")
        page.console_errors        # console.error calls, uncaught exceptions, error log entries

Messages are JSON, NUL-terminated, written to the browser's fd 3 and read from
its fd 4.  Every wait has a timeout: a hung browser fails the test, never hangs it.
"""

import base64
import json
import os
import select
import shutil
import subprocess
import tempfile
import time


def chromium_path():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    raise RuntimeError("no chromium on PATH (Debian: apt-get install chromium)")


class BrowserError(RuntimeError):
    pass


class Browser:
    def __init__(self, timeout=120):
        self.timeout = timeout
        self.profile = tempfile.mkdtemp(prefix="mpigraph-chromium-")
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()
        # The child sees the pipes as fds 3 and 4 (the pipes' own fds may be 3 or 4: move them first).
        def child_fds():
            a, b = os.dup(to_browser_r), os.dup(from_browser_w)
            os.dup2(a, 3)
            os.dup2(b, 4)
        self.proc = subprocess.Popen(
            [chromium_path(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--disable-dev-shm-usage", "--hide-scrollbars", "--mute-audio",
             "--user-data-dir=" + self.profile, "--remote-debugging-pipe", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            preexec_fn=child_fds, close_fds=False)
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._buffer = b""
        self._next_id = 0
        self.events = []

    # ---- the protocol -----------------------------------------------------------
    def send(self, method, params=None, session=None, timeout=None):
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            reply = self._read(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise BrowserError("%s: %s" % (method, reply["error"]))
                return reply.get("result", {})
            self.events.append(reply)

    def _read(self, deadline):
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BrowserError("no answer from chromium in time")
            ready, _, _ = select.select([self._from_browser], [], [], left)
            if ready:
                chunk = os.read(self._from_browser, 1 << 20)
                if not chunk:
                    raise BrowserError("chromium closed the pipe: %s" % self._stderr())
                self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def pump(self, seconds):
        """Read events for `seconds`."""
        deadline = time.monotonic() + seconds
        try:
            while True:
                self.events.append(self._read(deadline))
        except BrowserError as e:
            if "in time" not in str(e):
                raise

    def _stderr(self):
        try:
            self.proc.kill()
            return self.proc.stderr.read().decode(errors="replace")[-2000:]
        except Exception:   # noqa: BLE001
            return ""

    def open(self, url, width=1400, height=900):
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        page = Page(self, session)
        for domain in ("Runtime.enable", "Log.enable", "Page.enable"):
            self.send(domain, session=session)
        self.send("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}, session=session)
        page.started = time.monotonic()
        self.send("Page.navigate", {"url": url}, session=session)
        return page

    def close(self):
        try:
            if self.proc.poll() is None:
                try:
                    os.write(self._to_browser, json.dumps({"id": 0, "method": "Browser.close"}).encode() + b"\0")
                    self.proc.wait(timeout=10)
                except Exception:   # noqa: BLE001
                    self.proc.kill()
                    self.proc.wait(timeout=10)
        finally:
            for fd in (self._to_browser, self._from_browser):
                try:
                    os.close(fd)
                except OSError:
                    pass
            self.proc.stderr.close()
            shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Page:
    def __init__(self, browser, session):
        self.browser = browser
        self.session = session
        self.started = None

    def evaluate(self, expression):
        result = self.browser.send("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True},
                                   session=self.session)
        if "exceptionDetails" in result:
            raise BrowserError("evaluate %r: %s" % (expression, result["exceptionDetails"]))
        return result["result"].get("value")

    def wait_for(self, expression, timeout=120, poll=0.25):
        """Poll until `expression` is truthy; its value, and the seconds since navigation started."""
        deadline = time.monotonic() + timeout
        while True:
            value = self.evaluate(expression)
            if value:
                return value, time.monotonic() - self.started
            if time.monotonic() > deadline:
                raise BrowserError("timed out after %d s waiting for %s" % (timeout, expression))
            self.browser.pump(poll)

    def screenshot(self, path):
        data = self.browser.send("Page.captureScreenshot", {"format": "png"}, session=self.session)["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))
        return path

    @property
    def console_errors(self):
        """Console errors, uncaught exceptions and error log entries of this page so far."""
        errors = []
        for e in self.browser.events:
            if e.get("sessionId") != self.session:
                continue
            method, params = e.get("method"), e.get("params", {})
            if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                errors.append("console.%s: %s" % (params["type"], [a.get("value", a.get("description"))
                                                                   for a in params.get("args", [])]))
            elif method == "Runtime.exceptionThrown":
                details = params.get("exceptionDetails", {})
                errors.append("exception: %s %s" % (details.get("text"),
                                                    details.get("exception", {}).get("description", "")))
            elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
                errors.append("log: %s" % params["entry"].get("text"))
        return errors
