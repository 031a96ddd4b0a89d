// The official Conductor JavaScript SDK (@io-orkes/conductor-javascript),
// unmodified, against weftd's REST API:
//   (a) a workflow started with an inline definition (StartWorkflowRequest.workflowDef):
//       SIMPLE -> HTTP (a local JSON route) -> LAMBDA on the reply's body -> SIMPLE;
//   (b) its SIMPLE tasks served by the SDK's own worker API (TaskManager);
//   (c) the execution read back with the SDK and checked;
//   (d) a definition and a TaskDef registered through the SDK's metadata client and
//       started by name (both start calls); a task the worker FAILs is handed out
//       again (retryCount 1), one it fails terminally is not; pause, resume and
//       terminate through the SDK;
//   (e) the newer worker API (TaskHandler) without decorators: worker() applied as a
//       plain function (registering its TaskDef), and a worker object: lease
//       extension heartbeats past the response timeout, IN_PROGRESS with
//       callbackAfterSeconds.
//
//   CONDUCTOR_SERVER_URL=http://127.0.0.1:PORT/api HTTPD_URL=http://127.0.0.1:PORT2 \
//       node conductor_sdk.mjs
//
// Prints "ok - ..." / "not ok - ..." lines and "N passed, N failed"; exits 0
// when all passed. Plain JavaScript on purpose: no TypeScript, no decorators.
import {
  MetadataClient,
  NonRetryableException,
  TaskHandler,
  TaskManager,
  WorkflowExecutor,
  httpTask,
  orkesConductorClient,
  simpleTask,
  taskDefinition,
  worker,
} from "@io-orkes/conductor-javascript";

const SERVER = process.env.CONDUCTOR_SERVER_URL;
const HTTPD = (process.env.HTTPD_URL || "").replace(/\/$/, "");
const DEADLINE_MS = Number(process.env.SDK_TEST_TIMEOUT_MS || 20000);
if (!SERVER || !HTTPD) {
  console.error("usage: CONDUCTOR_SERVER_URL=http://host:port/api HTTPD_URL=http://host:port node conductor_sdk.mjs");
  process.exit(2);
}

let passed = 0;
let failed = 0;
const ok = (what) => { passed++; console.log(`ok - ${what}`); };
const notOk = (what, detail) => {
  failed++;
  console.log(`not ok - ${what}`);
  if (detail !== undefined) console.log(`# ${typeof detail === "string" ? detail : JSON.stringify(detail)}`.slice(0, 2000));
};
const check = (what, cond, detail) => (cond ? ok(what) : notOk(what, detail));
const eq = (what, got, want) => {
  const g = JSON.stringify(got), w = JSON.stringify(want);
  check(`${what}: ${w}`, g === w, `got ${g}`);
};
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const errText = (e) => (e && (e.message || JSON.stringify(e))) || String(e);

// Everything the SDK logs goes out as TAP comments, so it never reads as a result.
const logger = {
  debug: () => {},
  info: (...a) => console.log("# [sdk]", ...a),
  warn: (...a) => console.log("# [sdk warn]", ...a),
  error: (...a) => console.log("# [sdk error]", ...a.map(errText)),
};

const TERMINAL = new Set(["COMPLETED", "FAILED", "TIMED_OUT", "TERMINATED"]);

// Reads the workflow through the SDK until it ends (or the deadline).
async function waitEnd(executor, id, ms = DEADLINE_MS) {
  const end = Date.now() + ms;
  let wf;
  for (;;) {
    wf = await executor.getWorkflow(id, true);
    if (TERMINAL.has(wf.status) || Date.now() > end) return wf;
    await sleep(100);
  }
}

async function waitTask(executor, id, ref, status, ms = DEADLINE_MS) {
  const end = Date.now() + ms;
  for (;;) {
    const wf = await executor.getWorkflow(id, true);
    const t = (wf.tasks || []).find((x) => x.referenceTaskName === ref && x.status === status);
    if (t || Date.now() > end) return t;
    await sleep(100);
  }
}

// What the workers saw, for the checks.
const seen = { greet: [], invoice: [], flaky: [], fatal: [], slow: [], later: [] };

// Workers in the legacy (decorator-free) form: { taskDefName, execute }.
const workers = [
  {
    taskDefName: "sdk_greet",
    execute: async (task) => {
      seen.greet.push(task);
      return { status: "COMPLETED", outputData: { greeting: `hello, ${task.inputData.name}` } };
    },
  },
  {
    taskDefName: "sdk_invoice",
    execute: async (task) => {
      seen.invoice.push(task);
      const { total, greeting } = task.inputData;
      return { status: "COMPLETED", outputData: { line: `${greeting}: ${total}`, doubled: total * 2 } };
    },
  },
  {
    // fails its first attempt by reporting FAILED; its TaskDef allows one retry
    taskDefName: "sdk_flaky",
    execute: async (task) => {
      seen.flaky.push(task);
      if (task.retryCount === 0)
        return { status: "FAILED", reasonForIncompletion: "first attempt fails", outputData: {} };
      return { status: "COMPLETED", outputData: { attempt: task.retryCount } };
    },
  },
  {
    // throws NonRetryableException: the SDK reports FAILED_WITH_TERMINAL_ERROR
    taskDefName: "sdk_fatal",
    execute: async (task) => {
      seen.fatal.push(task);
      throw new NonRetryableException("cannot ever work");
    },
  },
];

async function main() {
  const client = await orkesConductorClient({ serverUrl: SERVER, logger });
  const executor = new WorkflowExecutor(client);
  const metadata = new MetadataClient(client);

  const manager = new TaskManager(client, workers, {
    logger,
    options: { pollInterval: 50, concurrency: 2, workerID: `sdk-${process.pid}`, batchPollingTimeout: 500 },
  });
  manager.startPolling();
  check("TaskManager polls", manager.isPolling);

  try {
    // ---- (a)-(c): an inline definition: SIMPLE, HTTP, LAMBDA, SIMPLE ----
    const inline = {
      name: "sdk_inline",
      version: 1,
      inputParameters: ["name", "url"],
      tasks: [
        simpleTask("greet", "sdk_greet", { name: "${workflow.input.name}" }),
        httpTask("fetch", { uri: "${workflow.input.url}/json", method: "GET" }),
        {
          name: "price",
          taskReferenceName: "price",
          type: "LAMBDA",
          inputParameters: {
            qty: "${fetch.output.response.body.qty}",
            unit: "${fetch.output.response.body.unit}",
            scriptExpression: "return input.qty * input.unit",
          },
        },
        simpleTask("invoice", "sdk_invoice", {
          total: "${price.output.result}",
          greeting: "${greet.output.greeting}",
        }),
      ],
      outputParameters: {
        total: "${price.output.result}",
        line: "${invoice.output.line}",
        doubled: "${invoice.output.doubled}",
        httpStatus: "${fetch.output.response.statusCode}",
      },
      schemaVersion: 2,
      timeoutSeconds: 0,
    };
    const id = await executor.startWorkflow({
      name: inline.name,
      version: 1,
      input: { name: "ann", url: HTTPD },
      correlationId: "sdk-inline-1",
      workflowDef: inline,
    });
    check("startWorkflow with an inline workflowDef answers an id", typeof id === "string" && id.length > 0, id);

    const wf = await waitEnd(executor, id);
    eq("inline workflow status", wf.status, "COMPLETED");
    eq("inline workflow output", wf.output, { total: 12, line: "hello, ann: 12", doubled: 24, httpStatus: 200 });
    eq("correlationId kept", wf.correlationId, "sdk-inline-1");
    eq("workflowName", wf.workflowName, "sdk_inline");
    const tasks = wf.tasks || [];
    eq("task types in order", tasks.map((t) => t.taskType), ["SIMPLE", "HTTP", "LAMBDA", "SIMPLE"]);
    eq("task statuses", tasks.map((t) => t.status), ["COMPLETED", "COMPLETED", "COMPLETED", "COMPLETED"]);
    const byRef = Object.fromEntries(tasks.map((t) => [t.referenceTaskName, t]));
    eq("HTTP task's reply body", byRef.fetch?.outputData?.response?.body, { qty: 3, unit: 4 });
    eq("LAMBDA's result from the HTTP reply", byRef.price?.outputData?.result, 12);
    eq("the SDK worker got the LAMBDA's result as input", seen.invoice[0]?.inputData, { total: 12, greeting: "hello, ann" });
    eq("the first SDK worker got the workflow input", seen.greet[0]?.inputData, { name: "ann" });
    eq("worker output stored on the task", byRef.invoice?.outputData, { line: "hello, ann: 12", doubled: 24 });
    eq("the worker's id recorded", byRef.greet?.workerId, `sdk-${process.pid}`);
    check("the definition is embedded in the execution", wf.workflowDefinition?.name === "sdk_inline",
      wf.workflowDefinition);
    const light = await executor.getWorkflow(id, false);
    check("getWorkflow(id, includeTasks=false) leaves the tasks out",
      light.status === "COMPLETED" && !(light.tasks && light.tasks.length), light.tasks);
    const exec = await executor.getExecution(id);
    eq("getExecution agrees", [exec.status, (exec.tasks || []).length], ["COMPLETED", 4]);

    // ---- (d) metadata: a TaskDef with retryCount 1, a definition, start by name ----
    await metadata.registerTask(taskDefinition({
      name: "sdk_flaky", retryCount: 1, retryLogic: "FIXED", retryDelaySeconds: 0,
      responseTimeoutSeconds: 30, timeoutSeconds: 60,
    }));
    ok("registerTask (a TaskDef with retryCount 1)");
    const td = await metadata.getTask("sdk_flaky");
    eq("getTask reads it back", [td?.name, td?.retryCount], ["sdk_flaky", 1]);
    await metadata.registerTasks([taskDefinition({ name: "sdk_fatal", retryCount: 1, retryDelaySeconds: 0 })]);
    ok("registerTasks");

    const named = {
      name: "sdk_registered",
      version: 1,
      tasks: [
        simpleTask("first", "sdk_greet", { name: "${workflow.input.who}" }),
        simpleTask("flaky", "sdk_flaky", { from: "${first.output.greeting}" }),
      ],
      outputParameters: { greeting: "${first.output.greeting}", attempt: "${flaky.output.attempt}" },
      schemaVersion: 2,
    };
    await metadata.registerWorkflowDef(named, true);
    ok("registerWorkflowDef");
    const back = await metadata.getWorkflowDef("sdk_registered");
    eq("getWorkflowDef reads it back", [back?.name, back?.version, back?.tasks?.length], ["sdk_registered", 1, 2]);

    const id2 = await executor.startWorkflow({ name: "sdk_registered", version: 1, input: { who: "bob" } });
    check("startWorkflow by name (StartWorkflowRequest without workflowDef)", typeof id2 === "string" && id2.length > 0, id2);
    const wf2 = await waitEnd(executor, id2);
    eq("registered workflow status", wf2.status, "COMPLETED");
    eq("registered workflow output", wf2.output, { greeting: "hello, bob", attempt: 1 });
    const flaky = (wf2.tasks || []).filter((t) => t.referenceTaskName === "flaky");
    eq("the FAILED task was retried once", flaky.map((t) => [t.status, t.retryCount]), [["FAILED", 0], ["COMPLETED", 1]]);
    eq("the failure's reason kept", flaky[0]?.reasonForIncompletion, "first attempt fails");
    eq("the worker was handed the task twice", seen.flaky.map((t) => t.retryCount), [0, 1]);

    const id3 = await executor.startWorkflowByName("sdk_registered", { who: "cy" }, 1, "by-name-3");
    check("startWorkflowByName (POST /api/workflow/{name})", typeof id3 === "string" && id3.length > 0, id3);
    const wf3 = await waitEnd(executor, id3);
    eq("started by name: status, output, correlationId", [wf3.status, wf3.output?.greeting, wf3.correlationId],
      ["COMPLETED", "hello, cy", "by-name-3"]);

    // ---- (d) a terminal failure is not retried ----
    const id4 = await executor.startWorkflow({
      name: "sdk_fatal_wf", input: {},
      workflowDef: { name: "sdk_fatal_wf", version: 1, tasks: [simpleTask("f", "sdk_fatal", {})] },
    });
    const wf4 = await waitEnd(executor, id4);
    eq("NonRetryableException fails the workflow", wf4.status, "FAILED");
    eq("FAILED_WITH_TERMINAL_ERROR, no retry despite retryCount 1",
      (wf4.tasks || []).map((t) => t.status), ["FAILED_WITH_TERMINAL_ERROR"]);
    check("the reason names the exception", /cannot ever work/.test(wf4.reasonForIncompletion || ""),
      wf4.reasonForIncompletion);

    // ---- (d) pause, resume, terminate ----
    const id5 = await executor.startWorkflow({
      name: "sdk_stuck", input: {},
      workflowDef: { name: "sdk_stuck", version: 1, tasks: [simpleTask("wait", "sdk_nobody_serves_this", {})] },
    });
    const sched = await waitTask(executor, id5, "wait", "SCHEDULED");
    check("a task nobody polls stays SCHEDULED", !!sched);
    await executor.pause(id5);
    eq("pause", (await executor.getWorkflow(id5, false)).status, "PAUSED");
    await executor.resume(id5);
    eq("resume", (await executor.getWorkflow(id5, false)).status, "RUNNING");
    await executor.terminate(id5, "stopped by the SDK test");
    const wf5 = await waitEnd(executor, id5);
    eq("terminate", wf5.status, "TERMINATED");
    check("terminate's reason kept", /stopped by the SDK test/.test(wf5.reasonForIncompletion || ""),
      wf5.reasonForIncompletion);
    check("the pending task is canceled",
      (wf5.tasks || []).every((t) => t.status === "CANCELED"), (wf5.tasks || []).map((t) => t.status));

    // ---- (e) TaskHandler: worker() as a function, a worker object ----
    // worker(options)(fn) is what the @worker decorator does, without the syntax.
    // Its TaskDef (registerTaskDef) gives a 2 s response timeout; the task takes
    // 3.5 s, so only the SDK's lease-extension heartbeats keep it alive.
    worker({
      taskDefName: "sdk_slow",
      registerTaskDef: true,
      taskDef: { retryCount: 0, responseTimeoutSeconds: 2, timeoutSeconds: 60 },
      leaseExtendEnabled: true,
      pollInterval: 50,
      workerId: "sdk-handler",
    })(async (task) => {
      seen.slow.push(task);
      await sleep(3500);
      return { status: "COMPLETED", outputData: { slept: 3500 } };
    });
    const handler = new TaskHandler({
      client,
      logger,
      scanForDecorated: true,
      workers: [{
        // IN_PROGRESS + callbackAfterSeconds: handed out again a second later
        taskDefName: "sdk_later",
        pollInterval: 50,
        execute: async (task) => {
          seen.later.push({ ...task, at: Date.now() });
          if (seen.later.length === 1)
            return { status: "IN_PROGRESS", callbackAfterSeconds: 1, outputData: { step: 1 } };
          return { status: "COMPLETED", outputData: { step: 2, before: task.outputData?.step ?? null } };
        },
      }],
    });
    await handler.startWorkers();
    check("TaskHandler starts its workers", handler.running ?? handler.isRunning);
    const slowDef = await metadata.getTask("sdk_slow");
    eq("TaskHandler registered the worker's TaskDef", [slowDef?.name, slowDef?.responseTimeoutSeconds], ["sdk_slow", 2]);
    try {
      const id6 = await executor.startWorkflow({
        name: "sdk_handler_wf", input: {},
        workflowDef: {
          name: "sdk_handler_wf", version: 1,
          tasks: [simpleTask("slow", "sdk_slow", {}), simpleTask("later", "sdk_later", {})],
          outputParameters: { slept: "${slow.output.slept}", step: "${later.output.step}", before: "${later.output.before}" },
        },
      });
      const wf6 = await waitEnd(executor, id6);
      eq("TaskHandler workflow status", wf6.status, "COMPLETED");
      eq("TaskHandler workflow output", wf6.output, { slept: 3500, step: 2, before: 1 });
      const t6 = wf6.tasks || [];
      eq("the polled task carries its TaskDef's response timeout", seen.slow[0]?.responseTimeoutSeconds, 2);
      eq("heartbeats kept the slow task past its response timeout: one attempt",
        t6.filter((t) => t.referenceTaskName === "slow").map((t) => t.status), ["COMPLETED"]);
      eq("the slow task ran once", seen.slow.length, 1);
      eq("the callback task was handed out twice, same id",
        [seen.later.length, seen.later[0]?.taskId === seen.later[1]?.taskId], [2, true]);
      const later = t6.find((t) => t.referenceTaskName === "later");
      check("the callback task was polled twice", later?.pollCount === 2, later?.pollCount);
      check("about a second between the two polls",
        seen.later.length === 2 && seen.later[1].at - seen.later[0].at >= 900,
        seen.later.map((t) => t.at));
    } finally {
      await handler.stopWorkers();
    }

    let threw = null;
    try {
      await executor.getWorkflow("no-such-workflow-id", false);
    } catch (e) {
      threw = e;
    }
    check("getWorkflow of an unknown id throws", threw !== null);
  } catch (e) {
    notOk("the SDK run threw", `${errText(e)}\n${e?.stack || ""}`);
  } finally {
    await manager.stopPolling();
  }
  console.log(`${passed} passed, ${failed} failed`);
  process.exit(failed === 0 && passed > 0 ? 0 : 1);
}

main().catch((e) => {
  console.log(`not ok - unexpected: ${errText(e)}`);
  console.log(`${passed} passed, ${failed + 1} failed`);
  process.exit(1);
});
