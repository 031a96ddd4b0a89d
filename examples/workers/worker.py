#!/usr/bin/env python3
"""An external weft worker in plain Python (standard library only).

It long-polls weftd's REST API for tasks named "greet", does the work, and
reports the result, exactly as a Conductor worker would:

    WEFT_API_URL=http://127.0.0.1:8080 python3 worker.py [--once]

WEFT_API_TOKEN is sent as a bearer token when set.
"""
import json
import os
import signal
import socket
import sys
import urllib.error
import urllib.request

API = os.environ.get("WEFT_API_URL", "http://127.0.0.1:8080").rstrip("/")
TOKEN = os.environ.get("WEFT_API_TOKEN")
TASK = os.environ.get("WEFT_TASK", "greet")
WORKER = "py-%s-%d" % (socket.gethostname(), os.getpid())
running = True


def call(method, path, body=None, timeout=30):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(API + path, data=data, method=method)
    req.add_header("Content-Type", "application/json")
    if TOKEN:
        req.add_header("Authorization", "Bearer " + TOKEN)
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        text = resp.read().decode()
        return resp.status, (json.loads(text) if text.startswith(("[", "{")) else text)


def work(task):
    """The task itself: input in, output out. Raise to fail the task."""
    name = task["inputData"].get("name") or "world"
    return {"text": "hello, %s" % name}


def handle(task):
    result = {"workflowInstanceId": task["workflowInstanceId"], "taskId": task["taskId"],
              "workerId": WORKER}
    try:
        result["outputData"] = work(task)
        result["status"] = "COMPLETED"
    except Exception as e:  # the task fails; its retry policy decides what next
        result["status"] = "FAILED"
        result["reasonForIncompletion"] = "%s: %s" % (type(e).__name__, e)
    call("POST", "/api/tasks", result)


def main():
    once = "--once" in sys.argv
    signal.signal(signal.SIGTERM, lambda *_: globals().update(running=False))
    while running:
        try:
            status, tasks = call("GET", "/api/tasks/poll/batch/%s?workerid=%s&count=1&timeout=1000"
                                 % (TASK, WORKER))
        except (urllib.error.URLError, OSError) as e:
            print("worker: weftd unreachable (%s); retrying" % e, file=sys.stderr)
            signal.sigtimedwait([signal.SIGTERM], 1)
            continue
        for task in tasks if status == 200 else []:
            handle(task)
            if once:
                return


if __name__ == "__main__":
    main()
