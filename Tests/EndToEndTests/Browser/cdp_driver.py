#!/usr/bin/env python3
"""Drives a headless Chromium for the dashboard tests, over the DevTools protocol on a
pipe (--remote-debugging-pipe: JSON messages ending in NUL on fds 3 and 4), so nothing
but the page's own server is spoken to. Run it inside the test's network namespace: the
browser then reaches only that namespace's loopback.

Commands, one JSON object per line on stdin; one JSON answer per line on stdout:
  {"cmd":"open","url":U}          navigate and wait for the load event
  {"cmd":"eval","js":E}           evaluate E in the page (promises awaited) -> {"value":…}
  {"cmd":"clearCookies"}
  {"cmd":"shot","path":P,"width":W,"height":H}   a PNG of the page at that size
  {"cmd":"quit"}
Answers are {"ok":true,…} or {"ok":false,"error":"…"}.
"""

import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time


class Browser:
    def __init__(self, chromium):
        self.profile = tempfile.mkdtemp(prefix="syncpeer-chromium-")
        to_browser_r, self.to_browser = os.pipe()
        self.from_browser, from_browser_w = os.pipe()
        args = [
            chromium, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
            "--remote-debugging-pipe", f"--user-data-dir={self.profile}",
            "--no-first-run", "--no-default-browser-check", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--disable-default-apps",
            "--disable-extensions", "--disable-breakpad", "--metrics-recording-only",
            "--disable-features=Translate,OptimizationHints,MediaRouter,DialMediaRouteProvider",
            "--password-store=basic", "--use-mock-keychain", "--window-size=1280,900",
            "about:blank",
        ]

        def wire_fds():
            os.dup2(to_browser_r, 3)
            os.dup2(from_browser_w, 4)

        self.process = subprocess.Popen(args, pass_fds=(3, 4), preexec_fn=wire_fds,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_browser_r)
        os.close(from_browser_w)
        self.next_id = 0
        self.buffer = b""
        self.events = []
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        self.call("Page.enable", session=True)
        self.call("Runtime.enable", session=True)

    def send(self, message):
        os.write(self.to_browser, json.dumps(message).encode() + b"\0")

    def receive(self, deadline):
        while b"\0" not in self.buffer:
            if time.time() > deadline:
                raise TimeoutError("no answer from Chromium")
            chunk = os.read(self.from_browser, 1 << 20)
            if not chunk:
                raise EOFError("Chromium went away")
            self.buffer += chunk
        message, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(message)

    def call(self, method, params=None, session=False, timeout=30):
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = self.session
        self.send(message)
        deadline = time.time() + timeout
        while True:
            answer = self.receive(deadline)
            if answer.get("id") == self.next_id:
                if "error" in answer:
                    raise RuntimeError(f"{method}: {answer['error'].get('message')}")
                return answer.get("result", {})
            if "method" in answer:
                self.events.append(answer)

    def wait_event(self, name, timeout=30):
        deadline = time.time() + timeout
        while True:
            for index, event in enumerate(self.events):
                if event.get("method") == name:
                    del self.events[: index + 1]
                    return event
            self.events.append(self.receive(deadline))

    def open(self, url):
        self.events.clear()
        self.call("Page.navigate", {"url": url}, session=True)
        self.wait_event("Page.loadEventFired")

    def evaluate(self, js):
        result = self.call("Runtime.evaluate", {"expression": js, "returnByValue": True, "awaitPromise": True}, session=True)
        if "exceptionDetails" in result:
            raise RuntimeError(result["exceptionDetails"].get("exception", {}).get("description", "exception"))
        return result.get("result", {}).get("value")

    def screenshot(self, path, width, height):
        self.call("Emulation.setDeviceMetricsOverride", {"width": width, "height": height, "deviceScaleFactor": 1,
                                                          "mobile": width < 700}, session=True)
        time.sleep(0.3)
        data = self.call("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True}, session=True)["data"]
        with open(path, "wb") as file:
            file.write(base64.b64decode(data))

    def quit(self):
        try:
            self.call("Browser.close", timeout=5)
        except Exception:
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
        shutil.rmtree(self.profile, ignore_errors=True)


def main():
    chromium = next((p for p in (os.environ.get("CHROMIUM"), shutil.which("chromium"), shutil.which("chromium-browser")) if p), None)
    if not chromium:
        print(json.dumps({"ok": False, "error": "no chromium on PATH"}), flush=True)
        return 1
    browser = Browser(chromium)
    print(json.dumps({"ok": True, "ready": True}), flush=True)
    for line in sys.stdin:
        try:
            command = json.loads(line)
            kind = command.get("cmd")
            if kind == "open":
                browser.open(command["url"])
                answer = {"ok": True}
            elif kind == "eval":
                answer = {"ok": True, "value": browser.evaluate(command["js"])}
            elif kind == "clearCookies":
                browser.call("Network.clearBrowserCookies", session=True)
                answer = {"ok": True}
            elif kind == "shot":
                browser.screenshot(command["path"], command.get("width", 1280), command.get("height", 900))
                answer = {"ok": True}
            elif kind == "quit":
                break
            else:
                answer = {"ok": False, "error": f"unknown command {kind}"}
        except Exception as error:  # the test reads the reason
            answer = {"ok": False, "error": f"{type(error).__name__}: {error}"}
        print(json.dumps(answer), flush=True)
    browser.quit()
    return 0


if __name__ == "__main__":
    sys.exit(main())
