/* weft: the command line. One table of commands; main only dispatches it. */
#include "autoconf.h"

#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

#define LOCAL_RUN (CLI_O_INPUT | CLI_O_PLUGIN_PATH | CLI_O_DEFS | CLI_O_QUIET)
#define ON_REDIS (CLI_REDIS | CLI_HTTP)

static const cli_cmd commands[] = {
    {"run", "FILE.lua|FILE.json", "run a workflow in this process",
     "Task transitions go to stderr as they happen; the workflow's output JSON is\n"
     "the last line of stdout. Exit 0 completed, 1 failed/terminated/timed out.",
     LOCAL_RUN, 1, CLI_LOCAL, cli_run},
    {"compile", "FILE.lua", "print the definition as Conductor JSON",
     "The DSL alone: no plugins are loaded, so any task type compiles.", 0, 1, CLI_LOCAL,
     cli_compile},
    {"validate", "FILE.lua|FILE.json", "check a definition", NULL,
     CLI_O_PLUGIN_PATH | CLI_O_DEFS, 1, CLI_LOCAL, cli_validate},
    {"plugins", "", "list plugins and their task types",
     "Exit 1 when a plugin failed to load.", CLI_O_PLUGIN_PATH, 0, CLI_LOCAL, cli_plugins},
    {"start", "FILE|NAME", "start a workflow; prints the new workflow id",
     "FILE.lua or FILE.json is compiled here; a NAME is a registered definition.",
     CLI_O_INPUT | CLI_O_PLUGIN_PATH | CLI_O_VERSION | CLI_O_CORRELATION_ID |
         CLI_O_IDEMPOTENCY_KEY | CLI_O_REMOTE,
     1, ON_REDIS | CLI_PLUGINS, cli_start},
    {"status", "ID", "the workflow as Conductor's Workflow JSON", NULL, CLI_O_REMOTE, 1,
     ON_REDIS, cli_status},
    {"wait", "ID", "until it ends; prints its output",
     "Exit 0 completed, 1 failed/terminated/timed out, 3 still running after --timeout.",
     CLI_O_TIMEOUT | CLI_O_REMOTE, 1, ON_REDIS, cli_wait},
    {"watch", "ID", "its transitions, history first, then live", NULL, CLI_O_REMOTE, 1,
     ON_REDIS, cli_watch},
    {"register", "FILE", "store a definition (versioned)", NULL,
     CLI_O_PLUGIN_PATH | CLI_O_REMOTE, 1, ON_REDIS | CLI_PLUGINS, cli_register},
    {"terminate", "ID", "end the workflow as TERMINATED",
     "Applied even to a busy workflow; --timeout S (default 10) caps the wait for\n"
     "it to land (exit 3 past it).",
     CLI_O_REASON | CLI_O_TIMEOUT | CLI_O_REMOTE, 1, ON_REDIS, cli_terminate},
    {"pause", "ID", "schedule nothing new until resumed",
     "Applied even to a busy workflow; --timeout S (default 10) caps the wait for\n"
     "it to land (exit 3 past it).",
     CLI_O_TIMEOUT | CLI_O_REMOTE, 1, ON_REDIS, cli_pause},
    {"resume", "ID", "resume a paused workflow",
     "--timeout S (default 10) caps the wait for it to land (exit 3 past it).",
     CLI_O_TIMEOUT | CLI_O_REMOTE, 1, ON_REDIS, cli_resume},
    {"retry", "ID", "retry the failed task of a failed workflow", NULL, CLI_O_REMOTE, 1,
     ON_REDIS, cli_retry},
    {"restart", "ID", "run an ended workflow again from the start", NULL, CLI_O_REMOTE, 1,
     ON_REDIS, cli_restart},
    {"signal", "ID REF [JSON]", "complete a WAIT (or any waiting task)",
     "JSON is the task's output; --status FAILED fails it instead.",
     CLI_O_STATUS | CLI_O_REASON | CLI_O_REMOTE, 1, ON_REDIS, cli_signal},
    {"secret", "set NAME|list|delete NAME", "secrets for ${secrets.NAME}",
     "set reads the value on stdin. Kept in Redis (not through --api); weft run\n"
     "takes them from the environment, WEFT_SECRET_NAME.",
     CLI_O_REMOTE, 1, CLI_REDIS, cli_secret},
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
    if ((rc = cli_parse(argc, argv, &c)))
        return rc;
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
    if ((rc = cli_check(&c, cmd)))
        return rc;
    if (cmd->where & CLI_LOCAL)
        return cmd->run(&c, NULL);
    return cli_remote(cmd, &c);
}
