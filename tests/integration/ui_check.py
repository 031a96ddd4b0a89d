#!/usr/bin/python3
"""weftd's web UI in a real headless Chromium, driven over the DevTools
protocol (python3-websocket): the runs page lists the runs ui.sh started,
a failed run's page shows its failed task and reason, the buttons act (a
terminate, a WAIT signalled), the queues page lists the daemon, and QUEUE,
a queue holding a task no worker polls, first, saying so. Prints
"ok - ..." / "not ok - ..." lines; exits 1 on any failure.

usage: ui_check.py API TOKEN SHOTS FAILED_ID WAIT_ID WAIT2_ID DAEMON QUEUE
"""
import base64
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request

import websocket

API, TOKEN, SHOTS, FAILED, WAIT1, WAIT2, DAEMON, QUEUE = sys.argv[1:9]
failures = 0


def ok(what):
    print(f"ok - {what}", flush=True)


def not_ok(what, detail=""):
    global failures
    failures += 1
    print(f"not ok - {what}", flush=True)
    if detail:
        print(f"# {detail}"[:2000], flush=True)


def rest(path):
    req = urllib.request.Request(API + path, headers={"Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read().decode())


def rest_status(wf, want, seconds=15):
    """The run's status through the REST API, once it is want (or the time is up)."""
    end = time.time() + seconds
    while True:
        got = rest(f"/api/workflow/{wf}?includeTasks=false")["status"]
        if got == want or time.time() > end:
            return got
        time.sleep(0.1)


class Browser:
    """One Chromium and its first page, over the DevTools protocol."""

    def __init__(self, profile):
        self.proc = subprocess.Popen(
            ["chromium", "--headless=new", "--no-sandbox", "--disable-gpu",
             "--disable-dev-shm-usage", "--no-first-run", "--remote-debugging-port=0",
             "--remote-allow-origins=*", f"--user-data-dir={profile}",
             "--window-size=1400,1000", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        port_file = os.path.join(profile, "DevToolsActivePort")
        end = time.time() + 30
        while not os.path.exists(port_file) or not open(port_file).read().strip():
            if time.time() > end or self.proc.poll() is not None:
                raise RuntimeError("chromium did not start")
            time.sleep(0.1)
        port = open(port_file).read().split()[0]
        pages = []
        while not pages:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list") as r:
                pages = [t for t in json.loads(r.read()) if t["type"] == "page"]
        self.ws = websocket.create_connection(pages[0]["webSocketDebuggerUrl"], timeout=30)
        self.next_id = 0
        self.errors = []
        self.call("Runtime.enable")
        self.call("Page.enable")

    def call(self, method, **params):
        self.next_id += 1
        me = self.next_id
        self.ws.send(json.dumps({"id": me, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("method") == "Runtime.exceptionThrown":
                self.errors.append(msg["params"]["exceptionDetails"])
            if msg.get("id") == me:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})

    def js(self, expr):
        r = self.call("Runtime.evaluate", expression=expr, awaitPromise=True, returnByValue=True)
        if "exceptionDetails" in r:
            raise RuntimeError(f"{expr}: {r['exceptionDetails'].get('text')}")
        return r["result"].get("value")

    def until(self, expr, seconds=15):
        """Poll the page until expr is truthy: its value, or None. An
        expression that throws (the page is still loading) counts as false."""
        end = time.time() + seconds
        while time.time() < end:
            try:
                v = self.js(expr)
            except RuntimeError:
                v = None
            if v:
                return v
            time.sleep(0.1)
        return None

    def go(self, url):
        self.call("Page.navigate", url=url)

    def shot(self, name):
        data = self.call("Page.captureScreenshot", format="png")["data"]
        path = os.path.join(SHOTS, name)
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))
        return os.path.getsize(path)

    def close(self):
        self.proc.kill()
        self.proc.wait()


def check(what, got, detail=""):
    if got:
        ok(what)
    else:
        not_ok(what, detail)
    return got


profile = tempfile.mkdtemp(prefix="weft-ui-")
b = Browser(profile)
try:
    # no token yet: the page asks for it
    b.go(API + "/#/runs")
    check("without a token the page asks for it",
          b.until("document.getElementById('token-dialog').open"))
    b.js(f"document.getElementById('token-input').value = {json.dumps(TOKEN)};"
         "document.getElementById('token-save').click()")

    # the runs page lists the runs started
    ids = [FAILED, WAIT1, WAIT2]
    listed = b.until("(() => { const r = [...document.querySelectorAll('#runs tr[data-id]')]"
                     ".map(e => e.dataset.id); return " + json.dumps(ids) +
                     ".every(i => r.includes(i)) && r; })()")
    check("the runs page lists the runs the test started", listed, b.js("document.body.innerText"))
    check("the counts per status: 1 FAILED",
          b.until("document.querySelector('[data-count=FAILED] b')?.textContent === '1'"))
    check("the counts per status: 3 RUNNING (two wait, one waits for a worker of QUEUE)",
          b.until("document.querySelector('[data-count=RUNNING] b')?.textContent === '3'"))
    check("the runs page writes no 'null' or 'undefined'",
          b.until("!/null|undefined/.test(document.getElementById('main').innerText)"),
          b.js("document.getElementById('main').innerText"))
    size = b.shot("ui-runs.png")
    check(f"a screenshot of the runs page ({size} bytes)", size > 10000)

    # a filter: only the failed one
    b.js("location.hash = '#/runs?status=FAILED'")
    rows = b.until("(() => { const r = [...document.querySelectorAll('#runs tr[data-id]')]"
                   ".map(e => e.dataset.id); return r.length === 1 && r[0]; })()")
    check("the status filter shows the failed run only", rows == FAILED, str(rows))
    b.js("location.hash = '#/runs?corr=ui-failing'")
    rows = b.until("(() => { const r = [...document.querySelectorAll('#runs tr[data-id]')]"
                   ".map(e => e.dataset.id); return r.length === 1 && r[0]; })()")
    check("the correlation id filter", rows == FAILED, str(rows))

    # a failed run's page: its failed task and reason
    b.js(f"location.hash = '#/run/{FAILED}'")
    check("the failed run's page shows its failed task",
          b.until("document.querySelector('#timeline tr[data-ref=explode] .badge')?.dataset.status === 'FAILED'"))
    check("and the run's reason",
          b.until("(document.getElementById('run-reason')?.textContent || '').includes('kaboom')"))
    check("the graph marks the failed task",
          b.until("document.querySelector('.node[data-ref=explode]')?.classList.contains('s-FAILED')"))
    b.js("document.querySelector('#timeline tr[data-ref=explode]').click()")
    check("the task's panel shows its reason",
          b.until("(document.getElementById('task-reason')?.textContent || '').includes('kaboom')"))
    check("the task's panel shows its log",
          b.until("(document.getElementById('task-logs')?.textContent || '').includes('nothing logged')"))
    size = b.shot("ui-run-failed.png")
    check(f"a screenshot of the failed run ({size} bytes)", size > 10000)
    check("the failed run offers retry and restart",
          b.until("!!document.querySelector('[data-action=retry]') && !!document.querySelector('[data-action=restart]')"))

    # an action: terminate a running run
    b.js(f"location.hash = '#/run/{WAIT1}'")
    check("a running run offers terminate", b.until("!!document.querySelector('[data-action=terminate]')"))
    b.js("document.querySelector('[data-action=terminate]').click()")
    check("the terminate button terminated it (REST says TERMINATED)",
          rest_status(WAIT1, "TERMINATED") == "TERMINATED")
    check("the page shows it TERMINATED",
          b.until("document.querySelector('h1 .badge')?.dataset.status === 'TERMINATED'"))
    check("the status lane shows the change live",
          b.until("(document.getElementById('lane')?.textContent || '').includes('TERMINATED')"))

    # signal a WAIT
    b.js(f"location.hash = '#/run/{WAIT2}'")
    b.until("!!document.querySelector('#timeline tr[data-ref=hold]')")
    b.js("document.querySelector('#timeline tr[data-ref=hold]').click()")
    check("a waiting task offers a signal", b.until("!!document.getElementById('signal')"))
    check("and shows its log",
          b.until("(document.getElementById('task-logs')?.textContent || '').includes('waiting for the approval mail')"))
    b.js("document.getElementById('signal').click()")
    check("the signal completed the run (REST says COMPLETED)",
          rest_status(WAIT2, "COMPLETED") == "COMPLETED")
    check("its timeline draws the wait across the run",
          b.until("(() => { const r = document.querySelector('#timeline tr[data-ref=hold]');"
                  " const bar = r && r.querySelector('.runbar'), track = r && r.querySelector('.track');"
                  " return bar && bar.getBoundingClientRect().width > 0.5 * track.getBoundingClientRect().width; })()"))
    size = b.shot("ui-run.png")
    check(f"a screenshot of a run ({size} bytes)", size > 10000)

    # queues and daemons
    b.js("location.hash = '#/queues'")
    check("the queues page lists the daemon",
          b.until(f"!!document.querySelector('#daemons tr[data-daemon=\"{DAEMON}\"]')"))
    check("and the LAMBDA queue",
          b.until("!!document.querySelector('#queues tr[data-queue=LAMBDA]')"))
    # a queue no daemon serves and no worker polls, holding a task: listed,
    # and first, saying so in words
    row = f"document.querySelector('#queues tr[data-queue=\"{QUEUE}\"]')"
    check(f"and {QUEUE}, a queue no one serves, with its waiting task",
          b.until(f"{row} && {row}.children[1].textContent === '1'"))
    said = b.until(f"{row} && {row}.querySelector('.problem') && {row}.querySelector('.problem').textContent")
    check(f"it says no worker has polled it: \"{said}\"",
          bool(said) and said.startswith("no worker has polled"))
    check("the unpolled queue comes first",
          b.js("document.querySelector('#queues tbody tr').dataset.queue") == QUEUE)
    size = b.shot("ui-queues.png")
    check(f"a screenshot of the queues page ({size} bytes)", size > 5000)

    check("no script error on any page", not b.errors, json.dumps(b.errors)[:1500])
except Exception as e:  # a broken page or browser is a failure, not a crash
    not_ok(f"the UI check stopped: {e}")
finally:
    b.close()
print(f"{'FAIL' if failures else 'PASS'}: {failures} failed")
sys.exit(1 if failures else 0)
