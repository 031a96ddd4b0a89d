/* weft: the command line. One table of commands; main only dispatches it. */
#include "autoconf.h"

#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

/* Redis-side commands run over Redis or through a weftd's REST API. */
#define ON_REDIS (CLI_REDIS | CLI_HTTP)
/* terminate, pause, resume are recorded first, then applied. */
#define LANDS                                                                                      \
    "Applied even to a busy workflow; --timeout S (default 10) caps the wait for\n"                \
    "it to land (exit 3 past it)."

static const cli_cmd commands[] = {
    {.name = "run",
     .args = "FILE.lua|FILE.json",
     .summary = "run a workflow in this process",
     .about = "Task transitions go to stderr as they happen; the workflow's output JSON is\n"
              "the last line of stdout. Exit 0 completed, 1 failed/terminated/timed out.",
     .opts = CLI_O_INPUT | CLI_O_PLUGIN_PATH | CLI_O_DEFS | CLI_O_QUIET,
     .min_args = 1,
     .where = CLI_LOCAL,
     .run = cli_run},
    {.name = "compile",
     .args = "FILE.lua",
     .summary = "print the definition as Conductor JSON",
     .about = "The DSL alone: no plugins are loaded, so any task type compiles.",
     .min_args = 1,
     .where = CLI_LOCAL,
     .run = cli_compile},
    {.name = "validate",
     .args = "FILE.lua|FILE.json",
     .summary = "check a definition",
     .opts = CLI_O_PLUGIN_PATH | CLI_O_DEFS,
     .min_args = 1,
     .where = CLI_LOCAL,
     .run = cli_validate},
    {.name = "plugins",
     .args = "",
     .summary = "list plugins and their task types",
     .about = "Exit 1 when a plugin failed to load.",
     .opts = CLI_O_PLUGIN_PATH,
     .where = CLI_LOCAL,
     .run = cli_plugins},
    {.name = "start",
     .args = "FILE|NAME",
     .summary = "start a workflow; prints the new workflow id",
     .about = "FILE.lua or FILE.json is compiled here; a NAME is a registered definition.",
     .opts = CLI_O_INPUT | CLI_O_PLUGIN_PATH | CLI_O_VERSION | CLI_O_CORRELATION_ID |
             CLI_O_IDEMPOTENCY_KEY | CLI_O_PRIORITY | CLI_O_DOMAIN | CLI_O_REMOTE,
     .min_args = 1,
     .where = ON_REDIS | CLI_PLUGINS,
     .run = cli_start},
    {.name = "status",
     .args = "ID",
     .summary = "the workflow and its tasks; -o json: Conductor's Workflow JSON",
     .about = "A summary (name, status, times, duration, why it failed and which task),\n"
              "then one line per task: ref, type, status, attempts, duration, reason.\n"
              "-o json prints the workflow as Conductor's Workflow JSON instead.",
     .opts = CLI_O_SHOW | CLI_O_REMOTE,
     .min_args = 1,
     .where = ON_REDIS,
     .run = cli_status},
    {.name = "list",
     .args = "",
     .summary = "the runs, newest first: by status, name, start time",
     .about = "A table: id, workflow and version, status, start time, how long it took\n"
              "(or runs so far), correlation id, reason. Every run weftd keeps is found:\n"
              "those not ended and those that ended within its retention. -o json prints\n"
              "the search's answer ({totalHits, results: [WorkflowSummary]}).\n"
              "  weft list --status FAILED --since 1h\n"
              "  weft list --name orders,refunds --status RUNNING,PAUSED --limit 100",
     .opts = CLI_O_SHOW | CLI_O_REMOTE | CLI_O_STATUS | CLI_O_NAME | CLI_O_SINCE | CLI_O_LIMIT |
             CLI_O_CORRELATION_ID,
     .min_args = 0,
     .where = ON_REDIS,
     .run = cli_list},
    {.name = "wait",
     .args = "ID",
     .summary = "until it ends; prints its output",
     .about = "Exit 0 completed, 1 failed/terminated/timed out, 3 still running after --timeout.",
     .opts = CLI_O_TIMEOUT | CLI_O_REMOTE,
     .min_args = 1,
     .where = ON_REDIS,
     .run = cli_wait},
    {.name = "watch",
     .args = "ID",
     .summary = "its transitions, history first, then live",
     .about = "One line per transition: local time, task (or workflow), status, how long a\n"
              "task took when it ends (since it started, else since it was scheduled),\n"
              "reason. -o json prints the events as JSON lines instead. Ends with the\n"
              "workflow: exit 0 completed, 1 failed/terminated/timed out. A paused\n"
              "workflow has not ended: watch waits on until it is resumed and ends.",
     .opts = CLI_O_SHOW | CLI_O_REMOTE,
     .min_args = 1,
     .where = ON_REDIS,
     .run = cli_watch},
    {.name = "register",
     .args = "FILE",
     .summary = "store a definition (versioned)",
     .opts = CLI_O_PLUGIN_PATH | CLI_O_REMOTE,
     .min_args = 1,
     .where = ON_REDIS | CLI_PLUGINS,
     .run = cli_register},
    {.name = "terminate",
     .args = "ID",
     .summary = "end the workflow as TERMINATED",
     .about = LANDS,
     .opts = CLI_O_REASON | CLI_O_TIMEOUT | CLI_O_REMOTE,
     .min_args = 1,
     .where = ON_REDIS,
     .run = cli_terminate},
    {.name = "pause",
     .args = "ID",
     .summary = "schedule nothing new until resumed",
     .about = LANDS,
     .opts = CLI_O_TIMEOUT | CLI_O_REMOTE,
     .min_args = 1,
     .where = ON_REDIS,
     .run = cli_pause},
    {.name = "resume",
     .args = "ID",
     .summary = "resume a paused workflow",
     .about = LANDS,
     .opts = CLI_O_TIMEOUT | CLI_O_REMOTE,
     .min_args = 1,
     .where = ON_REDIS,
     .run = cli_resume},
    {.name = "retry",
     .args = "ID",
     .summary = "retry the failed task of a failed workflow",
     .opts = CLI_O_REMOTE,
     .min_args = 1,
     .where = ON_REDIS,
     .run = cli_retry},
    {.name = "restart",
     .args = "ID",
     .summary = "run an ended workflow again from the start",
     .opts = CLI_O_REMOTE,
     .min_args = 1,
     .where = ON_REDIS,
     .run = cli_restart},
    {.name = "signal",
     .args = "ID REF [JSON]",
     .summary = "complete a WAIT (or any waiting task)",
     .about = "JSON is the task's output; --status FAILED fails it instead.",
     .opts = CLI_O_STATUS | CLI_O_REASON | CLI_O_REMOTE,
     .min_args = 1,
     .where = ON_REDIS,
     .run = cli_signal},
    {.name = "secret",
     .args = "set NAME|list|delete NAME",
     .summary = "secrets for ${secrets.NAME}",
     .about = "set reads the value on stdin. Kept in Redis (not through --api); weft run\n"
              "takes them from the environment, WEFT_SECRET_NAME.",
     .opts = CLI_O_REMOTE,
     .min_args = 1,
     .where = CLI_REDIS,
     .run = cli_secret},
};

#define NCOMMANDS (sizeof commands / sizeof commands[0])

int main(int argc, char **argv)
{
    const cli_cmd *cmd;
    cli c;
    int rc;
    if (argc > 1 && !strcmp(argv[1], "--version")) {
        printf("weft %s (plugin ABI %d)\n", PACKAGE_VERSION, WEFT_ABI_MAJOR);
        return EXIT_OK;
    }
    if (argc > 1 && !strcmp(argv[1], "help")) {
        if (argc < 3) {
            cli_usage(stdout, commands, NCOMMANDS);
            return EXIT_OK;
        }
        if (!(cmd = cli_find(commands, NCOMMANDS, argv[2])))
            return die(EXIT_USAGE, "unknown command '%s' (see weft --help)", argv[2]);
        cli_cmd_usage(stdout, cmd);
        return EXIT_OK;
    }
    if ((rc = cli_parse(argc, argv, &c))) return rc;
    if (!c.cmd) {
        cli_usage(c.help ? stdout : stderr, commands, NCOMMANDS);
        return c.help ? EXIT_OK : EXIT_USAGE;
    }
    if (!(cmd = cli_find(commands, NCOMMANDS, c.cmd)))
        return die(EXIT_USAGE, "unknown command '%s' (see weft --help)", c.cmd);
    if (c.help) {
        cli_cmd_usage(stdout, cmd);
        return EXIT_OK;
    }
    if ((rc = cli_check(&c, cmd))) return rc;
    if (cmd->where & CLI_LOCAL) return cmd->run(&c, NULL);
    return cli_remote(cmd, &c);
}
